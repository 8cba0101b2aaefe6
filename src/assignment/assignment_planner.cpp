#include "assignment/assignment_planner.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace kcl::assignment {

namespace {

// By load, a worker may carry up to this times the mean load before leases move.
constexpr double kLoadTolerance = 1.5;

// The by-load plan (see the header).
Plan plan_by_load(const PlanInput& input, const std::vector<std::string>& workers,
                  const std::map<std::string, double>& weight) {
  Plan plan;
  plan.by_load = true;
  const std::set<std::string> live(workers.begin(), workers.end());
  const std::set<std::string> orphan_set(input.orphans.begin(), input.orphans.end());
  std::map<std::string, std::vector<const Lease*>> movable;
  std::vector<const Lease*> orphans;
  double total = 0;
  for (const std::string& w : workers) {
    plan.load[w] = 0;
    plan.weight_load[w] = 0;
  }
  for (const Lease& lease : input.leases) {
    const double wt = weight.at(lease.lease_key);
    if (orphan_set.count(lease.lease_key)) {
      orphans.push_back(&lease);
      total += wt;
      continue;
    }
    if (!lease.lease_owner || !live.count(*lease.lease_owner)) continue;
    total += wt;
    ++plan.load[*lease.lease_owner];
    plan.weight_load[*lease.lease_owner] += wt;
    if (!lease.checkpoint_owner) movable[*lease.lease_owner].push_back(&lease);
  }
  const int cap = input.max_leases_per_worker;
  auto has_room = [&](const std::string& w) { return cap <= 0 || plan.load[w] < cap; };
  auto least_loaded = [&]() -> const std::string* {
    const std::string* best = nullptr;
    for (const std::string& w : workers) {
      if (!has_room(w)) continue;
      if (!best || plan.weight_load[w] < plan.weight_load[*best] ||
          (plan.weight_load[w] == plan.weight_load[*best] && plan.load[w] < plan.load[*best])) {
        best = &w;
      }
    }
    return best;
  };
  std::sort(orphans.begin(), orphans.end(), [&](const Lease* a, const Lease* b) {
    const double wa = weight.at(a->lease_key);
    const double wb = weight.at(b->lease_key);
    return wa != wb ? wa > wb : a->lease_key < b->lease_key;
  });
  std::map<std::string, std::size_t> assigned;  // orphan -> its move, if rebalancing moves it
  for (const Lease* lease : orphans) {
    const std::string* to = least_loaded();
    if (!to) break;
    assigned[lease->lease_key] = plan.moves.size();
    plan.moves.push_back(Move{lease->lease_key, lease->lease_owner, *to, false});
    ++plan.load[*to];
    plan.weight_load[*to] += weight.at(lease->lease_key);
    movable[*to].push_back(lease);
  }

  const double mean = total / static_cast<double>(workers.size());
  for (std::size_t round = 0; round < input.leases.size(); ++round) {
    const std::string* least = least_loaded();
    if (!least) break;
    // Donors, most loaded first: the first that can lower the larger of its load and the
    // least loaded worker's, while someone is outside the tolerance.
    std::vector<const std::string*> donors;
    for (const std::string& w : workers) {
      if (&w != least) donors.push_back(&w);
    }
    std::sort(donors.begin(), donors.end(), [&](const std::string* a, const std::string* b) {
      return plan.weight_load[*a] > plan.weight_load[*b];
    });
    if (donors.empty() || (plan.weight_load[*donors.front()] <= mean * kLoadTolerance &&
                           plan.weight_load[*least] >= mean / kLoadTolerance)) {
      break;
    }
    bool moved = false;
    for (const std::string* most : donors) {
      const double gap = plan.weight_load[*most] - plan.weight_load[*least];
      if (gap <= 0) break;
      auto& from = movable[*most];
      auto best = from.end();
      for (auto it = from.begin(); it != from.end(); ++it) {
        const double wt = weight.at((*it)->lease_key);
        if (wt >= gap) continue;  // would not lower the larger of the two loads
        if (best == from.end() ||
            std::abs(wt - gap / 2) < std::abs(weight.at((*best)->lease_key) - gap / 2)) {
          best = it;
        }
      }
      if (best == from.end()) continue;
      const Lease* lease = *best;
      from.erase(best);
      const double wt = weight.at(lease->lease_key);
      if (auto a = assigned.find(lease->lease_key); a != assigned.end()) {
        plan.moves[a->second].to = *least;  // an orphan: assign it there instead
      } else {
        plan.moves.push_back(Move{lease->lease_key, *most, *least, true});
      }
      --plan.load[*most];
      ++plan.load[*least];
      plan.weight_load[*most] -= wt;
      plan.weight_load[*least] += wt;
      movable[*least].push_back(lease);
      moved = true;
      break;
    }
    if (!moved) break;
  }
  return plan;
}

}  // namespace

Plan plan_assignment(const PlanInput& input) {
  Plan plan;
  if (input.workers.empty()) return plan;
  std::vector<std::string> workers = input.workers;
  std::sort(workers.begin(), workers.end());
  workers.erase(std::unique(workers.begin(), workers.end()), workers.end());

  // Weights: when they differ by more than a factor of two, plan by load.
  if (!input.weights.empty()) {
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
    if (!weight.empty() && hi > 2 * lo) return plan_by_load(input, workers, weight);
  }
  const std::set<std::string> live(workers.begin(), workers.end());
  const std::set<std::string> orphan_set(input.orphans.begin(), input.orphans.end());

  // Current loads, and each worker's leases that may be handed off.
  std::map<std::string, std::vector<const Lease*>> movable;
  std::vector<const Lease*> orphans;
  int assignable = 0;
  for (const std::string& w : workers) plan.load[w] = 0;
  for (const Lease& lease : input.leases) {
    if (orphan_set.count(lease.lease_key)) {
      orphans.push_back(&lease);
      ++assignable;
      continue;
    }
    if (!lease.lease_owner || !live.count(*lease.lease_owner)) continue;  // not ours to place
    ++assignable;
    ++plan.load[*lease.lease_owner];
    if (!lease.checkpoint_owner) movable[*lease.lease_owner].push_back(&lease);
  }

  // Shares: the most loaded workers keep the extra lease, so a balanced fleet moves nothing.
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
    if (input.max_leases_per_worker > 0) t = std::min(t, input.max_leases_per_worker);
    plan.target[w] = t;
  }

  // The worker furthest below its share (ties: fewest leases, then id); empty when none is.
  auto neediest = [&]() -> const std::string* {
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
  };

  std::sort(orphans.begin(), orphans.end(),
            [](const Lease* a, const Lease* b) { return a->lease_key < b->lease_key; });
  for (const Lease* lease : orphans) {
    const std::string* to = neediest();
    if (!to) break;  // every worker at its cap
    plan.moves.push_back(Move{lease->lease_key, lease->lease_owner, *to, false});
    ++plan.load[*to];
  }

  for (const std::string& from : workers) {
    auto& mine = movable[from];
    std::sort(mine.begin(), mine.end(),
              [](const Lease* a, const Lease* b) { return a->lease_key > b->lease_key; });
    while (plan.load[from] > plan.target[from] && !mine.empty()) {
      const std::string* to = neediest();
      if (!to) break;
      const Lease* lease = mine.back();
      mine.pop_back();
      plan.moves.push_back(Move{lease->lease_key, from, *to, true});
      --plan.load[from];
      ++plan.load[*to];
    }
  }
  return plan;
}

}  // namespace kcl::assignment
