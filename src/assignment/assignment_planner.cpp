#include "assignment/assignment_planner.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace kcl::assignment {

namespace {

// By load, a worker may carry up to this times the mean load before leases move.
constexpr double kLoadTolerance = 1.5;

// What both plans start from: the workers' current loads (in `plan`), the orphans to place,
// and each worker's leases that may be handed off (not already being handed off).
struct Tally {
  std::map<std::string, std::vector<const Lease*>> movable;
  std::vector<const Lease*> orphans;
  int assignable = 0;  // leases the plan places: orphans and live workers' leases
  double weight = 0;   // their total weight (by load)
};

Tally tally(const PlanInput& input, const std::vector<std::string>& workers,
            const std::map<std::string, double>* weight, Plan& plan) {
  Tally t;
  const std::set<std::string> live(workers.begin(), workers.end());
  const std::set<std::string> orphan_set(input.orphans.begin(), input.orphans.end());
  for (const std::string& w : workers) {
    plan.load[w] = 0;
    if (weight) plan.weight_load[w] = 0;
  }
  for (const Lease& lease : input.leases) {
    const double wt = weight ? weight->at(lease.lease_key) : 0;
    if (orphan_set.count(lease.lease_key)) {
      t.orphans.push_back(&lease);
    } else if (lease.lease_owner && live.count(*lease.lease_owner)) {
      ++plan.load[*lease.lease_owner];
      if (weight) plan.weight_load[*lease.lease_owner] += wt;
      if (!lease.checkpoint_owner) t.movable[*lease.lease_owner].push_back(&lease);
    } else {
      continue;  // not ours to place
    }
    ++t.assignable;
    t.weight += wt;
  }
  return t;
}

// ---- by count ----

// Shares: the most loaded workers keep the extra lease, so a balanced fleet moves nothing.
void set_shares(const std::vector<std::string>& workers, int assignable, int cap, Plan& plan) {
  const int m = static_cast<int>(workers.size());
  const int base = assignable / m;
  int extra = assignable % m;
  std::vector<std::string> by_load = workers;
  std::stable_sort(by_load.begin(), by_load.end(), [&](const std::string& a, const std::string& b) {
    return plan.load[a] > plan.load[b];
  });
  for (const std::string& w : by_load) {
    int t = base + (extra > 0 ? 1 : 0);
    if (extra > 0) --extra;
    if (cap > 0) t = std::min(t, cap);
    plan.target[w] = t;
  }
}

// The worker furthest below its share (ties: fewest leases, then id); null when none is.
const std::string* neediest(const std::vector<std::string>& workers, Plan& plan) {
  const std::string* best = nullptr;
  int best_gap = 0;
  for (const std::string& w : workers) {
    const int gap = plan.target[w] - plan.load[w];
    if (gap <= 0) continue;
    if (!best || gap > best_gap || (gap == best_gap && plan.load[w] < plan.load[*best])) {
      best = &w;
      best_gap = gap;
    }
  }
  return best;
}

void place_orphans_by_count(std::vector<const Lease*> orphans,
                            const std::vector<std::string>& workers, Plan& plan) {
  std::sort(orphans.begin(), orphans.end(),
            [](const Lease* a, const Lease* b) { return a->lease_key < b->lease_key; });
  for (const Lease* lease : orphans) {
    const std::string* to = neediest(workers, plan);
    if (!to) break;  // every worker at its cap
    plan.moves.push_back(Move{lease->lease_key, lease->lease_owner, *to, false});
    ++plan.load[*to];
  }
}

// A worker above its share hands its excess to workers below theirs.
void hand_off_excess(const std::vector<std::string>& workers,
                     std::map<std::string, std::vector<const Lease*>>& movable, Plan& plan) {
  for (const std::string& from : workers) {
    auto& mine = movable[from];
    std::sort(mine.begin(), mine.end(),
              [](const Lease* a, const Lease* b) { return a->lease_key > b->lease_key; });
    while (plan.load[from] > plan.target[from] && !mine.empty()) {
      const std::string* to = neediest(workers, plan);
      if (!to) break;
      const Lease* lease = mine.back();
      mine.pop_back();
      plan.moves.push_back(Move{lease->lease_key, from, *to, true});
      --plan.load[from];
      ++plan.load[*to];
    }
  }
}

Plan plan_by_count(const PlanInput& input, const std::vector<std::string>& workers) {
  Plan plan;
  Tally t = tally(input, workers, nullptr, plan);
  set_shares(workers, t.assignable, input.max_leases_per_worker, plan);
  place_orphans_by_count(t.orphans, workers, plan);
  hand_off_excess(workers, t.movable, plan);
  return plan;
}

// ---- by load ----

// Each lease's weight (missing ones weigh the mean of the known), when the weights differ by
// more than a factor of two; empty otherwise (plan by count).
std::optional<std::map<std::string, double>> uneven_weights(const PlanInput& input) {
  if (input.weights.empty()) return std::nullopt;
  double known = 0;
  int n = 0;
  for (const Lease& l : input.leases) {
    if (auto it = input.weights.find(l.lease_key); it != input.weights.end()) {
      known += it->second;
      ++n;
    }
  }
  const double fallback = n > 0 ? known / n : 1.0;
  std::map<std::string, double> weight;
  double lo = 0, hi = 0;
  for (const Lease& l : input.leases) {
    auto it = input.weights.find(l.lease_key);
    const double wt = std::max(1e-9, it != input.weights.end() ? it->second : fallback);
    weight[l.lease_key] = wt;
    lo = weight.size() == 1 ? wt : std::min(lo, wt);
    hi = std::max(hi, wt);
  }
  if (weight.empty() || hi <= 2 * lo) return std::nullopt;
  return weight;
}

// The by-load plan in progress: the plan, the weights, what may move, and where each orphan
// went (so a rebalancing that moves an orphan again reassigns it instead).
struct LoadPlanner {
  const std::vector<std::string>& workers;
  const std::map<std::string, double>& weight;
  int cap;
  Plan& plan;
  std::map<std::string, std::vector<const Lease*>>& movable;
  std::map<std::string, std::size_t> assigned;

  bool has_room(const std::string& w) { return cap <= 0 || plan.load[w] < cap; }

  const std::string* least_loaded() {
    const std::string* best = nullptr;
    for (const std::string& w : workers) {
      if (!has_room(w)) continue;
      if (!best || plan.weight_load[w] < plan.weight_load[*best] ||
          (plan.weight_load[w] == plan.weight_load[*best] && plan.load[w] < plan.load[*best])) {
        best = &w;
      }
    }
    return best;
  }

  void place(const Lease* lease, const std::string& to) {
    assigned[lease->lease_key] = plan.moves.size();
    plan.moves.push_back(Move{lease->lease_key, lease->lease_owner, to, false});
    ++plan.load[to];
    plan.weight_load[to] += weight.at(lease->lease_key);
    movable[to].push_back(lease);
  }

  // Orphans go, heaviest first, to the least loaded worker.
  void place_orphans(std::vector<const Lease*> orphans) {
    std::sort(orphans.begin(), orphans.end(), [&](const Lease* a, const Lease* b) {
      const double wa = weight.at(a->lease_key);
      const double wb = weight.at(b->lease_key);
      return wa != wb ? wa > wb : a->lease_key < b->lease_key;
    });
    for (const Lease* lease : orphans) {
      const std::string* to = least_loaded();
      if (!to) break;
      place(lease, *to);
    }
  }

  // The lease of `from` whose weight is closest to half `gap` among those that lower the
  // larger of the two loads; end() when none does.
  std::vector<const Lease*>::iterator best_to_move(std::vector<const Lease*>& from, double gap) {
    auto best = from.end();
    for (auto it = from.begin(); it != from.end(); ++it) {
      const double wt = weight.at((*it)->lease_key);
      if (wt >= gap) continue;
      if (best == from.end() ||
          std::abs(wt - gap / 2) < std::abs(weight.at((*best)->lease_key) - gap / 2)) {
        best = it;
      }
    }
    return best;
  }

  void move(const Lease* lease, const std::string& from, const std::string& to) {
    const double wt = weight.at(lease->lease_key);
    if (auto a = assigned.find(lease->lease_key); a != assigned.end()) {
      plan.moves[a->second].to = to;  // an orphan: assign it there instead
    } else {
      plan.moves.push_back(Move{lease->lease_key, from, to, true});
    }
    --plan.load[from];
    ++plan.load[to];
    plan.weight_load[from] -= wt;
    plan.weight_load[to] += wt;
    movable[to].push_back(lease);
  }

  // One move from the most loaded donor that can lower the larger of its load and the least
  // loaded worker's, while someone is outside the tolerance; false when none is made.
  bool rebalance_once(double mean) {
    const std::string* least = least_loaded();
    if (!least) return false;
    std::vector<const std::string*> donors;
    for (const std::string& w : workers) {
      if (&w != least) donors.push_back(&w);
    }
    std::sort(donors.begin(), donors.end(), [&](const std::string* a, const std::string* b) {
      return plan.weight_load[*a] > plan.weight_load[*b];
    });
    if (donors.empty() || (plan.weight_load[*donors.front()] <= mean * kLoadTolerance &&
                           plan.weight_load[*least] >= mean / kLoadTolerance)) {
      return false;
    }
    for (const std::string* most : donors) {
      const double gap = plan.weight_load[*most] - plan.weight_load[*least];
      if (gap <= 0) break;
      auto& from = movable[*most];
      auto best = best_to_move(from, gap);
      if (best == from.end()) continue;
      const Lease* lease = *best;
      from.erase(best);
      move(lease, *most, *least);
      return true;
    }
    return false;
  }
};

Plan plan_by_load(const PlanInput& input, const std::vector<std::string>& workers,
                  const std::map<std::string, double>& weight) {
  Plan plan;
  plan.by_load = true;
  Tally t = tally(input, workers, &weight, plan);
  LoadPlanner p{workers, weight, input.max_leases_per_worker, plan, t.movable, {}};
  p.place_orphans(t.orphans);
  const double mean = t.weight / static_cast<double>(workers.size());
  for (std::size_t round = 0; round < input.leases.size(); ++round) {
    if (!p.rebalance_once(mean)) break;
  }
  return plan;
}

}  // namespace

PlanRequest build_plan_input(const LeaderKnowledge& known) {
  PlanRequest req;
  PlanInput& in = req.input;
  for (const coordination::WorkerEntry& w : known.workers) {
    if (!w.draining) in.workers.push_back(w.worker_id);
    for (const auto& [key, kbps] : w.lease_kbps) in.weights[key] = std::max(1.0, kbps);
  }
  for (const auto& [key, lease] : *known.leases) {
    if (!lease.checkpoint.is_shard_end()) in.leases.push_back(lease);
  }
  for (const std::string& key : known.orphans) {
    auto it = known.leases->find(key);
    const bool free = it == known.leases->end() || !it->second.lease_owner;
    if (known.settled || !free) in.orphans.push_back(key);
  }
  in.max_leases_per_worker = known.max_leases_per_worker;
  if (!in.weights.empty()) {
    const std::set<std::string> orphan_set(in.orphans.begin(), in.orphans.end());
    for (const Lease& l : in.leases) {
      if (l.actual_owner() && !orphan_set.count(l.lease_key) && !in.weights.count(l.lease_key)) {
        req.weights_complete = false;
        break;
      }
    }
  }
  return req;
}

Plan plan_assignment(const PlanInput& input) {
  if (input.workers.empty()) return Plan{};
  std::vector<std::string> workers = input.workers;
  std::sort(workers.begin(), workers.end());
  workers.erase(std::unique(workers.begin(), workers.end()), workers.end());
  if (auto weight = uneven_weights(input)) return plan_by_load(input, workers, *weight);
  return plan_by_count(input, workers);
}

}  // namespace kcl::assignment
