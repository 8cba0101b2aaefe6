#include "leases/assignment_planner.h"

#include <algorithm>
#include <set>

namespace kcl::leases {

Plan plan_assignment(const PlanInput& input) {
  Plan plan;
  if (input.workers.empty()) return plan;
  std::vector<std::string> workers = input.workers;
  std::sort(workers.begin(), workers.end());
  workers.erase(std::unique(workers.begin(), workers.end()), workers.end());
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

}  // namespace kcl::leases
