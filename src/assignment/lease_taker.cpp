#include "assignment/lease_taker.h"

#include <algorithm>
#include <set>
#include <unordered_map>

namespace kcl::assignment {

using leases::HeldSummary;

LeaseTaker::LeaseTaker(leases::HeldLeases& held, leases::LeaseStore& store,
                       const LeaseConfig& config, const Clock& clock, MetricsSink& metrics,
                       std::uint64_t seed)
    : held_(held), store_(store), config_(config), clock_(clock), metrics_(metrics), rng_(seed) {}

void LeaseTaker::stop_taking() {
  stopped_.store(true);
  // A pass already running may still take a lease: wait for it to end.
  std::lock_guard<std::mutex> pass_done(take_mu_);
}

// ---- the take pass, step by step ----

// What one take pass works from: the scan, when each lease's counter was first seen, what
// this worker holds, and the classification of the rest.
struct LeaseTaker::TakeView {
  Clock::MonoTime now;
  std::vector<const Observed*> seen;  // parallel to the scanned leases
  std::unordered_map<std::string, HeldSummary> held;
  std::vector<const Lease*> available;               // free, expired, or ours but not held
  std::unordered_map<std::string_view, int> counts;  // other live owners -> leases
  int mine = 0;                                      // held and current
};

// Records when each counter was first seen (forgetting leases that are gone) and what this
// worker holds. (References into an unordered_map stay valid when it rehashes.)
void LeaseTaker::observe(const std::vector<Lease>& leases, TakeView& view) {
  const std::uint64_t generation = ++pass_generation_;
  view.seen.reserve(leases.size());
  for (const auto& lease : leases) {
    auto [it, inserted] = observed_.try_emplace(lease.lease_key);
    Observed& o = it->second;
    if (inserted || o.counter != lease.lease_counter) {
      o.counter = lease.lease_counter;
      o.changed_at = view.now;
    }
    o.generation = generation;
    view.seen.push_back(&o);
  }
  if (observed_.size() != leases.size()) {
    std::erase_if(observed_, [&](const auto& kv) { return kv.second.generation != generation; });
  }
  for (HeldSummary& h : held_.summaries()) view.held.emplace(h.lease_key, std::move(h));
}

// A lease this worker holds that the scan shows at a higher counter under another owner (or
// none) was taken (or handed back) since this worker's last write: given up now.
void LeaseTaker::drop_taken_elsewhere(const std::vector<Lease>& leases, TakeView& view) {
  for (const auto& lease : leases) {
    auto it = view.held.find(lease.lease_key);
    if (it == view.held.end() || lease.lease_counter <= it->second.counter) continue;
    if (held_.lose_if_moved(lease)) it->second.current = false;
  }
}

// Held by this worker, available (free, expired, or this worker's in the table but not
// held), or held by another live worker; notes when the first suspect lease expires. A lease
// of an ended shard (SHARD_END) is none of these: it is not read again, so it neither counts
// toward a worker's share nor is taken (counted, a worker at max_leases_per_worker holding
// ended parents would never take their children, and the parents go only once the children
// started).
void LeaseTaker::classify(const std::vector<Lease>& leases, TakeView& view,
                          TakePassResult& result) {
  std::set<std::string_view> ended;
  for (const Lease& lease : leases) {
    if (lease.checkpoint.is_shard_end()) ended.insert(lease.lease_key);
  }
  for (const auto& [key, held] : view.held) {
    if (held.current && !ended.count(key)) ++view.mine;
  }
  const auto suspect_after = config_.effective_renew_interval() * 3 / 2;
  for (std::size_t i = 0; i < leases.size(); ++i) {
    const Lease& lease = leases[i];
    if (view.held.count(lease.lease_key) || ended.count(lease.lease_key)) continue;
    if (!lease.lease_owner || *lease.lease_owner == config_.worker_id) {
      view.available.push_back(&lease);
      continue;
    }
    const auto since = view.now - view.seen[i]->changed_at;
    if (since >= config_.failover_time) {
      view.available.push_back(&lease);
      result.orphaned.push_back({lease.lease_key, *lease.lease_owner, view.seen[i]->changed_at});
    } else {
      ++view.counts[*lease.lease_owner];
      if (since > suspect_after) {
        const auto expiry = view.now - since + config_.failover_time;
        if (!result.next_expiry || expiry < *result.next_expiry) result.next_expiry = expiry;
      }
    }
  }
  result.held_before = view.mine;
  result.available = static_cast<int>(view.available.size());
  result.workers_seen = static_cast<int>(view.counts.size()) + 1;
}

// Free and expired leases, in random order, up to what is needed and the start-up ramp.
void LeaseTaker::take_available(TakeView& view, int needed, TakePassResult& result) {
  std::shuffle(view.available.begin(), view.available.end(), rng_);
  int limit = needed;
  if (config_.take_ramp_floor > 0) {
    limit = std::min(limit, std::max(config_.take_ramp_floor, view.mine));
  }
  const int to_take = std::min<int>(limit, static_cast<int>(view.available.size()));
  result.limited_by_ramp = to_take < needed && to_take < static_cast<int>(view.available.size());
  for (int i = 0; i < to_take; ++i) {
    if (!try_take(*view.available[static_cast<std::size_t>(i)], false, result)) break;
  }
}

// Nothing free or expired: steal from the most loaded worker (the Java KCL's rule).
void LeaseTaker::steal(const std::vector<Lease>& leases, const TakeView& view, int target,
                       int needed, TakePassResult& result) {
  int most = 0;
  std::vector<std::string> most_loaded;
  for (const auto& [owner, count] : view.counts) {
    if (count > most) {
      most = count;
      most_loaded.assign(1, std::string(owner));
    } else if (count == most) {
      most_loaded.push_back(std::string(owner));
    }
  }
  // Iteration order of the hash map must not decide between equals: sort, then pick at random.
  std::sort(most_loaded.begin(), most_loaded.end());
  if (most_loaded.empty() || most < target) return;
  int steal = std::min(needed, most - target);
  if (needed > 1 && steal == 0) steal = 1;
  steal = std::min(steal, config_.max_leases_to_steal_at_once);
  if (steal <= 0) return;
  std::uniform_int_distribution<std::size_t> pick(0, most_loaded.size() - 1);
  const std::string victim = most_loaded[pick(rng_)];
  std::vector<const Lease*> candidates;
  for (const auto& lease : leases) {
    if (lease.lease_owner == victim) candidates.push_back(&lease);
  }
  std::shuffle(candidates.begin(), candidates.end(), rng_);
  int attempted = 0;
  for (const Lease* candidate : candidates) {
    if (attempted >= steal) break;
    ++attempted;
    // The scan may be seconds old: steal on a consistent read of the lease, so that the take
    // is conditional on its current counter.
    auto fresh = store_.get_lease(candidate->lease_key);
    if (!fresh.ok()) {
      if (result.status.ok()) result.status = fresh.status();
      break;
    }
    if (!fresh->has_value() || (*fresh)->lease_owner != victim) continue;
    if (!try_take(**fresh, true, result)) break;
  }
}

std::optional<Lease> LeaseTaker::landed_take(const Lease& seen) {
  auto fresh = store_.get_lease(seen.lease_key);
  if (!fresh.ok() || !fresh->has_value()) return std::nullopt;
  const Lease& now_in_table = **fresh;
  if (now_in_table.lease_owner != config_.worker_id ||
      now_in_table.lease_counter != seen.lease_counter + 1) {
    return std::nullopt;
  }
  return now_in_table;
}

bool LeaseTaker::try_take(const Lease& seen, bool steal, TakePassResult& result) {
  const auto start = clock_.now();
  auto taken = store_.take_lease(seen, config_.worker_id);
  if (!taken.ok()) {
    // A take whose answer was lost may have landed: the table then names this worker, and
    // the lease is held as taken rather than left unread until it expires.
    if (auto landed = landed_take(seen)) taken = std::move(*landed);
  }
  if (taken.ok()) {
    observed_[seen.lease_key] = Observed{taken->lease_counter, clock_.now(), pass_generation_};
    if (steal) {
      result.stolen.push_back(seen.lease_key);
      metrics_.count("leases.stolen", 1, {});
    } else {
      result.taken.push_back(seen.lease_key);
      metrics_.count("leases.taken", 1, {});
    }
    held_.gain(taken.value(), start);
    return true;
  }
  if (taken.status().code() == StatusCode::kConditionFailed) {
    ++result.failed_conditions;
    const MetricTag tag{"operation", steal ? "steal" : "take"};
    metrics_.count("leases.failed_conditions", 1, MetricTags(&tag, 1));
    return true;
  }
  if (result.status.ok()) result.status = taken.status();
  return false;  // the store is in trouble: leave the rest for the next pass
}

TakePassResult LeaseTaker::run_take_pass() {
  std::lock_guard<std::mutex> pass_lock(take_mu_);
  TakePassResult result;
  if (stopped_.load()) return result;
  auto listed = store_.list_leases();
  if (!listed.ok()) {
    result.status = listed.status().with_context("listing leases: ");
    return result;
  }
  const std::vector<Lease>& leases = listed.value();
  result.leases_seen = static_cast<int>(leases.size());
  TakeView view;
  view.now = clock_.now();
  observe(leases, view);
  drop_taken_elsewhere(leases, view);
  classify(leases, view, result);
  // The share is of the leases still to be read (classify()).
  const int total = static_cast<int>(std::count_if(
      leases.begin(), leases.end(), [](const Lease& l) { return !l.checkpoint.is_shard_end(); }));
  if (total == 0) return result;
  const int workers = result.workers_seen;
  int target = workers >= total ? 1 : (total + workers - 1) / workers;
  target = std::min(target, config_.max_leases_per_worker);
  result.target = target;
  const int needed = target - view.mine;
  if (needed > 0) {
    if (!view.available.empty()) {
      take_available(view, needed, result);
    } else {
      steal(leases, view, target, needed, result);
    }
  }
  auto taken = [&](const std::string& key) {
    return std::find(result.taken.begin(), result.taken.end(), key) != result.taken.end();
  };
  std::erase_if(result.orphaned, [&](const OrphanedLease& o) { return taken(o.lease_key); });
  result.unheld = static_cast<int>(result.orphaned.size());
  for (const Lease& l : leases) {
    if (!l.lease_owner && !l.checkpoint.is_shard_end() && !taken(l.lease_key)) ++result.unheld;
  }
  return result;
}

}  // namespace kcl::assignment
