#include "assignment/assignment_agent.h"

#include <algorithm>
#include <cmath>

#include "base/jitter.h"

namespace kcl::assignment {

using std::chrono::milliseconds;

namespace {

// Whether `worker` is a member that is not stopping: one that still reads its leases.
bool reads_leases(const coordination::CoordinationView& view, const std::string& worker) {
  return std::any_of(view.workers.begin(), view.workers.end(),
                     [&](const auto& w) { return w.worker_id == worker && !w.draining; });
}

}  // namespace

AssignmentAgent::AssignmentAgent(coordination::CoordinationStore& coordination,
                                 leases::LeaseStore& leases, leases::HeldLeases& held,
                                 MembershipHold& hold, leases::LoadMeter* load,
                                 const LeaseConfig& config, const Clock& clock,
                                 MetricsSink& metrics, Logger* logger, std::uint64_t seed)
    : coordination_(coordination),
      held_(held),
      hold_(hold),
      load_(load),
      config_(config),
      clock_(clock),
      metrics_(metrics),
      logger_(logger),
      adopter_(held, leases, config, clock, metrics),
      membership_(coordination, hold, config, clock, metrics, seed,
                  Membership::Callbacks{[this] { return heartbeat_report(); },
                                        [this](const Status& why) { membership_ended(why); }}),
      lock_(coordination, membership_, config, clock, metrics, logger),
      leader_(leases, coordination, config, clock, metrics, logger),
      heartbeats_("heartbeat", "membership heartbeat", "worker " + config.worker_id, logger,
                  metrics, clock),
      polls_("own_entry_poll", "own-entry poll", "worker " + config.worker_id, logger, metrics,
             clock),
      discoveries_("lease_discovery", "lease discovery", "worker " + config.worker_id, logger,
                   metrics, clock),
      passes_("leader_pass", "leader pass", "leader " + config.worker_id, logger, metrics, clock),
      rng_(seed ^ 0x9e3779b97f4a7c15ULL) {
  leader_.set_authority([this] { return assign_veto(); });
  leader_.set_self_report([this] { return heartbeat_report(); });
}

void AssignmentAgent::set_call_runner(CallRunner* runner) {
  runner_ = runner;
  membership_.set_call_runner(runner);
  adopter_.set_call_runner(runner);
  lock_.set_call_runner(runner);
}

// A leader stops assigning once its own renewals (membership heartbeat, lock renewal) have
// failed for half the slack between its renew interval and the failover time: well before
// its hold lapses (at failover_time - lost_lease_margin) and so before any other worker may
// take the lock and fence it, with time left for a write in flight to land. It goes on
// when a renewal succeeds again.
std::optional<std::string> AssignmentAgent::assign_veto() const {
  // A pass in flight when this worker began to stop, or lost the lock, makes no more moves.
  if (adopter_.taking_stopped()) return "this worker is stopping";
  if (!lock_.leading()) return "this worker no longer leads";
  return hold_veto();
}

// A worker whose own renewals have not succeeded for half the slack between its renew
// interval and the failover time starts nothing new: neither a leader's moves nor a tenure of
// its own (its hold lapses soon; what it would adopt now another worker may get in a moment).
// Read from the hold basis (MembershipHold), which the leader's pass may ask from its lane.
std::optional<std::string> AssignmentAgent::hold_veto() const {
  auto deadline = hold_.hold_deadline();
  if (!deadline) return "this worker is not a member of the fleet";
  const auto slack = (config_.failover_time - config_.effective_renew_interval()) / 2;
  const auto now = clock_.now();
  if (now < *deadline - slack) return std::nullopt;
  const auto since =
      now - (*deadline - config_.failover_time + config_.effective_lost_lease_margin());
  return "its own heartbeat or lock renewal has not succeeded for " +
         std::to_string(std::chrono::duration_cast<milliseconds>(since).count()) +
         " ms; its hold lapses in " +
         std::to_string(std::chrono::duration_cast<milliseconds>(*deadline - now).count()) + " ms";
}

coordination::WorkerEntry AssignmentAgent::heartbeat_report() {
  coordination::WorkerEntry report;
  report.lease_count = static_cast<std::int64_t>(held_.held_count());
  if (load_) {
    std::vector<std::string> keys;
    for (const Lease& l : held_.held_leases()) keys.push_back(l.lease_key);
    report.lease_kbps = load_->rates(keys);
  }
  return report;
}

void AssignmentAgent::membership_ended(const Status& reason) {
  const Status why = reason.ok() ? Status(StatusCode::kLeaseLost,
                                          "worker " + config_.worker_id + " lost its membership")
                                 : Status(StatusCode::kLeaseLost, reason.message());
  adopter_.membership_ended(why);
}

std::vector<FailingCalls> AssignmentAgent::failing_calls() const {
  std::vector<FailingCalls> out;
  for (const coordination::ReportedSeries* s :
       {&heartbeats_, &lock_.renewals(), &polls_, &discoveries_, &passes_}) {
    if (auto since = s->series().since()) {
      out.push_back(
          {s->operation(), s->series().consecutive(), *since, s->series().last_failure()});
    }
  }
  return out;
}

void AssignmentAgent::log(LogLevel level, const std::string& message) const {
  if (logger_ && logger_->enabled(level)) {
    logger_->log(level, "worker " + config_.worker_id, message);
  }
}

milliseconds AssignmentAgent::jittered(milliseconds base) {
  return base::jittered(base, config_.interval_jitter, rng_);
}

CallTask<Clock::MonoTime> AssignmentAgent::heartbeat_task() {
  // The leader's lock renewals hold its membership (Membership::set_held_by_lock): its own
  // entry is not written meanwhile (one write per renew interval saved), and what its
  // heartbeat would report the leader takes from this worker directly.
  Membership::RenewResult r;
  if (lock_.leading() && !adopter_.taking_stopped()) {
    r.abandoned = membership_.check_lapse();
  } else {
    r = co_await membership_.renew();
    // A draining leader whose drain heartbeat failed hands the lock back once one lands: it
    // runs no pass any more, and renewing the lock would leave the fleet without a leader.
    if (r.status.ok() && !r.abandoned && adopter_.taking_stopped()) co_await lock_.hand_back();
  }
  if (r.registered) {
    log(LogLevel::kInfo, "joined the fleet (membership incarnation " +
                             std::to_string(membership_.incarnations()) + ")");
    note_activity();
    if (auto entry = membership_.entry()) {
      registered_ = std::make_pair(entry->incarnation, clock_.now());
    }
  }
  // A worker that registered looks at the table at once (its polls are active).
  if (r.registered && wake_poll_) wake_poll_();
  if (r.abandoned) lock_.stop(Status(StatusCode::kLeaseLost, "membership lost"), false);
  heartbeats_.record(r.status);
  bool ok = r.status.ok();

  // A call for attention that failed goes with this renewal (it is how idle workers hear
  // that something moved; their own look at the table is the slower way).
  if (co_await lock_.renew(attention_pending_)) {
    attention_pending_ = false;
  } else {
    ok = false;
  }
  const milliseconds interval = config_.effective_renew_interval();
  // A failed renewal is tried again soon: many more tries fit before the hold lapses
  // (renew_interval is at most half the hold), so a quarter of the calls failing rarely costs
  // the membership.
  co_return clock_.now() + jittered(ok ? interval : std::max(milliseconds(5), interval / 10));
}

// The handoffs side of a poll: those coming in, and those going out (a receiver that took
// one anyway after handoff_timeout is noticed here, even if no write of ours would notice).
CallTask<Done> AssignmentAgent::poll_handoffs() {
  if (adopter_.has_pending_incoming()) {
    (void)co_await adopter_.poll_incoming_handoffs();
  }
  if (const auto pending = held_.pending_handoffs(); !pending.empty()) {
    co_await call(runner_, Lane::kPoll, [this, &pending] {
      for (const auto& [key, to] : pending) (void)held_.refresh_held(key);
      return Done{};
    });
  }
  co_return Done{};
}

// The idle poll's read budget, for reading the lock (eventually consistent: half a unit),
// which is how an idle worker hears that something is about to move (LeaderEntry::attention):
// kIdleUnitsPerLeaseMinute read units per held lease and minute, at most
// kIdleUnitsPerWorkerMinute. A worker holding a few leases looks more often as it holds more
// (it has more at stake in a move), up to every 2.4 s from 6 leases on; one holding 1 or 2
// reads every idle_poll_interval.
constexpr double kIdleUnitsPerLeaseMinute = 2.0;
constexpr double kIdleUnitsPerWorkerMinute = 12.5;
// One idle read in this many finds the worker's leases in the table (discover_leases) rather
// than reading the lock: a lease the table gives a live idle worker is read within this many
// idle_lock_read_intervals whatever became of the leader's calls for attention. Not
// more often: a read of the lock not made can delay by one interval the moment a lapsed lock
// is noticed (the leader's crash), and the calls for attention (kept until one lands) and a
// new leader's first pass make workers look at the table at once in the usual cases.
constexpr int kReadsPerDiscovery = 5;

// Finds the leases the table gives this worker (LeaseAdopter::discover): the way a worker
// learns its leases that depends on nothing the leader sends. One that moved makes the polls
// active. False when keys were left to look at again. The leader's next idle one is due
// kReadsPerDiscovery idle_lock_read_intervals after this one.
CallTask<bool> AssignmentAgent::discover_leases() {
  if (hold_veto()) {  // its membership lapses soon, or registers anew: looked at again soon
    poll_.next_discovery =
        clock_.now() + jittered(std::max(milliseconds(5), config_.poll_interval / 4));
    co_return true;
  }
  LookResult looked = co_await adopter_.discover();
  // A series of its own: the lock read that follows in the same poll must not end it (a
  // discovery failing for good, say a role without dynamodb:Query on the owner index, was
  // logged as failing and recovered at every poll).
  discoveries_.record(looked.status);
  poll_.next_discovery = clock_.now() + jittered(kReadsPerDiscovery * idle_lock_read_interval());
  if (!looked.gained.empty() || !looked.lost.empty() || !looked.handoffs_requested.empty()) {
    note_activity();
  }
  co_return looked.status.ok();
}

// The lock as a poll read it (LeaderLock::observe): a new holder or a call for attention
// makes the polls active. Whether to try to lead.
bool AssignmentAgent::observe_lock(const std::optional<coordination::LeaderEntry>& seen,
                                   const std::string& incarnation, Clock::MonoTime now) {
  const LeaderLock::Observed o = lock_.observe(seen, incarnation, now, adopter_.taking_stopped());
  if (o.activity) poll_.active_until = now + config_.failover_time;
  return o.lead;
}

CallTask<Done> AssignmentAgent::try_lead(std::optional<coordination::LeaderEntry> seen,
                                         Clock::MonoTime now) {
  // The leader step looks at the flag only every 50 ms: a new leader's step runs now.
  const bool elected = co_await lock_.try_lead(std::move(seen), now);
  if (elected && wake_leader_) wake_leader_();
  co_return Done{};
}

void AssignmentAgent::note_activity() { poll_.active_until = clock_.now() + config_.failover_time; }

// Active: the worker joined, found a lease moved, or saw a new lock holder or a call for
// attention in the last failover_time, keys wait to be looked at again, a handoff to or from
// it is pending, or a take of the lock whose answer was lost is being confirmed.
bool AssignmentAgent::poll_active() {
  return poll_.busy || lock_.confirming_take() || clock_.now() < poll_.active_until;
}

bool AssignmentAgent::busy_after(bool unfinished) const {
  return unfinished || adopter_.has_pending_incoming() || !held_.pending_handoffs().empty();
}

CallTask<Clock::MonoTime> AssignmentAgent::poll_task() {
  auto before = membership_.entry();
  if (!before) {
    co_return clock_.now() + milliseconds(std::min<long long>(config_.poll_interval.count(), 50));
  }
  if (poll_active()) co_return co_await active_poll(*before, config_.poll_interval);
  co_return co_await idle_poll(*before);
}

CallTask<Clock::MonoTime> AssignmentAgent::active_poll(coordination::WorkerEntry before,
                                                       milliseconds interval) {
  // Confirming a take of the lock whose answer was lost needs the lock as it is (a stale read
  // of the old holder would end the bound on this worker's hold too early). A fence of this
  // worker its next heartbeat finds (its condition fails).
  const coordination::Consistency consistency = lock_.confirming_take()
                                                    ? coordination::Consistency::kStrong
                                                    : coordination::Consistency::kEventual;
  // The leases the table gives this worker first: that read does not depend on the other.
  const bool discovered = co_await discover_leases();
  auto seen = co_await call(runner_, Lane::kPoll,
                            [this, consistency] { return coordination_.read_leader(consistency); });
  polls_.record(seen.status());
  // A failed read is tried again soon.
  if (!seen.ok()) co_return clock_.now() + jittered(std::max(milliseconds(5), interval / 4));
  if (discovered) co_await poll_handoffs();
  const auto now = clock_.now();
  if (observe_lock(*seen, before.incarnation, now)) co_await try_lead(*seen, now);
  poll_.busy = busy_after(!discovered);
  schedule_lock_read(now);
  const bool hurry = poll_.busy || lock_.confirming_take();
  co_return clock_.now() + jittered(hurry ? std::min(interval, milliseconds(250)) : interval);
}

milliseconds AssignmentAgent::idle_lock_read_interval() const {
  const milliseconds idle = config_.effective_idle_poll_interval();
  const auto leases = static_cast<double>(held_.held_count());
  if (leases <= 0) return idle;
  const double units = std::min(kIdleUnitsPerLeaseMinute * leases, kIdleUnitsPerWorkerMinute);
  const milliseconds budget(static_cast<long long>(60000.0 * 0.5 / units));
  return std::clamp(budget, std::min(config_.poll_interval, idle), idle);
}

// The next read of the lock while idle: within idle_lock_read_interval, and no later than when
// the lock, unchanged since it was last seen to change, would have lapsed (so a lapse is
// noticed failover_time after the last change was first seen, not up to an interval later).
void AssignmentAgent::schedule_lock_read(Clock::MonoTime now) {
  Clock::MonoTime next = now + jittered(idle_lock_read_interval());
  if (const auto lapse = lock_.lapses_at(); lapse && *lapse > now && *lapse < next) next = *lapse;
  poll_.next_lock_read = next;
}

// Nothing in progress: the lock every idle_lock_read_interval, and every kReadsPerDiscovery-th
// of those reads, made or failed, finds the leases the table gives this worker instead
// (discover_leases; both when the lock may have lapsed, so a worker whose reads of the lock
// fail still finds its leases). A lock that calls for attention makes the worker active: its
// next poll, at once, finds its leases in the table and reads the lock. The leader, whose
// renewals return the lock, discovers on a schedule of its own.
CallTask<Clock::MonoTime> AssignmentAgent::idle_poll(coordination::WorkerEntry entry) {
  const auto now = clock_.now();
  const milliseconds retry = std::max(milliseconds(5), config_.poll_interval / 4);
  if (lock_.leading()) {
    if (now >= poll_.next_discovery) (void)co_await discover_leases();
    co_return std::min(poll_.next_discovery,
                       now + jittered(config_.effective_idle_poll_interval()));
  }
  if (now < poll_.next_lock_read) co_return poll_.next_lock_read;
  const auto lapse = lock_.lapses_at();
  const bool lapse_read = lapse && now >= *lapse;
  if (++poll_.idle_reads % kReadsPerDiscovery == 0) {
    if (!(co_await discover_leases())) {
      --poll_.idle_reads;  // the next try is a discovery again
      co_return now + jittered(retry);
    }
    if (!lapse_read) {
      schedule_lock_read(now);
      co_return poll_active() ? now : poll_.next_lock_read;
    }
  }
  auto seen = co_await call(runner_, Lane::kPoll, [this] {
    return coordination_.read_leader(coordination::Consistency::kEventual);
  });
  polls_.record(seen.status());
  if (!seen.ok()) co_return now + jittered(retry);
  if (observe_lock(*seen, entry.incarnation, now)) co_await try_lead(*seen, now);
  schedule_lock_read(now);
  co_return poll_active() ? now : poll_.next_lock_read;
}

// The leader's idle read budget: half a read unit per lease and minute for reading every
// worker's entry (one eventually consistent scan: half a unit per 4 KB; an entry is about
// 300 bytes), between leader_poll_interval and leader_idle_poll_interval.
milliseconds AssignmentAgent::leader_idle_interval(const LeaderPassResult& r) const {
  constexpr double kUnitsPerLeaseMinute = 0.5;
  constexpr double kEntryBytes = 300.0;
  const double units = 0.5 * std::ceil(std::max(1, r.workers) * kEntryBytes / 4096.0);
  const double budget_per_minute = kUnitsPerLeaseMinute * std::max(1, r.leases);
  const milliseconds budget(static_cast<long long>(60000.0 * units / budget_per_minute));
  return std::clamp(budget, config_.leader_poll_interval,
                    config_.effective_leader_idle_poll_interval());
}

CallTask<Clock::MonoTime> AssignmentAgent::leader_task() {
  const milliseconds interval = config_.leader_poll_interval;
  std::optional<coordination::LeaderEntry> previous;
  bool begin = false;
  if (lock_.leading() && term_started_ != lock_.terms()) {
    term_started_ = lock_.terms();
    previous = lock_.previous();
    begin = true;
  }
  if (!lock_.leading() || adopter_.taking_stopped()) {
    // Not leading, or stopping (a stopping leader assigns nothing more; see drain()).
    if (leader_.active()) leader_.end();
    // Not leading: only this flag to look at (no I/O), often, so a new leader starts at once.
    co_return clock_.now() + std::min(interval, milliseconds(50));
  }
  if (begin) leader_.begin(previous);
  if (registered_) leader_.note_own_registration(registered_->first, registered_->second);
  LeaderPassResult r = co_await call(runner_, Lane::kPass, [this] { return leader_.run_pass(); });
  passes_.record(r.status);
  // One write (a renewal of the lock) tells every idle worker at its next read of the lock.
  // Kept when it fails: the next renewal calls it (heartbeat_step).
  if ((r.attention || attention_pending_) && lock_.leading()) {
    attention_pending_ = !(co_await lock_.renew(true));
  }
  // A pass that moved a lease to or from the leader: it finds its leases in the table at
  // once, as every worker does after a call for attention (its polls active meanwhile).
  if (r.moved_self) {
    note_activity();
    (void)co_await discover_leases();
  }
  if (leader_.first_settling()) {
    // The membership is read every settle_time / 4 meanwhile, and once more the moment it
    // would be settled.
    const milliseconds quick = std::max(milliseconds(10), config_.settle_time / 4);
    const auto next = clock_.now() + jittered(std::min(interval, quick));
    const auto settles = leader_.settles_at();
    co_return settles&&* settles > clock_.now() ? std::min(next, *settles) : next;
  }
  co_return clock_.now() +
      jittered(leader_.wants_attention(r) ? interval : leader_idle_interval(r));
}

// A graceful stop begins. Nothing more is adopted, and the leader learns at once (a heartbeat
// saying draining) that this worker takes nothing more. A leader assigns nothing more either:
// once that heartbeat has landed (its hold then counts from it, not from the lock) it hands
// the lock back, so another worker leads at once; when the heartbeat failed it runs no pass
// (leader_step) and hands the lock back after the next heartbeat that lands (heartbeat_task).
CallTask<Done> AssignmentAgent::drain_task() {
  note_activity();
  adopter_.stop_taking();
  membership_.set_draining();
  const Membership::RenewResult r = co_await membership_.renew();
  if (!r.status.ok() || r.abandoned) co_return Done{};
  co_await lock_.hand_back();
  co_return Done{};
}

CallTask<Status> AssignmentAgent::leave_task() {
  Status first = co_await lock_.release();
  Status s = co_await membership_.leave();
  if (first.ok() && !s.ok()) first = s;
  // A lease assigned to this worker after its last look (a pass that planned before it saw
  // this worker draining) is handed back, so a fleet stopped at any moment leaves no lease
  // owned by a worker that is gone.
  s = co_await hand_back_unread();
  if (first.ok() && !s.ok()) first = s;
  co_return first;
}

// A lease still being handed over to this worker is left to its old owner while that one is
// a member not stopping: it still reads the shard and checkpoints, and a write of this worker
// would make its last checkpoint fail (records read twice); it completes the handoff, and the
// leader moves the lease on. One whose old owner is gone or stopping (or when the workers
// cannot be read) is handed back.
CallTask<Status> AssignmentAgent::hand_back_unread() {
  auto handing_over = co_await adopter_.hand_back_unread();
  if (!handing_over.ok()) co_return handing_over.status();
  if (handing_over->empty()) co_return Status::Ok();
  const auto view = co_await read_workers();
  for (const LeaseAdopter::HandingOver& h : *handing_over) {
    if (view.ok() && reads_leases(*view, h.from)) continue;
    Status s = co_await adopter_.hand_back(h.key);
    if (!s.ok()) co_return s.with_context("handing back " + h.key + ": ");
  }
  co_return Status::Ok();
}

// The old owner's side of a fleet stopped mid-handoff (hand_back_unread() is the receiver's):
// whichever of the two stops last sees the other stopping or gone and frees the lease. Only a
// stop whose release completed a handoff reads the workers.
CallTask<Status> AssignmentAgent::release_task() {
  std::vector<Lease> handed_over;
  Status first = co_await call(runner_, Lane::kPoll,
                               [this, &handed_over] { return held_.release_all(&handed_over); });
  if (handed_over.empty()) co_return first;
  const auto view = co_await read_workers();
  if (!view.ok()) co_return first;  // the handoffs stand: their receivers adopt them
  Status s = co_await adopter_.free_unread(std::move(handed_over), [&](const std::string& worker) {
    return reads_leases(*view, worker);
  });
  co_return first.ok() ? s : first;
}

// Strongly consistent: the two workers of a handoff each stop on what they read of the other,
// and a lagging replica could hide the other's draining from both (once per stop, and only
// when a handoff was in progress).
CallTask<Result<coordination::CoordinationView>> AssignmentAgent::read_workers() {
  co_return co_await call(runner_, Lane::kPoll, [this] {
    return coordination_.read_all(coordination::Consistency::kStrong);
  });
}

}  // namespace kcl::assignment
