#include "assignment/leader_lock.h"

namespace kcl::assignment {

LeaderLock::LeaderLock(coordination::CoordinationStore& coordination, Membership& membership,
                       const LeaseConfig& config, const Clock& clock, MetricsSink& metrics,
                       Logger* logger)
    : coordination_(coordination),
      membership_(membership),
      config_(config),
      clock_(clock),
      metrics_(metrics),
      logger_(logger),
      renewals_("lock_renewal", "leader lock renewal", "worker " + config.worker_id, logger,
                metrics, clock) {}

void LeaderLock::log(LogLevel level, const std::string& message) const {
  if (logger_ && logger_->enabled(level)) {
    logger_->log(level, "worker " + config_.worker_id, message);
  }
}

// Notes when the lock last changed, forgets a take of it whose answer was lost when the lock
// shows another holder, and says whether to try to lead: when nobody leads, when it names
// this worker (an earlier incarnation that stopped, or this one's take whose answer was
// lost), or when it has not moved for failover_time.
LeaderLock::Observed LeaderLock::observe(const std::optional<coordination::LeaderEntry>& seen,
                                         const std::string& incarnation, Clock::MonoTime now,
                                         bool stopping) {
  Observed o;
  if (!seen_ || !seen || seen_->counter != seen->counter || seen_->owner != seen->owner) {
    changed_at_ = now;
  }
  // A new holder (or none): the next leader's moves may come soon. The leader calls
  // attention when something is about to move.
  auto owner_of = [](const std::optional<coordination::LeaderEntry>& e) {
    return e ? e->owner : std::optional<std::string>();
  };
  o.activity =
      owner_of(seen_) != owner_of(seen) || (seen_ && seen && seen_->attention != seen->attention);
  seen_ = seen;
  bool clear_leader_basis = false;
  if (taken_from_ && !held_ &&
      (!seen || seen->owner != config_.worker_id || seen->owner_incarnation != incarnation)) {
    // A take of the lock whose answer was lost did not land (or was taken over since, by
    // when this worker's hold had lapsed): the lock no longer bounds this worker's hold.
    taken_from_.reset();
    clear_leader_basis = true;
  }
  if (!held_ && !stopping) {
    o.lead = !seen || !seen->owner || *seen->owner == config_.worker_id ||
             now - changed_at_ >= config_.failover_time;
  }
  if (clear_leader_basis) membership_.set_leader_basis(std::nullopt);
  return o;
}

std::optional<Clock::MonoTime> LeaderLock::lapses_at() const {
  if (!seen_ || !seen_->owner) return std::nullopt;
  return changed_at_ + config_.failover_time;
}

CallTask<bool> LeaderLock::try_lead(std::optional<coordination::LeaderEntry> seen,
                                    Clock::MonoTime now) {
  auto entry = membership_.entry();
  if (!entry) co_return false;
  const auto start = clock_.now();
  // Already ours (a take whose answer was lost): a renewal conditional on what was read makes
  // it this worker's with a basis it knows.
  const bool ours =
      seen && seen->owner == config_.worker_id && seen->owner_incarnation == entry->incarnation;
  // On the poll lane, as the read that decided it (a stalled heartbeat does not hold it up).
  auto acquired = co_await call(runner_, Lane::kPoll, [this, &seen, &entry, ours] {
    return ours ? coordination_.renew_leadership(*seen)
                : coordination_.acquire_leadership(seen, config_.worker_id, entry->incarnation);
  });
  if (!acquired.ok()) {
    if (ours) co_return false;
    // The table is unavailable, or the take landed and its answer was lost (a failed
    // condition too: the client's retry of a take that landed finds the lock changed). Then this
    // incarnation is named in the lock without knowing it, and the next leader may fence it
    // as soon as that lock lapses: so it holds its leases only as long as a leader holding a
    // lock taken at `start` would (until the poll learns whose the lock is). The poll that
    // finds the lock ours makes this worker the leader, fencing the holder it was taken from.
    taken_from_ = seen;
    membership_.set_leader_basis(start);
    co_return false;
  }
  held_ = *acquired;
  basis_ = start;
  seen_ = *acquired;
  changed_at_ = now;
  // The incarnation that led before is fenced by the new leader; never this one.
  previous_ = ours ? taken_from_ : seen;
  taken_from_.reset();
  leading_.store(true);
  ++terms_;
  membership_.set_leader_basis(start);
  membership_.set_held_by_lock(true);
  metrics_.count("leader.elected", 1, {});
  if (on_elected_) on_elected_();
  log(LogLevel::kInfo,
      "became the leader" + std::string(seen && seen->owner && !ours
                                            ? " (the lock of " + *seen->owner + " had lapsed)"
                                        : ours ? " (its take of the lock had landed unseen)"
                                               : ""));
  co_return true;
}

CallTask<bool> LeaderLock::renew(bool attention) {
  const std::optional<coordination::LeaderEntry> held = held_;
  const std::optional<Clock::MonoTime> basis = basis_;
  if (!held) co_return true;
  const auto start = clock_.now();
  auto renewed = co_await call(runner_, Lane::kRenew, [this, &held, attention] {
    return attention ? coordination_.call_attention(*held) : coordination_.renew_leadership(*held);
  });
  if (!renewed.ok() && renewed.status().code() == StatusCode::kConditionFailed) {
    // Conditional on owner and incarnation only (coordination_store.h): someone else holds
    // the lock now.
    renewals_.succeeded();
    stop(Status(StatusCode::kLeaseLost, "another worker took the leader lock"), true);
    co_return true;
  }
  renewals_.record(renewed.status());
  if (renewed.ok()) {
    if (!held_ || held_->counter != held->counter) co_return true;
    held_ = *renewed;
    basis_ = start;
    membership_.set_leader_basis(start);
    co_return true;
  }
  if (basis &&
      clock_.now() >= *basis + config_.failover_time - config_.effective_lost_lease_margin()) {
    stop(Status(StatusCode::kLeaseLost,
                "the leader lock could not be renewed in time: " + renewed.status().to_string()),
         true);
  }
  co_return false;
}

void LeaderLock::stop(const Status& why, bool abandon_incarnation) {
  const bool was = held_.has_value();
  held_.reset();
  basis_.reset();
  leading_.store(false);
  if (!was) return;
  membership_.set_held_by_lock(false);
  // Handing the lock back at shutdown is planned: neither a warning nor a loss.
  if (why.code() == StatusCode::kCancelled) {
    log(LogLevel::kInfo, "gave up the leader lock: " + why.message());
  } else {
    metrics_.count("leader.lost", 1, {});
    log(LogLevel::kWarn, "no longer the leader: " + why.message());
  }
  if (abandon_incarnation) {
    // The next leader may fence this incarnation at once (it is named in the lock).
    membership_.abandon(
        Status(StatusCode::kLeaseLost,
               "worker " + config_.worker_id + " lost the leader lock (" + why.message() + ")"));
  } else {
    membership_.set_leader_basis(std::nullopt);
  }
}

CallTask<Done> LeaderLock::hand_back() {
  const std::optional<coordination::LeaderEntry> held = held_;
  if (!held) co_return Done{};
  stop(Status(StatusCode::kCancelled, "shutting down: another worker leads from now"), false);
  Status s = co_await call(runner_, Lane::kRenew,
                           [this, &held] { return coordination_.release_leadership(*held); });
  if (!s.ok() && s.code() != StatusCode::kConditionFailed) {
    unreleased_ = held;
    log(LogLevel::kWarn, "handing the leader lock back: " + s.to_string() +
                             " (tried again when the worker leaves; else another worker leads "
                             "once it lapses)");
  }
  co_return Done{};
}

CallTask<Status> LeaderLock::release() {
  const std::optional<coordination::LeaderEntry> held = held_ ? held_ : unreleased_;
  if (!held) co_return Status::Ok();
  Status s = co_await call(runner_, Lane::kRenew,
                           [this, &held] { return coordination_.release_leadership(*held); });
  if (held_) stop(Status(StatusCode::kCancelled, "shutting down"), false);
  unreleased_.reset();
  if (!s.ok() && s.code() != StatusCode::kConditionFailed) co_return s;
  co_return Status::Ok();
}

}  // namespace kcl::assignment
