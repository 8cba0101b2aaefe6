#include "leases/assignment_agent.h"

#include <algorithm>

namespace kcl::leases {

using std::chrono::milliseconds;

AssignmentAgent::AssignmentAgent(CoordinationStore& coordination, LeaseStore& leases,
                                 LeaseCoordinator& coordinator, const LeaseConfig& config,
                                 const Clock& clock, MetricsSink& metrics, Logger* logger,
                                 std::uint64_t seed)
    : coordination_(coordination),
      coordinator_(coordinator),
      config_(config),
      clock_(clock),
      metrics_(metrics),
      logger_(logger),
      membership_(coordination, coordinator, config, clock, metrics, seed),
      leader_(leases, coordination, config, clock, metrics, logger),
      rng_(seed ^ 0x9e3779b97f4a7c15ULL) {}

void AssignmentAgent::log(LogLevel level, const std::string& message) const {
  if (logger_ && logger_->enabled(level)) {
    logger_->log(level, "worker " + config_.worker_id, message);
  }
}

milliseconds AssignmentAgent::jittered(milliseconds base) {
  const double j = config_.interval_jitter;
  std::uniform_real_distribution<double> d(1.0 - j, 1.0 + j);
  std::lock_guard<std::mutex> lock(mu_);
  return milliseconds(
      std::max<long long>(1, static_cast<long long>(static_cast<double>(base.count()) * d(rng_))));
}

void AssignmentAgent::stop_leading(const Status& why, bool abandon_incarnation) {
  bool was;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was = lock_held_.has_value();
    lock_held_.reset();
    lock_basis_.reset();
    leading_.store(false);
  }
  if (!was) return;
  metrics_.count("leader.lost", 1, {});
  log(LogLevel::kWarn, "no longer the leader: " + why.message());
  if (abandon_incarnation) {
    // The next leader may fence this incarnation at once (it is named in the lock).
    membership_.abandon(
        Status(StatusCode::kLeaseLost,
               "worker " + config_.worker_id + " lost the leader lock (" + why.message() + ")"));
  } else {
    membership_.set_leader_basis(std::nullopt);
  }
}

Clock::MonoTime AssignmentAgent::heartbeat_step() {
  auto r = membership_.renew();
  if (r.registered) {
    log(LogLevel::kInfo, "joined the fleet (membership incarnation " +
                             std::to_string(membership_.incarnations()) + ")");
  }
  if (r.abandoned) stop_leading(Status(StatusCode::kLeaseLost, "membership lost"), false);
  bool ok = r.status.ok();

  std::optional<LeaderEntry> held;
  std::optional<Clock::MonoTime> basis;
  {
    std::lock_guard<std::mutex> lock(mu_);
    held = lock_held_;
    basis = lock_basis_;
  }
  if (held) {
    const auto start = clock_.now();
    auto renewed = coordination_.renew_leadership(*held);
    if (renewed.ok()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (lock_held_ && lock_held_->counter == held->counter) {
          lock_held_ = *renewed;
          lock_basis_ = start;
        }
      }
      membership_.set_leader_basis(start);
    } else if (renewed.status().code() == StatusCode::kConditionFailed) {
      stop_leading(Status(StatusCode::kLeaseLost, "another worker took the leader lock"), true);
    } else {
      ok = false;
      if (basis &&
          clock_.now() >= *basis + config_.failover_time - config_.effective_lost_lease_margin()) {
        stop_leading(Status(StatusCode::kLeaseLost,
                            "the leader lock could not be renewed in "
                            "time: " +
                                renewed.status().to_string()),
                     true);
      }
    }
  }
  const milliseconds interval = config_.effective_renew_interval();
  // A failed renewal is tried again soon: at least two more tries fit before the hold lapses.
  return clock_.now() + jittered(ok ? interval : std::max(milliseconds(5), interval / 5));
}

void AssignmentAgent::try_lead(const std::optional<LeaderEntry>& seen, Clock::MonoTime now) {
  auto entry = membership_.entry();
  if (!entry) return;
  const auto start = clock_.now();
  auto acquired = coordination_.acquire_leadership(seen, config_.worker_id, entry->incarnation);
  if (!acquired.ok()) return;  // another worker was quicker, or the table is unavailable
  {
    std::lock_guard<std::mutex> lock(mu_);
    lock_held_ = *acquired;
    lock_basis_ = start;
    lock_seen_ = *acquired;
    lock_changed_at_ = now;
    lock_previous_ = seen;
    leading_.store(true);
  }
  terms_.fetch_add(1);
  membership_.set_leader_basis(start);
  metrics_.count("leader.elected", 1, {});
  log(LogLevel::kInfo,
      "became the leader" +
          std::string(seen && seen->owner ? " (the lock of " + *seen->owner + " had lapsed)" : ""));
}

Clock::MonoTime AssignmentAgent::poll_step() {
  const milliseconds interval = config_.poll_interval;
  auto before = membership_.entry();
  if (!before) return clock_.now() + milliseconds(std::min<long long>(interval.count(), 50));
  auto view = coordination_.read_own(config_.worker_id);
  if (!view.ok()) return clock_.now() + jittered(interval);
  if (membership_.observe_own(view->self, before->incarnation)) {
    stop_leading(Status(StatusCode::kLeaseLost, "membership fenced"), false);
    return clock_.now() + interval;
  }
  if (view->self && !view->self->inbox.empty()) {
    LookResult looked = coordinator_.look_at(view->self->inbox);
    if (!looked.handled.empty()) {
      if (auto entry = membership_.entry()) {
        (void)coordination_.clear_inbox(*entry, looked.handled);
      }
    }
  }
  if (coordinator_.has_pending_incoming()) (void)coordinator_.poll_incoming_handoffs();
  // Handoffs this worker is finishing: a receiver that took one anyway (handoff_timeout) is
  // noticed here, even if no write of ours would notice.
  for (const auto& [key, to] : coordinator_.pending_handoffs()) {
    (void)coordinator_.refresh_held(key);
  }

  // The lock: note when it last changed; lead when nobody does.
  const auto now = clock_.now();
  bool lead = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto& seen = view->leader;
    if (!lock_seen_ || !seen || lock_seen_->counter != seen->counter ||
        lock_seen_->owner != seen->owner) {
      lock_changed_at_ = now;
    }
    lock_seen_ = seen;
    if (!lock_held_ && !coordinator_.taking_stopped()) {
      if (!seen || !seen->owner) {
        lead = true;
      } else if (*seen->owner == config_.worker_id &&
                 seen->owner_incarnation != before->incarnation) {
        lead = true;  // an earlier incarnation of this worker led; it has stopped
      } else if (now - lock_changed_at_ >= config_.failover_time) {
        lead = true;  // the leader has been silent for the failover time
      }
    }
  }
  if (lead) try_lead(view->leader, now);

  const milliseconds next =
      coordinator_.has_pending_incoming() || !coordinator_.pending_handoffs().empty()
          ? std::min(interval, milliseconds(250))
          : interval;
  return clock_.now() + jittered(next);
}

Clock::MonoTime AssignmentAgent::leader_step() {
  const milliseconds interval = config_.leader_poll_interval;
  std::optional<LeaderEntry> previous;
  bool begin = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (leading_.load() && term_started_ != terms_.load()) {
      term_started_ = terms_.load();
      previous = lock_previous_;
      begin = true;
    }
  }
  if (!leading_.load()) {
    if (leader_.active()) leader_.end();
    // Not leading: only this flag to look at (no I/O), often, so a new leader starts at once.
    return clock_.now() + std::min(interval, milliseconds(50));
  }
  if (begin) leader_.begin(previous);
  LeaderPassResult r = leader_.run_pass();
  if (!r.status.ok()) log(LogLevel::kWarn, "leader pass: " + r.status.to_string());
  // What the leader assigned to (or asked of) itself needs no round trip through its inbox
  // (the next poll clears the inbox; looking at a key twice changes nothing).
  if (!r.posted_to_self.empty()) (void)coordinator_.look_at(r.posted_to_self);
  return clock_.now() + jittered(interval);
}

void AssignmentAgent::drain() {
  membership_.set_draining();
  (void)membership_.renew();
}

Status AssignmentAgent::leave() {
  std::optional<LeaderEntry> held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    held = lock_held_;
  }
  Status first;
  if (held) {
    Status s = coordination_.release_leadership(*held);
    if (!s.ok() && s.code() != StatusCode::kConditionFailed) first = s;
    stop_leading(Status(StatusCode::kCancelled, "shutting down"), false);
  }
  Status s = membership_.leave();
  if (first.ok() && !s.ok()) first = s;
  return first;
}

}  // namespace kcl::leases
