// The leader's plan (assignment_planner.h): shares, orphans, handoffs, caps, and the property
// that matters most: once a plan is carried out, the next plan is empty (no lease moves again
// while membership is unchanged), for random fleets.
#include "assignment/assignment_planner.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "support/lease_test_util.h"

namespace kcl::leases {
namespace {

using namespace ::kcl::assignment;
using namespace ::kcl::coordination;

using testing::shard;

Lease owned(int i, std::optional<std::string> owner,
            std::optional<std::string> checkpoint_owner = {}) {
  Lease l;
  l.lease_key = shard(i);
  l.lease_owner = std::move(owner);
  l.checkpoint_owner = std::move(checkpoint_owner);
  return l;
}

// Carries a plan out on `leases` as the leader and the workers would (handoffs completed).
void carry_out(const Plan& plan, std::vector<Lease>& leases) {
  for (const Move& m : plan.moves) {
    for (Lease& l : leases) {
      if (l.lease_key != m.lease_key) continue;
      l.lease_owner = m.to;
      l.checkpoint_owner.reset();
    }
  }
}

std::map<std::string, int> loads(const std::vector<Lease>& leases) {
  std::map<std::string, int> out;
  for (const Lease& l : leases) {
    if (l.lease_owner) ++out[*l.lease_owner];
  }
  return out;
}

TEST(AssignmentPlannerTest, FreeLeasesAreSpreadEvenly) {
  PlanInput in;
  in.workers = {"a", "b", "c"};
  for (int i = 0; i < 10; ++i) {
    in.leases.push_back(owned(i, std::nullopt));
    in.orphans.push_back(shard(i));
  }
  Plan plan = plan_assignment(in);
  ASSERT_EQ(plan.moves.size(), 10u);
  for (const Move& m : plan.moves) EXPECT_FALSE(m.handoff) << "free leases are assigned";
  carry_out(plan, in.leases);
  auto l = loads(in.leases);
  EXPECT_EQ(l["a"] + l["b"] + l["c"], 10);
  for (auto& [w, n] : l) EXPECT_TRUE(n == 3 || n == 4) << w << " holds " << n;
}

TEST(AssignmentPlannerTest, ABalancedFleetMovesNothing) {
  PlanInput in;
  in.workers = {"a", "b", "c"};
  // 4, 4, 3: balanced for 11 leases.
  for (int i = 0; i < 11; ++i) in.leases.push_back(owned(i, i < 4 ? "a" : i < 8 ? "b" : "c"));
  EXPECT_TRUE(plan_assignment(in).moves.empty());
  // The same in any worker order.
  in.workers = {"c", "a", "b"};
  EXPECT_TRUE(plan_assignment(in).moves.empty());
}

TEST(AssignmentPlannerTest, AJoinerGetsItsShareByHandoffsFromTheMostLoaded) {
  PlanInput in;
  in.workers = {"a", "b", "new"};
  for (int i = 0; i < 12; ++i) in.leases.push_back(owned(i, i < 6 ? "a" : "b"));
  Plan plan = plan_assignment(in);
  ASSERT_EQ(plan.moves.size(), 4u);
  for (const Move& m : plan.moves) {
    EXPECT_TRUE(m.handoff);
    EXPECT_EQ(m.to, "new");
    ASSERT_TRUE(m.from);
  }
  carry_out(plan, in.leases);
  EXPECT_EQ(loads(in.leases), (std::map<std::string, int>{{"a", 4}, {"b", 4}, {"new", 4}}));
  EXPECT_TRUE(plan_assignment(in).moves.empty()) << "balanced: nothing moves again";
}

TEST(AssignmentPlannerTest, OrphansOfAFencedWorkerGoToTheLeastLoadedWithoutHandoffs) {
  PlanInput in;
  in.workers = {"a", "b"};
  for (int i = 0; i < 9; ++i) in.leases.push_back(owned(i, i < 3 ? "a" : i < 5 ? "b" : "dead"));
  for (int i = 5; i < 9; ++i) in.orphans.push_back(shard(i));
  Plan plan = plan_assignment(in);
  for (const Move& m : plan.moves) {
    EXPECT_FALSE(m.handoff);
    EXPECT_EQ(m.from, std::optional<std::string>("dead"));
  }
  carry_out(plan, in.leases);
  auto l = loads(in.leases);
  EXPECT_EQ(l["dead"], 0);
  EXPECT_TRUE((l["a"] == 5 && l["b"] == 4) || (l["a"] == 4 && l["b"] == 5));
}

TEST(AssignmentPlannerTest, ALeaseBeingHandedOffCountsForItsNewOwnerAndIsNotMovedAgain) {
  PlanInput in;
  in.workers = {"a", "b"};
  in.leases.push_back(owned(0, "b", "a"));  // a -> b pending
  in.leases.push_back(owned(1, "b", "a"));
  in.leases.push_back(owned(2, "b", "a"));
  in.leases.push_back(owned(3, "a"));
  Plan plan = plan_assignment(in);
  // b: 3 (all pending), a: 1 -> a needs one: it can only come from b's leases, which are all
  // still being handed off, so nothing moves yet.
  EXPECT_TRUE(plan.moves.empty());
}

TEST(AssignmentPlannerTest, TheCapLeavesLeasesUnassignedRatherThanOverloading) {
  PlanInput in;
  in.workers = {"a", "b"};
  in.max_leases_per_worker = 2;
  for (int i = 0; i < 6; ++i) {
    in.leases.push_back(owned(i, std::nullopt));
    in.orphans.push_back(shard(i));
  }
  Plan plan = plan_assignment(in);
  EXPECT_EQ(plan.moves.size(), 4u);
  carry_out(plan, in.leases);
  auto l = loads(in.leases);
  EXPECT_EQ(l["a"], 2);
  EXPECT_EQ(l["b"], 2);
}

TEST(AssignmentPlannerTest, RandomFleetsBalanceInOnePlanAndThenStayPut) {
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed);
    const int workers = 1 + static_cast<int>(rng() % 12);
    const int leases = static_cast<int>(rng() % 60);
    PlanInput in;
    for (int w = 0; w < workers; ++w) in.workers.push_back("w" + std::to_string(w));
    for (int i = 0; i < leases; ++i) {
      const int pick = static_cast<int>(rng() % static_cast<std::uint64_t>(workers + 2));
      if (pick == workers) {
        in.leases.push_back(owned(i, std::nullopt));
        in.orphans.push_back(shard(i));
      } else if (pick == workers + 1) {
        in.leases.push_back(owned(i, "gone"));
        in.orphans.push_back(shard(i));
      } else {
        in.leases.push_back(owned(i, "w" + std::to_string(pick)));
      }
    }
    Plan plan = plan_assignment(in);
    carry_out(plan, in.leases);
    auto l = loads(in.leases);
    int lo = leases, hi = 0, total = 0;
    for (const auto& w : in.workers) {
      lo = std::min(lo, l[w]);
      hi = std::max(hi, l[w]);
      total += l[w];
    }
    EXPECT_EQ(total, leases) << "seed " << seed << ": every lease placed";
    EXPECT_LE(hi - lo, 1) << "seed " << seed;
    in.orphans.clear();
    EXPECT_TRUE(plan_assignment(in).moves.empty()) << "seed " << seed << ": moved again";
  }
}

std::map<std::string, double> weight_loads(const std::vector<Lease>& leases,
                                           const std::map<std::string, double>& weights) {
  std::map<std::string, double> out;
  for (const Lease& l : leases) {
    if (l.lease_owner) out[*l.lease_owner] += weights.at(l.lease_key);
  }
  return out;
}

TEST(AssignmentPlannerTest, AWorkerWithAHotShardHoldsFewerOthers) {
  PlanInput in;
  in.workers = {"a", "b", "c"};
  for (int i = 0; i < 12; ++i) {
    in.leases.push_back(owned(i, i < 4 ? "a" : i < 8 ? "b" : "c"));
    in.weights[shard(i)] = i == 0 ? 100.0 : 10.0;  // shard 0 carries 10x
  }
  Plan plan = plan_assignment(in);
  EXPECT_TRUE(plan.by_load);
  for (const Move& m : plan.moves) {
    EXPECT_TRUE(m.handoff);
    EXPECT_NE(m.lease_key, shard(0)) << "the hot shard itself stays";
  }
  carry_out(plan, in.leases);
  auto l = weight_loads(in.leases, in.weights);
  const double mean = (100.0 + 11 * 10.0) / 3;
  for (auto& [w, load] : l) EXPECT_LE(load, 1.5 * mean) << w;
  EXPECT_EQ(loads(in.leases)["a"], 1) << "the hot shard's worker holds nothing else";
  EXPECT_TRUE(plan_assignment(in).moves.empty()) << "balanced by load: nothing moves again";
}

TEST(AssignmentPlannerTest, WeightsWithinAFactorOfTwoPlanByCount) {
  PlanInput in;
  in.workers = {"a", "b"};
  for (int i = 0; i < 4; ++i) {
    in.leases.push_back(owned(i, "a"));
    in.weights[shard(i)] = 10.0 + i;
  }
  Plan plan = plan_assignment(in);
  EXPECT_FALSE(plan.by_load);
  EXPECT_EQ(plan.moves.size(), 2u);
}

TEST(AssignmentPlannerTest, RandomWeightsBalanceByLoadAndThenStayPut) {
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed);
    const int workers = 2 + static_cast<int>(rng() % 8);
    const int leases = workers * 3 + static_cast<int>(rng() % 40);
    PlanInput in;
    for (int w = 0; w < workers; ++w) in.workers.push_back("w" + std::to_string(w));
    double total = 0, heaviest = 0;
    for (int i = 0; i < leases; ++i) {
      const bool free = rng() % 4 == 0;
      in.leases.push_back(
          owned(i, free ? std::nullopt
                        : std::optional<std::string>("w" + std::to_string(rng() % workers))));
      if (free) in.orphans.push_back(shard(i));
      const double wt = 1.0 + static_cast<double>(rng() % 100) * (rng() % 10 == 0 ? 20 : 1);
      in.weights[shard(i)] = wt;
      total += wt;
      heaviest = std::max(heaviest, wt);
    }
    Plan plan = plan_assignment(in);
    carry_out(plan, in.leases);
    in.orphans.clear();
    EXPECT_TRUE(plan_assignment(in).moves.empty()) << "seed " << seed << ": moved again";
    if (!plan.by_load) continue;
    // The fixed point: the most loaded worker carries at most 1.5 x the mean, or none of its
    // leases could go to the least loaded without making the larger of the two loads larger.
    const double mean = total / workers;
    auto l = weight_loads(in.leases, in.weights);
    std::string most = in.workers[0], least = in.workers[0];
    for (const auto& w : in.workers) {
      if (l[w] > l[most]) most = w;
      if (l[w] < l[least]) least = w;
    }
    if (l[most] <= 1.5 * mean && l[least] >= mean / 1.5) continue;
    for (const Lease& lease : in.leases) {
      if (!lease.lease_owner || *lease.lease_owner == least) continue;
      EXPECT_GE(in.weights[lease.lease_key], l[*lease.lease_owner] - l[least])
          << "seed " << seed << ": " << lease.lease_key << " could still move from "
          << *lease.lease_owner;
    }
    (void)heaviest;
  }
}

// build_plan_input: what the leader knows becomes the plan's input.
class PlanInputTest : public ::testing::Test {
 protected:
  static WorkerEntry worker(const std::string& id, bool draining = false,
                            std::map<std::string, double> kbps = {}) {
    WorkerEntry w;
    w.worker_id = id;
    w.draining = draining;
    w.lease_kbps = std::move(kbps);
    return w;
  }
  void add(Lease l) { cache_[l.lease_key] = std::move(l); }
  std::map<std::string, Lease> cache_;
};

TEST_F(PlanInputTest, ADrainingWorkerGetsNothingAndLeasesAtShardEndAreNotAssignable) {
  add(owned(0, "a"));
  Lease ended = owned(1, "b");
  ended.checkpoint = ExtendedSequenceNumber::shard_end();
  add(ended);
  add(owned(2, std::nullopt));
  LeaderKnowledge known;
  known.workers = {worker("a"), worker("b", true)};
  known.leases = &cache_;
  known.orphans = {shard(2)};
  const PlanRequest req = build_plan_input(known);
  EXPECT_EQ(req.input.workers, std::vector<std::string>{"a"});
  ASSERT_EQ(req.input.leases.size(), 2u);
  EXPECT_EQ(req.input.leases[0].lease_key, shard(0));
  EXPECT_EQ(req.input.leases[1].lease_key, shard(2));
  EXPECT_EQ(req.input.orphans, std::vector<std::string>{shard(2)});
  EXPECT_TRUE(req.weights_complete);
}

TEST_F(PlanInputTest, WhileTheFleetChangesFreeLeasesWaitButADeadWorkersLeasesMove) {
  add(owned(0, std::nullopt));  // free
  add(owned(1, "dead"));        // its owner was fenced
  LeaderKnowledge known;
  known.workers = {worker("a")};
  known.leases = &cache_;
  known.orphans = {shard(0), shard(1)};
  known.settled = false;
  EXPECT_EQ(build_plan_input(known).input.orphans, std::vector<std::string>{shard(1)});
  known.settled = true;
  EXPECT_EQ(build_plan_input(known).input.orphans, (std::vector<std::string>{shard(0), shard(1)}));
}

TEST_F(PlanInputTest, WeightsAreAtLeastOneAndRebalancingWaitsForEveryOwnedLeasesWeight) {
  add(owned(0, "a"));
  add(owned(1, "b"));
  add(owned(2, std::nullopt));
  LeaderKnowledge known;
  known.workers = {worker("a", false, {{shard(0), 0.2}}), worker("b")};
  known.leases = &cache_;
  known.orphans = {shard(2)};
  known.max_leases_per_worker = 7;
  PlanRequest req = build_plan_input(known);
  EXPECT_EQ(req.input.weights, (std::map<std::string, double>{{shard(0), 1.0}}));
  EXPECT_EQ(req.input.max_leases_per_worker, 7);
  EXPECT_FALSE(req.weights_complete) << "b has not published shard 1's weight yet";
  known.workers[1].lease_kbps = {{shard(1), 40.0}};
  req = build_plan_input(known);
  EXPECT_TRUE(req.weights_complete) << "the orphan needs no weight";
  EXPECT_EQ(req.input.weights.at(shard(1)), 40.0);
}

}  // namespace
}  // namespace kcl::leases
