#include "leases/lease_leader.h"

#include <algorithm>

#include "leases/assignment_planner.h"

namespace kcl::leases {

LeaseLeader::LeaseLeader(LeaseStore& leases, CoordinationStore& coordination,
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

void LeaseLeader::begin(const std::optional<LeaderEntry>& previous) {
  active_ = true;
  workers_.clear();
  dead_.clear();
  cache_.clear();
  unknown_.clear();
  scan_needed_ = true;
  last_scan_.reset();
  last_change_.reset();
  burst_start_.reset();
  leases_version_.reset();
  fence_previous_.reset();
  if (previous && previous->owner && !previous->owner_incarnation.empty()) {
    fence_previous_ = std::make_pair(*previous->owner, previous->owner_incarnation);
  }
}

void LeaseLeader::end() { active_ = false; }

LeaderStats LeaseLeader::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

Status LeaseLeader::observe_workers(const CoordinationView& view, LeaderPassResult& r,
                                    bool& changed) {
  const auto now = clock_.now();
  std::set<std::string> present;
  for (const WorkerEntry& w : view.workers) {
    present.insert(w.worker_id);
    auto [it, inserted] = workers_.try_emplace(w.worker_id);
    Observed& o = it->second;
    if (inserted || o.entry.incarnation != w.incarnation) {
      changed = true;
      o.short_since_heartbeat.reset();
      if (dead_.erase(w.worker_id)) {
        log(LogLevel::kInfo, "worker " + w.worker_id + " registered again");
      } else if (inserted) {
        log(LogLevel::kInfo, "worker " + w.worker_id + " joined");
      }
    }
    if (inserted || o.entry.incarnation != w.incarnation || o.entry.heartbeat != w.heartbeat) {
      o.changed_at = now;
    }
    o.entry = w;
  }
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (present.count(it->first)) {
      ++it;
      continue;
    }
    // Left gracefully (it handed its leases back) or fenced by an earlier leader.
    log(LogLevel::kInfo, "worker " + it->first + " left");
    changed = true;
    scan_needed_ = true;
    it = workers_.erase(it);
  }

  // The previous leader's incarnation ended with its lock: fence it at once.
  if (fence_previous_) {
    const auto& [id, incarnation] = *fence_previous_;
    auto it = workers_.find(id);
    if (it == workers_.end()) {
      if (id != config_.worker_id) dead_.insert(id);
      fence_previous_.reset();
    } else if (it->second.entry.incarnation != incarnation) {
      fence_previous_.reset();  // it registered again: alive, holding nothing of before
    } else {
      Status s = coordination_.fence_worker(it->second.entry);
      if (s.ok() || s.code() == StatusCode::kConditionFailed) {
        // Fenced now, or its entry changed (a late heartbeat of that incarnation still
        // cannot extend its hold; the next pass looks again).
        if (s.ok()) {
          log(LogLevel::kWarn, "fenced the previous leader " + id + " (its lock lapsed)");
          dead_.insert(id);
          workers_.erase(it);
          ++r.fenced;
          changed = true;
          fence_previous_.reset();
        }
      } else {
        return s.with_context("fencing the previous leader " + id + ": ");
      }
    }
  }

  // Silent workers: fenced once unchanged for failover_time on this clock.
  for (auto it = workers_.begin(); it != workers_.end();) {
    Observed& o = it->second;
    if (it->first == config_.worker_id || now - o.changed_at < config_.failover_time) {
      ++it;
      continue;
    }
    Status s = coordination_.fence_worker(o.entry);
    if (s.code() == StatusCode::kConditionFailed) {
      ++it;  // it renewed at the last moment: keep watching
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
    it = workers_.erase(it);
  }
  return Status::Ok();
}

Status LeaseLeader::scan(LeaderPassResult& r) {
  auto listed = leases_.list_leases();
  if (!listed.ok()) return listed.status().with_context("reading the lease table: ");
  const auto now = clock_.now();
  std::map<std::string, Lease> fresh;
  for (Lease& l : *listed) fresh.emplace(l.lease_key, std::move(l));
  cache_ = std::move(fresh);
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
  std::lock_guard<std::mutex> lock(stats_mu_);
  ++stats_.scans;
  return Status::Ok();
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

std::vector<std::string> LeaseLeader::find_orphans(const std::set<std::string>& live,
                                                   Status& status) {
  const auto now = clock_.now();
  std::vector<std::string> orphans;
  std::vector<std::string> keys;
  keys.reserve(cache_.size());
  for (const auto& [key, lease] : cache_) keys.push_back(key);
  for (const std::string& key : keys) {
    auto found = cache_.find(key);
    if (found == cache_.end()) continue;
    const Lease lease = found->second;
    if (lease.checkpoint.is_shard_end()) continue;
    auto known = [&](const std::optional<std::string>& w) {
      return !w || live.count(*w) || dead_.count(*w);
    };
    if (known(lease.lease_owner) && known(lease.checkpoint_owner)) {
      unknown_.erase(key);
      if (!lease.lease_owner) {
        if (!lease.checkpoint_owner) orphans.push_back(key);
        continue;
      }
      if (lease.checkpoint_owner && dead_.count(*lease.checkpoint_owner)) {
        // Its old owner was fenced mid-handoff: finish the handoff on its behalf, so the
        // worker it was going to starts (reading from the checkpoint).
        auto fresh = reread(key);
        if (!fresh.ok()) {
          status = fresh.status();
          return orphans;
        }
        if (*fresh && (**fresh).checkpoint_owner == lease.checkpoint_owner) {
          auto done = leases_.evict_lease(**fresh);
          if (done.ok()) cache_[key] = *done;
          if (lease.lease_owner && live.count(*lease.lease_owner)) {
            // The receiver polls its pending handoffs; no post needed.
          }
        }
        continue;
      }
      if (!lease.checkpoint_owner && dead_.count(*lease.lease_owner)) orphans.push_back(key);
      continue;
    }
    // Owned by a worker this leader knows nothing of: expired once its counter has not moved
    // for failover_time, as seen here (re-read when due).
    auto [u, inserted] = unknown_.try_emplace(key, Unknown{lease.lease_counter, now});
    if (!inserted && u->second.counter != lease.lease_counter) {
      u->second = Unknown{lease.lease_counter, now};
    }
    if (now - u->second.since < config_.failover_time) continue;
    auto fresh = reread(key);
    if (!fresh.ok()) {
      status = fresh.status();
      return orphans;
    }
    if (!*fresh) {
      unknown_.erase(key);
      continue;
    }
    if ((**fresh).lease_counter != u->second.counter) {
      u->second = Unknown{(**fresh).lease_counter, now};
      continue;
    }
    orphans.push_back(key);  // assigned conditional on this counter
  }
  return orphans;
}

void LeaseLeader::post(const std::map<std::string, std::vector<std::string>>& inbox) {
  for (const auto& [worker, keys] : inbox) {
    auto it = workers_.find(worker);
    if (it == workers_.end() || keys.empty()) continue;
    std::vector<std::string> unique = keys;
    std::sort(unique.begin(), unique.end());
    unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
    Status s = coordination_.post_to_inbox(it->second.entry, unique);
    if (!s.ok() && s.code() != StatusCode::kConditionFailed) {
      log(LogLevel::kWarn, "posting to worker " + worker + ": " + s.to_string() +
                               " (the worker finds its leases through its lease count)");
    }
  }
}

void LeaseLeader::repost_shortfalls(std::map<std::string, std::vector<std::string>>& inbox,
                                    LeaderPassResult& r) {
  std::map<std::string, std::vector<std::string>> owned;
  for (const auto& [key, lease] : cache_) {
    if (lease.lease_owner && !lease.checkpoint_owner) owned[*lease.lease_owner].push_back(key);
  }
  const auto now = clock_.now();
  for (auto& [id, o] : workers_) {
    if (o.entry.draining) continue;
    auto mine = owned.find(id);
    const std::int64_t expected =
        mine == owned.end() ? 0 : static_cast<std::int64_t>(mine->second.size());
    if (o.entry.lease_count >= expected) {
      o.short_since_heartbeat.reset();
      continue;
    }
    if (!o.short_since_heartbeat) {
      o.short_since_heartbeat = o.entry.heartbeat;
      continue;
    }
    // Short over two heartbeats (it had time to adopt), at most once per failover time.
    if (o.entry.heartbeat == *o.short_since_heartbeat) continue;
    if (o.last_repost && now - *o.last_repost < config_.failover_time) continue;
    o.last_repost = now;
    o.short_since_heartbeat.reset();
    auto& keys = inbox[id];
    keys.insert(keys.end(), mine->second.begin(), mine->second.end());
    ++r.reposted;
  }
}

LeaderPassResult LeaseLeader::run_pass() {
  LeaderPassResult r;
  if (!active_) return r;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.passes;
  }
  auto view = coordination_.read_all();
  if (!view.ok()) {
    r.status = view.status().with_context("reading the workers: ");
    return r;
  }
  bool changed = false;
  r.status = observe_workers(*view, r, changed);
  if (!r.status.ok()) return r;
  if (view->leader && leases_version_ != view->leader->leases_version) {
    if (leases_version_) scan_needed_ = true;
    leases_version_ = view->leader->leases_version;
  }
  if (changed && !dead_.empty()) scan_needed_ = true;
  const auto now = clock_.now();
  if (scan_needed_ || !last_scan_ || now - *last_scan_ >= config_.lease_scan_interval) {
    r.status = scan(r);
    if (!r.status.ok()) return r;
  }

  std::set<std::string> live;
  for (const auto& [id, o] : workers_) live.insert(id);
  r.workers = static_cast<int>(live.size());

  Status orphan_status;
  std::vector<std::string> orphans = find_orphans(live, orphan_status);
  if (!orphan_status.ok()) {
    r.status = orphan_status;
    return r;
  }

  // Settling: see the header. A new leader starts unsettled (it has just seen everyone).
  if (changed || !last_change_) {
    last_change_ = now;
    if (!burst_start_) burst_start_ = now;
  }
  const auto settle = config_.leader_poll_interval * 2;
  const bool settled = !burst_start_ || now - *last_change_ >= settle ||
                       now - *burst_start_ >= config_.failover_time / 2;
  if (settled) burst_start_.reset();
  if (!settled) {
    std::erase_if(orphans, [&](const std::string& key) {
      auto it = cache_.find(key);
      return it == cache_.end() || !it->second.lease_owner;  // free: waits
    });
  }

  PlanInput in;
  for (const auto& [id, o] : workers_) {
    if (!o.entry.draining) in.workers.push_back(id);  // a draining worker gets nothing more
  }
  for (const auto& [key, lease] : cache_) {
    if (!lease.checkpoint.is_shard_end()) in.leases.push_back(lease);
  }
  r.leases = static_cast<int>(in.leases.size());
  in.orphans = orphans;
  if (config_.max_leases_per_worker != std::numeric_limits<int>::max()) {
    in.max_leases_per_worker = config_.max_leases_per_worker;
  }
  // Each lease's load as its reader published it (KB/s), at least 1 KB/s so that idle
  // shards spread by count.
  for (const auto& [id, o] : workers_) {
    for (const auto& [key, kbps] : o.entry.lease_kbps) in.weights[key] = std::max(1.0, kbps);
  }
  // A lease that moved a moment ago has no estimate from its new reader yet: balancing by
  // load waits for it (orphans are still placed), or it would chase stale weights.
  bool weights_complete = true;
  if (!in.weights.empty()) {
    const std::set<std::string> orphan_set(orphans.begin(), orphans.end());
    for (const Lease& l : in.leases) {
      if (l.actual_owner() && !orphan_set.count(l.lease_key) && !in.weights.count(l.lease_key)) {
        weights_complete = false;
        break;
      }
    }
  }
  const Plan plan = plan_assignment(in);
  r.balanced = plan.moves.empty() && settled && weights_complete;

  std::map<std::string, std::vector<std::string>> inbox;
  for (const Move& move : plan.moves) {
    auto cached = cache_.find(move.lease_key);
    if (cached == cache_.end()) continue;
    // Rebalancing waits for the fleet to settle, and for the weights of leases just moved.
    if (move.handoff && (!settled || !weights_complete)) continue;
    if (move.handoff) {
      auto started = leases_.initiate_handoff(cached->second, move.to);
      if (started.ok()) {
        cache_[move.lease_key] = *started;
        inbox[*move.from].push_back(move.lease_key);
        inbox[move.to].push_back(move.lease_key);
        ++r.handoffs;
      } else if (started.status().code() == StatusCode::kConditionFailed) {
        scan_needed_ = true;  // the table moved on: read it again next pass
      } else {
        r.status = started.status();
        break;
      }
      continue;
    }
    // An assignment: of a free lease (the cached counter holds: only leaders assign), or of
    // an orphan whose cached state may be stale (re-read when the first try fails).
    Lease seen = cached->second;
    auto taken = leases_.take_lease(seen, move.to);
    if (!taken.ok() && taken.status().code() == StatusCode::kConditionFailed) {
      auto fresh = reread(move.lease_key);
      if (!fresh.ok()) {
        r.status = fresh.status();
        break;
      }
      const bool still_orphan = *fresh && !(**fresh).checkpoint_owner &&
                                (!(**fresh).lease_owner || dead_.count(*(**fresh).lease_owner));
      if (!still_orphan) continue;  // an unknown owner's lease that moved: not expired
      taken = leases_.take_lease(**fresh, move.to);
    }
    if (taken.ok()) {
      cache_[move.lease_key] = *taken;
      unknown_.erase(move.lease_key);
      inbox[move.to].push_back(move.lease_key);
      ++r.assigned;
    } else if (taken.status().code() != StatusCode::kConditionFailed) {
      r.status = taken.status();
      break;
    }
  }
  repost_shortfalls(inbox, r);
  post(inbox);
  if (auto self = inbox.find(config_.worker_id); self != inbox.end()) {
    r.posted_to_self = self->second;
  }

  // A fenced worker whose leases have all moved is forgotten.
  for (auto it = dead_.begin(); it != dead_.end();) {
    const bool owns = std::any_of(cache_.begin(), cache_.end(), [&](const auto& kv) {
      return kv.second.lease_owner == *it || kv.second.checkpoint_owner == *it;
    });
    it = owns ? std::next(it) : dead_.erase(it);
  }
  if (r.assigned || r.handoffs) {
    log(LogLevel::kInfo, "assigned " + std::to_string(r.assigned) + " leases, started " +
                             std::to_string(r.handoffs) + " handoffs (" + std::to_string(r.leases) +
                             " leases, " + std::to_string(r.workers) + " workers)");
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.fenced += r.fenced;
    stats_.assigned += r.assigned;
    stats_.handoffs += r.handoffs;
  }
  metrics_.gauge("leader.workers", r.workers, {});
  if (r.assigned) metrics_.count("leader.assigned", r.assigned, {});
  if (r.handoffs) metrics_.count("leader.handoffs", r.handoffs, {});
  return r;
}

}  // namespace kcl::leases
