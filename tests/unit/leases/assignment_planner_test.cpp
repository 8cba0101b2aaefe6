// The leader's plan (assignment_planner.h): shares, orphans, handoffs, caps, and the property
// that matters most: once a plan is carried out, the next plan is empty (no lease moves again
// while membership is unchanged), for random fleets.
#include "leases/assignment_planner.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "lease_test_util.h"

namespace kcl::leases {
namespace {

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

}  // namespace
}  // namespace kcl::leases
