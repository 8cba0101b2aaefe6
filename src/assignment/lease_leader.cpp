#include "assignment/lease_leader.h"

#include <algorithm>
#include <utility>

#include "assignment/assignment_planner.h"
#include "base/status_macros.h"

namespace kcl::assignment {

LeaseLeader::LeaseLeader(leases::LeaseStore& leases, coordination::CoordinationStore& coordination,
                         const LeaseConfig& config, const Clock& clock, MetricsSink& metrics,
                         Logger* logger)
    : leases_(leases),
      coordination_(coordination),
      config_(config),
      clock_(clock),
      metrics_(metrics),
      logger_(logger) {}

void LeaseLeader::log(LogLevel level, const std::string& message) const {
  if (logger_ && logger_->enabled(level)) {
    logger_->log(level, "leader " + config_.worker_id, message);
  }
}

void LeaseLeader::begin(const std::optional<coordination::LeaderEntry>& previous) {
  active_ = true;
  // What this worker saw of the workers' heartbeats and of unknown owners' lease counters in
  // an earlier term stays valid: both values only ever go up, so one seen unchanged since T
  // has not moved since T, however long this worker did not look. A worker that leads again
  // soon after (its own membership lapsed, say) fences the silent at once instead of waiting
  // another failover time. The leases are read again.
  cache_.clear();
  assigned_counter_.clear();
  scan_needed_ = true;
  last_scan_.reset();
  settling_.last_change.reset();
  settling_.burst_start.reset();
  // A change an earlier term noted but never settled does not count: this term starts
  // unsettled at its first pass, whenever that change was.
  settling_.changed_at.reset();
  settling_.first = true;
  leases_version_.reset();
  fence_previous_.reset();
  if (previous && previous->owner && !previous->owner_incarnation.empty()) {
    fence_previous_ = std::make_pair(*previous->owner, previous->owner_incarnation);
  }
}

void LeaseLeader::end() {
  active_ = false;
  // Only the leader reports the fleet's unheld leases; a worker that led before reports 0.
  metrics_.gauge("fleet.leases_unheld", 0, {});
}

LeaderStats LeaseLeader::stats() const {
  return LeaderStats{counts_.passes.load(), counts_.scans.load(), counts_.fenced.load(),
                     counts_.assigned.load(), counts_.handoffs.load()};
}

// Notes every worker's entry: joins, new incarnations and heartbeats (when each value was
// first seen, on this clock); a worker whose entry is gone left.
void LeaseLeader::note_entries(const coordination::CoordinationView& view, bool& changed) {
  const auto now = clock_.now();
  std::set<std::string> present;
  for (const coordination::WorkerEntry& w : view.workers) {
    present.insert(w.worker_id);
    auto [it, inserted] = workers_.try_emplace(w.worker_id);
    Observed& o = it->second;
    // An older heartbeat of the incarnation seen (an eventually consistent read served by a
    // replica that lags) says nothing new: a heartbeat only grows, and only the worker moves
    // it. Taken as a change, it would restart the silence of a worker that died.
    if (!inserted && o.entry.incarnation == w.incarnation && w.heartbeat < o.entry.heartbeat) {
      continue;
    }
    if (inserted || o.entry.incarnation != w.incarnation) {
      changed = true;
      const bool own = settling_.own_registration && w.worker_id == config_.worker_id &&
                       w.incarnation == settling_.own_registration->first;
      const auto at = own ? std::min(settling_.own_registration->second, now) : now;
      settling_.changed_at = settling_.changed_at ? std::max(*settling_.changed_at, at) : at;
      if (dead_.erase(w.worker_id)) {
        log(LogLevel::kInfo, "worker " + w.worker_id + " registered again");
      } else if (inserted) {
        log(LogLevel::kInfo, "worker " + w.worker_id + " joined");
      }
      // Leases may be handed off to it soon: their owners should be listening.
      if (w.worker_id != config_.worker_id) attention_due_ = true;
    }
    if (inserted || o.entry.incarnation != w.incarnation || o.entry.heartbeat != w.heartbeat) {
      o.changed_at = now;
      o.suspected = false;
    }
    o.entry = w;
    if (w.worker_id == config_.worker_id && self_report_) {
      // As a heartbeat would report it: taken once per renew interval.
      if (!self_reported_at_ || now - *self_reported_at_ >= config_.effective_renew_interval()) {
        self_report_taken_ = self_report_();
        self_reported_at_ = now;
      }
      o.entry.lease_count = self_report_taken_.lease_count;
      o.entry.lease_kbps = self_report_taken_.lease_kbps;
    }
  }
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (present.count(it->first)) {
      ++it;
      continue;
    }
    // Left gracefully (it handed its leases back and stopped), or fenced (by an earlier
    // leader, or by this one through a fence whose answer was lost): either way it reads
    // nothing any more, so whatever it still owns is moved at once.
    log(LogLevel::kInfo, "worker " + it->first + " left");
    if (it->first != config_.worker_id) dead_.insert(it->first);
    changed = true;
    settling_.changed_at = now;
    scan_needed_ = true;
    it = workers_.erase(it);
  }
}

bool LeaseLeader::misses_a_known_worker(const coordination::CoordinationView& view) const {
  std::set<std::string> present;
  for (const coordination::WorkerEntry& w : view.workers) present.insert(w.worker_id);
  for (const auto& [id, o] : workers_) {
    if (!present.count(id)) return true;
  }
  return false;
}

// Whether the next pass should come soon (leader_poll_interval) rather than at the idle
// interval: something is moving (the last pass failed, assigned, handed off or fenced, or its
// plan was not balanced), a handoff is pending, the fleet has not settled, a scan is due, or a
// worker has missed a heartbeat (it may be dying: its silence is then timed from the leader's next
// reads, not up to an idle interval late).
bool LeaseLeader::wants_attention(const LeaderPassResult& r) const {
  if (!r.status.ok() || !r.balanced || r.assigned || r.handoffs || r.fenced ||
      settling_.burst_start || scan_needed_ || !dead_.empty()) {
    return true;
  }
  for (const auto& [key, lease] : cache_) {
    if (lease.checkpoint_owner) return true;
  }
  const auto now = clock_.now();
  const auto overdue =
      config_.effective_renew_interval() * 5 / 4 + config_.effective_leader_idle_poll_interval();
  for (const auto& [id, o] : workers_) {
    if (id != config_.worker_id && now - o.changed_at > overdue) return true;
  }
  return false;
}

// A fence this pass may make of `w`: none once this worker may no longer act as leader (a
// pass stalled past its lock's lapse), nor of the worker the lock as read names (a leader does
// not heartbeat while it holds the lock: its entry looks silent to a stale pass of the one
// before it). Refused as a failed condition: the next pass looks again.
Status LeaseLeader::may_fence(const coordination::WorkerEntry& w,
                              const std::optional<coordination::LeaderEntry>& lock) const {
  KCL_RETURN_IF_ERROR(authorised());
  if (lock && lock->owner == w.worker_id && lock->owner_incarnation == w.incarnation) {
    return Status(StatusCode::kConditionFailed, "it holds the leader lock");
  }
  return Status::Ok();
}

// The previous leader's incarnation ended with its lock: fence it at once.
Status LeaseLeader::fence_previous_leader(const std::optional<coordination::LeaderEntry>& lock,
                                          LeaderPassResult& r, bool& changed) {
  if (!fence_previous_) return Status::Ok();
  const auto [id, incarnation] = *fence_previous_;
  auto it = workers_.find(id);
  if (it == workers_.end()) {
    if (id != config_.worker_id) dead_.insert(id);
    fence_previous_.reset();
    return Status::Ok();
  }
  if (it->second.entry.incarnation != incarnation) {
    fence_previous_.reset();  // it registered again: alive, holding nothing of before
    return Status::Ok();
  }
  Status s = may_fence(it->second.entry, lock);
  if (s.ok()) s = coordination_.fence_worker(it->second.entry);
  // A failed condition: its entry changed (a late heartbeat of that incarnation still cannot
  // extend its hold); the next pass looks again.
  if (s.code() == StatusCode::kConditionFailed) return Status::Ok();
  if (!s.ok()) return s.with_context("fencing the previous leader " + id + ": ");
  log(LogLevel::kWarn, "fenced the previous leader " + id + " (its lock lapsed)");
  dead_.insert(id);
  workers_.erase(it);
  ++r.fenced;
  changed = true;
  settling_.changed_at = clock_.now();
  fence_previous_.reset();
  return Status::Ok();
}

// Silent workers: fenced once unchanged for failover_time on this clock. One whose heartbeat
// is a quarter of the slack overdue may be fenced soon: the workers' attention is called then,
// so those that will take its leases poll their entries by the time it is.
Status LeaseLeader::fence_silent(const std::optional<coordination::LeaderEntry>& lock,
                                 LeaderPassResult& r, bool& changed) {
  const auto now = clock_.now();
  const auto renew = config_.effective_renew_interval();
  const auto suspect_after = renew + (config_.failover_time - renew) / 4;
  for (auto it = workers_.begin(); it != workers_.end();) {
    Observed& o = it->second;
    if (it->first != config_.worker_id && !o.suspected && now - o.changed_at >= suspect_after) {
      o.suspected = true;
      attention_due_ = true;
    }
    if (it->first == config_.worker_id || now - o.changed_at < config_.failover_time) {
      ++it;
      continue;
    }
    Status s = may_fence(o.entry, lock);
    if (s.ok()) s = coordination_.fence_worker(o.entry);
    if (s.code() == StatusCode::kConditionFailed) {
      ++it;  // it renewed at the last moment (or holds the lock): keep watching
      continue;
    }
    if (!s.ok()) return s.with_context("fencing worker " + it->first + ": ");
    log(LogLevel::kWarn, "worker " + it->first + " was silent for " +
                             std::to_string(config_.failover_time.count()) +
                             " ms: fenced; its leases go to the other workers");
    metrics_.count("leader.fenced", 1, {});
    dead_.insert(it->first);
    ++r.fenced;
    changed = true;
    settling_.changed_at = now;
    it = workers_.erase(it);
  }
  return Status::Ok();
}

// Step 1 of a pass: reads every worker's entry, notes them, and fences the previous leader
// and the silent; a lease-set change noted by any worker (leasesVersion) asks for a scan.
Status LeaseLeader::observe(LeaderPassResult& r, bool& changed) {
  auto view = coordination_.read_all(coordination::Consistency::kEventual);
  // An eventually consistent read may miss an entry written a moment ago; a worker seen
  // before is taken for gone only when a strongly consistent read agrees.
  if (view.ok() && misses_a_known_worker(*view))
    view = coordination_.read_all(coordination::Consistency::kStrong);
  if (!view.ok()) return view.status().with_context("reading the workers: ");
  note_entries(*view, changed);
  KCL_RETURN_IF_ERROR(fence_previous_leader(view->leader, r, changed));
  KCL_RETURN_IF_ERROR(fence_silent(view->leader, r, changed));
  if (view->leader && leases_version_ != view->leader->leases_version) {
    if (leases_version_) scan_needed_ = true;
    leases_version_ = view->leader->leases_version;
  }
  if (changed && !dead_.empty()) scan_needed_ = true;
  r.workers = static_cast<int>(workers_.size());
  return Status::Ok();
}

// Step 2: reads the lease table when it must (see the header).
Status LeaseLeader::scan_if_due(LeaderPassResult& r) {
  const auto now = clock_.now();
  if (!scan_needed_ && last_scan_ && now - *last_scan_ < config_.lease_scan_interval) {
    return Status::Ok();
  }
  return scan(r);
}

// Settling (see the header): true when the membership has not changed for settle_time, or
// has kept changing for failover_time / 2. A new leader starts unsettled. A change noted by
// a pass that ended early (settling_.changed_at is kept until here) counts at the next pass that
// gets this far.
bool LeaseLeader::settled() {
  const auto now = clock_.now();
  if (settling_.changed_at || !settling_.last_change) {
    // A fence or a leave changed it now; a join when the entry was first seen, or (this
    // worker's own) when it registered.
    settling_.last_change =
        settling_.changed_at && settling_.changed_at <= now ? *settling_.changed_at : now;
    if (!settling_.burst_start) settling_.burst_start = *settling_.last_change;
  }
  settling_.changed_at.reset();
  const bool settled = !settling_.burst_start ||
                       now - *settling_.last_change >= config_.settle_time ||
                       now - *settling_.burst_start >= config_.failover_time / 2;
  if (settled) {
    settling_.burst_start.reset();
    settling_.first = false;
  }
  return settled;
}

std::optional<Clock::MonoTime> LeaseLeader::settles_at() const {
  if (!settling_.burst_start || !settling_.last_change) return std::nullopt;
  return std::min(*settling_.last_change + config_.settle_time,
                  *settling_.burst_start + config_.failover_time / 2);
}

Status LeaseLeader::scan(LeaderPassResult& r) {
  auto listed = leases_.list_leases();
  if (!listed.ok()) return listed.status().with_context("reading the lease table: ");
  const auto now = clock_.now();
  std::map<std::string, Lease> fresh;
  for (Lease& l : *listed) fresh.emplace(l.lease_key, std::move(l));
  cache_ = std::move(fresh);
  std::erase_if(assigned_counter_, [&](const auto& a) {
    auto c = cache_.find(a.first);
    return c == cache_.end() || c->second.lease_counter != a.second;
  });
  for (auto it = unknown_.begin(); it != unknown_.end();) {
    auto c = cache_.find(it->first);
    if (c == cache_.end()) {
      it = unknown_.erase(it);
      continue;
    }
    if (c->second.lease_counter != it->second.counter) it->second = {c->second.lease_counter, now};
    ++it;
  }
  scan_needed_ = false;
  last_scan_ = now;
  r.scanned = true;
  ++counts_.scans;
  return Status::Ok();
}

// Assigns a free or orphaned lease to move.to. A take that fails is followed by a fresh read:
// a condition that failed because the cache was stale is tried once more while the lease is
// still an orphan, and a take whose answer was lost (it may have landed) is recognised by the
// owner it wrote. The workers a move concerns are told (tell()) whenever it may have landed.
LeaseLeader::MoveOutcome LeaseLeader::assign(const Move& move, LeaderPassResult& r) {
  Lease seen = cache_.at(move.lease_key);
  auto taken = leases_.take_lease(seen, move.to);
  if (!taken.ok()) {
    const Status failure = taken.status();
    auto fresh = reread(move.lease_key);
    if (!fresh.ok()) {
      // Whether the take landed is unknown: the worker is told anyway (it looks at the table
      // and adopts the lease only if the table gives it to it), and should it have landed, the
      // lease is not handed off before its owner took it (the counter it would have written).
      tell(move.to, r);
      assigned_counter_[move.lease_key] = seen.lease_counter + 1;
      note_failure(r, failure.code() == StatusCode::kConditionFailed ? fresh.status() : failure);
      return MoveOutcome::kStoreDown;
    }
    if (!*fresh) return MoveOutcome::kDone;  // deleted meanwhile
    const Lease& now = **fresh;
    const bool still_orphan =
        !now.checkpoint_owner && (!now.lease_owner || dead_.count(*now.lease_owner));
    if (still_orphan && failure.code() == StatusCode::kConditionFailed) {
      taken = leases_.take_lease(now, move.to);
    } else if (now.lease_owner && !now.checkpoint_owner && workers_.count(*now.lease_owner)) {
      // Ours landed although its answer was lost, or another leader's moved it: tell the owner,
      // and hand it off only once the owner has taken it (hand_off()): a worker that never
      // read a lease would not finish its handoff.
      tell(*now.lease_owner, r);
      assigned_counter_[move.lease_key] = now.lease_counter;
      unknown_.erase(move.lease_key);
      if (*now.lease_owner == move.to) ++r.assigned;
      return MoveOutcome::kDone;
    } else if (!still_orphan) {
      return MoveOutcome::kDone;  // an unknown owner's lease that moved: not expired
    }
    if (!taken.ok()) {
      if (taken.status().code() == StatusCode::kConditionFailed) return MoveOutcome::kDone;
      note_failure(r, taken.status());  // still an orphan: the next pass assigns it
      return MoveOutcome::kFailed;
    }
  }
  cache_[move.lease_key] = *taken;
  assigned_counter_[move.lease_key] = taken->lease_counter;
  unknown_.erase(move.lease_key);
  tell(move.to, r);
  ++r.assigned;
  return MoveOutcome::kDone;
}

Result<std::optional<Lease>> LeaseLeader::reread(const std::string& key) {
  auto read = leases_.get_lease(key);
  if (!read.ok()) return read.status();
  if (read->has_value()) {
    cache_[key] = **read;
  } else {
    cache_.erase(key);
  }
  return read;
}

// A lease whose owners this leader knows (live or fenced by it): an orphan when it is free,
// or its owner was fenced or left; one whose old owner was fenced mid-handoff gets its handoff
// finished on that owner's behalf, so the worker it was going to starts (reading from the
// checkpoint; the receiver polls its pending handoffs). False when the store failed.
bool LeaseLeader::judge_known(const Lease& lease, std::vector<std::string>& orphans,
                              Status& status) {
  const std::string& key = lease.lease_key;
  if (!lease.checkpoint_owner) unknown_.erase(key);  // kept while a handoff waits (below)
  if (!lease.lease_owner) {
    if (!lease.checkpoint_owner) orphans.push_back(key);
    return true;
  }
  if (lease.checkpoint_owner && dead_.count(*lease.checkpoint_owner)) {
    auto fresh = reread(key);
    if (!fresh.ok()) {
      status = fresh.status();
      return false;
    }
    if (*fresh && (**fresh).checkpoint_owner == lease.checkpoint_owner) {
      auto done = leases_.evict_lease(**fresh);
      if (done.ok()) cache_[key] = *done;
    }
    return true;
  }
  if (!dead_.count(*lease.lease_owner)) return true;
  if (lease.checkpoint_owner) {
    // Handed to a worker that left before its old owner finished: that one completes the
    // handoff (the lease then names the worker gone). Read again each pass till then, so the
    // lease moves on at once rather than at the next scan. One the old owner never completes
    // (its hold of it ended, MembershipHold) is assigned once it has not moved for
    // handoff_timeout + failover_time, as a live receiver would take it (the Java KCL's
    // checkpoint-owner timeout).
    auto fresh = reread(key);
    if (!fresh.ok()) {
      status = fresh.status();
      return false;
    }
    const std::optional<Lease>& now = *fresh;
    if (!now || (now->lease_owner && !dead_.count(*now->lease_owner))) return true;
    if (now->checkpoint_owner && clock_.now() - unmoved_since(key, now->lease_counter) <
                                     config_.handoff_timeout + config_.failover_time) {
      return true;
    }
  }
  orphans.push_back(key);
  return true;
}

// A lease owned by a worker this leader knows nothing of: expired once its counter has not
// moved for failover_time, as seen here (re-read when due; assigned conditional on that
// counter). False when the store failed.
bool LeaseLeader::judge_unknown(const Lease& lease, std::vector<std::string>& orphans,
                                Status& status) {
  const std::string& key = lease.lease_key;
  const auto now = clock_.now();
  if (now - unmoved_since(key, lease.lease_counter) < config_.failover_time) return true;
  auto fresh = reread(key);
  if (!fresh.ok()) {
    status = fresh.status();
    return false;
  }
  if (!*fresh) {
    unknown_.erase(key);
  } else if (now - unmoved_since(key, (**fresh).lease_counter) >= config_.failover_time) {
    orphans.push_back(key);
  }
  return true;
}

// Since when this leader has seen `key` at `counter` (noted now when that is new): every write
// of a lease moves its counter, so it has not changed since then.
Clock::MonoTime LeaseLeader::unmoved_since(const std::string& key, std::int64_t counter) {
  auto u = unknown_.try_emplace(key, Unknown{counter, clock_.now()}).first;
  if (u->second.counter != counter) u->second = Unknown{counter, clock_.now()};
  return u->second.since;
}

std::vector<std::string> LeaseLeader::find_orphans(Status& status) {
  std::vector<std::string> orphans;
  std::vector<std::string> keys;
  keys.reserve(cache_.size());
  for (const auto& [key, lease] : cache_) keys.push_back(key);
  auto known = [&](const std::optional<std::string>& w) {
    return !w || workers_.count(*w) || dead_.count(*w);
  };
  for (const std::string& key : keys) {
    auto found = cache_.find(key);
    if (found == cache_.end()) continue;
    const Lease lease = found->second;  // a copy: judging may update the cache
    if (lease.checkpoint.is_shard_end()) continue;
    const bool ok = known(lease.lease_owner) && known(lease.checkpoint_owner)
                        ? judge_known(lease, orphans, status)
                        : judge_unknown(lease, orphans, status);
    if (!ok) break;
  }
  return orphans;
}

// A move concerns `worker`: another worker hears of it through the call for attention that
// ends the pass (it then finds its leases in the table at once, LeaseAdopter::discover); the
// leader itself looks at the table right after the pass (the agent).
void LeaseLeader::tell(const std::string& worker, LeaderPassResult& r) {
  if (worker == config_.worker_id) {
    r.moved_self = true;
  } else {
    attention_due_ = true;
  }
}

void LeaseLeader::note_failure(LeaderPassResult& r, Status failure) {
  if (r.status.ok()) r.status = std::move(failure);
}

Status LeaseLeader::authorised() const {
  if (!authority_) return Status::Ok();
  if (auto why = authority_()) return Status(StatusCode::kUnavailable, "not assigning: " + *why);
  return Status::Ok();
}

// Step 5: carries the plan out. Rebalancing (handoffs) waits for the fleet to settle and for
// the weights of leases just moved; assignments go now. Stops when this worker may no longer
// act as leader, or the store fails. A write that failed for one lease while the store still
// answered leaves that lease to the next pass (r.status reports the failure, which brings
// that pass soon) and goes on with the others: a dead worker's other leases need not wait for
// it. Two such failures in a row and the store is failing: the pass stops.
void LeaseLeader::execute(const Plan& plan, bool rebalance, LeaderPassResult& r) {
  int failed_in_a_row = 0;
  for (const Move& move : plan.moves) {
    // A leader whose renewals lapse stops before another could fence it (see AssignmentAgent).
    Status allowed = authorised();
    if (!allowed.ok()) {
      note_failure(r, std::move(allowed));
      return;
    }
    auto cached = cache_.find(move.lease_key);
    if (cached == cache_.end() || (move.handoff && !rebalance)) continue;
    const MoveOutcome outcome = move.handoff ? hand_off(move, cached->second, r) : assign(move, r);
    if (outcome == MoveOutcome::kStoreDown) return;
    failed_in_a_row = outcome == MoveOutcome::kFailed ? failed_in_a_row + 1 : 0;
    if (failed_in_a_row == 2) return;
  }
}

// A graceful handoff from a live owner (see MoveOutcome). A write that failed is followed
// by a fresh read, as in assign(): a handoff that landed although its answer was lost (or
// the client's retry of it found the condition failed), or has even been completed since, or
// that may have landed (the read failed too) is told to both workers now, not at their next
// periodic look at the table.
LeaseLeader::MoveOutcome LeaseLeader::hand_off(const Move& move, const Lease& cached,
                                               LeaderPassResult& r) {
  Lease seen = cached;
  if (auto a = assigned_counter_.find(move.lease_key); a != assigned_counter_.end()) {
    // Assigned by this leader: hand it off only once its owner has taken it (its take moved
    // the counter past the one the assignment wrote). An owner that never read it would not
    // finish the handoff, and the receiver would wait handoff_timeout.
    auto fresh = reread(move.lease_key);
    if (!fresh.ok()) {
      note_failure(r, fresh.status());
      return MoveOutcome::kFailed;
    }
    if (!*fresh) return MoveOutcome::kDone;  // deleted meanwhile
    if ((**fresh).lease_owner == move.from && (**fresh).lease_counter == a->second) {
      r.balanced = false;  // the next pass comes soon and tries again
      return MoveOutcome::kDone;
    }
    assigned_counter_.erase(a);
    seen = **fresh;
  }
  auto started = leases_.initiate_handoff(seen, move.to);
  if (!started.ok()) {
    const Status failure = started.status();
    auto fresh = reread(move.lease_key);
    if (!fresh.ok()) {
      // Whether it landed is unknown: both are told anyway (they look at the table), and the
      // pass stops.
      tell(*move.from, r);
      tell(move.to, r);
      note_failure(r, failure.code() == StatusCode::kConditionFailed ? fresh.status() : failure);
      return MoveOutcome::kStoreDown;
    }
    if (!*fresh) return MoveOutcome::kDone;  // deleted meanwhile
    const bool landed = (**fresh).lease_owner == move.to &&
                        (!(**fresh).checkpoint_owner || (**fresh).checkpoint_owner == move.from);
    if (!landed) {
      if (failure.code() == StatusCode::kConditionFailed) {
        scan_needed_ = true;  // the table moved on: read it again next pass
        return MoveOutcome::kDone;
      }
      note_failure(r, failure);  // the next pass plans it again
      return MoveOutcome::kFailed;
    }
  }
  tell(*move.from, r);
  tell(move.to, r);
  if (started.ok()) cache_[move.lease_key] = *started;  // else reread() cached what landed
  ++r.handoffs;
  return MoveOutcome::kDone;
}

// The end of a pass: a fenced worker whose leases have all moved is forgotten (one it read to
// its end never moves: the shard sync deletes it once its children started); the pass is
// logged when it moved anything, and counted.
void LeaseLeader::finish_pass(const LeaderPassResult& r) {
  for (auto it = dead_.begin(); it != dead_.end();) {
    const bool owns = std::any_of(cache_.begin(), cache_.end(), [&](const auto& kv) {
      return !kv.second.checkpoint.is_shard_end() &&
             (kv.second.lease_owner == *it || kv.second.checkpoint_owner == *it);
    });
    it = owns ? std::next(it) : dead_.erase(it);
  }
  if (r.assigned || r.handoffs) {
    log(LogLevel::kInfo, "assigned " + std::to_string(r.assigned) + " leases, started " +
                             std::to_string(r.handoffs) + " handoffs (" + std::to_string(r.leases) +
                             " leases, " + std::to_string(r.workers) + " workers)");
  }
  counts_.fenced += r.fenced;
  counts_.assigned += r.assigned;
  counts_.handoffs += r.handoffs;
  metrics_.gauge("leader.workers", r.workers, {});
  // Leases not ended that no live worker holds, as this pass left them (free, or owned by a
  // worker this leader fenced): kcl_leases_unheld, for the "leases unheld" alert.
  int unheld = 0;
  for (const auto& [key, lease] : cache_) {
    const auto owner = lease.actual_owner();
    if (!lease.checkpoint.is_shard_end() && (!owner || dead_.count(*owner))) ++unheld;
  }
  metrics_.gauge("fleet.leases_unheld", unheld, {});
  if (r.assigned) metrics_.count("leader.assigned", r.assigned, {});
  if (r.handoffs) metrics_.count("leader.handoffs", r.handoffs, {});
}

// A pass that failed before it planned (the store failed): the fences it made are counted.
LeaderPassResult LeaseLeader::end_failed_pass(LeaderPassResult& r) {
  counts_.fenced += r.fenced;
  return r;
}

LeaderPassResult LeaseLeader::run_pass() {
  LeaderPassResult r;
  if (!active_) return r;
  r.status = authorised();
  if (!r.status.ok()) return r;
  ++counts_.passes;
  bool changed = false;
  r.status = observe(r, changed);
  if (r.status.ok()) r.status = scan_if_due(r);
  if (!r.status.ok()) return end_failed_pass(r);
  LeaderKnowledge known;
  known.orphans = find_orphans(r.status);
  if (!r.status.ok()) return end_failed_pass(r);
  for (const auto& [id, o] : workers_) known.workers.push_back(o.entry);
  known.leases = &cache_;
  known.settled = settled();
  if (config_.max_leases_per_worker != std::numeric_limits<int>::max()) {
    known.max_leases_per_worker = config_.max_leases_per_worker;
  }
  const PlanRequest request = build_plan_input(known);
  r.leases = static_cast<int>(request.input.leases.size());
  const Plan plan = plan_assignment(request.input);
  const bool rebalance = known.settled && request.weights_complete;
  r.balanced = plan.moves.empty() && rebalance;
  execute(plan, rebalance, r);
  r.attention = std::exchange(attention_due_, false);
  finish_pass(r);
  return r;
}

}  // namespace kcl::assignment
