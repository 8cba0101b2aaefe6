// Leader-based assignment (LeaseAssignment::kLeader) through the deterministic simulation:
// balance and stability through joins, crashes, graceful leaves and a pause; the safety
// invariant; and costs that do not grow with workers x shards.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "simulation/lease_simulation.h"

namespace kcl::leases {
namespace {

using namespace std::chrono_literals;
using Kind = SimulationEvent::Kind;

SimulationOptions options(int workers, int shards, std::uint64_t seed) {
  SimulationOptions o;
  o.workers = workers;
  o.shards = shards;
  o.seed = seed;
  // A fleet deployed together: its workers register within settle_time (200 ms) of one
  // another.
  o.start_spread = 150ms;
  o.lease.application_name = "leader-sim-test";
  o.lease.assignment = LeaseAssignment::kLeader;
  return o;
}

void expect_safe_and_stable(const SimulationReport& report) {
  SCOPED_TRACE(report.to_text());
  EXPECT_EQ(report.invariant_violations, 0);
  EXPECT_EQ(report.bookkeeping_mismatches, 0);
  for (const auto& phase : report.phases) {
    ASSERT_TRUE(phase.time_to_balance.has_value()) << phase.label << " never balanced";
    EXPECT_EQ(phase.moves_after_balance, 0) << phase.label << ": leases moved after balance";
    EXPECT_LE(phase.max_held - phase.min_held, 1) << phase.label;
  }
}

TEST(LeaderSimulationTest, EveryPhaseBalancesFastAndNothingMovesAfterwards) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    SimulationOptions o = options(10, 100, seed);
    o.duration = 30min;
    o.events = {
        {8min, Kind::kJoin, 1, 0ms},
        {14min, Kind::kCrash, 1, 0ms},
        {20min, Kind::kLeave, 1, 0ms},
        {24min, Kind::kPause, 1, 60s},
    };
    auto report = run_lease_simulation(o);
    ASSERT_TRUE(report.ok()) << report.status();
    expect_safe_and_stable(*report);
    ASSERT_EQ(report->phases.size(), 6u);
    const auto& start = report->phases[0];
    const auto& join = report->phases[1];
    const auto& crash = report->phases[2];
    const auto& leave = report->phases[3];
    SCOPED_TRACE(report->to_text());
    EXPECT_LE(start.assignment_passes, 3);
    EXPECT_EQ(start.handoffs, 0) << "a fleet starting together is assigned once";
    EXPECT_LE(*join.time_to_balance, 5s);
    EXPECT_LE(join.assignment_passes, 3);
    EXPECT_EQ(join.takes_of_expired, 0) << "a join moves leases by handoff only";
    EXPECT_LE(*crash.time_to_balance, o.lease.failover_time + 2s);
    EXPECT_GE(*crash.time_to_balance, o.lease.failover_time - o.lease.effective_renew_interval());
    EXPECT_LE(crash.assignment_passes, 3);
    EXPECT_LE(*leave.time_to_balance, 5s);
  }
}

// Workers that start further apart than settle_time: with settle_time raised to a second, ten
// workers started over two seconds are still assigned in one pass, with no handoffs.
TEST(LeaderSimulationTest, AColdStartSpreadOverSecondsIsAssignedOnceWithALongerSettleTime) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    SimulationOptions o = options(10, 100, seed);
    o.start_spread = 2s;
    o.lease.settle_time = 1s;
    o.duration = 2min;
    auto report = run_lease_simulation(o);
    ASSERT_TRUE(report.ok()) << report.status();
    expect_safe_and_stable(*report);
    const auto& start = report->phases[0];
    SCOPED_TRACE(report->to_text());
    EXPECT_LE(start.assignment_passes, 3);
    EXPECT_EQ(start.handoffs, 0);
  }
}

TEST(LeaderSimulationTest, ReadsAndWritesDoNotGrowWithWorkersTimesShards) {
  SimulationOptions o = options(40, 2000, 11);
  o.duration = 10min;
  auto report = run_lease_simulation(o);
  ASSERT_TRUE(report.ok()) << report.status();
  std::printf("%s", report->to_text().c_str());
  expect_safe_and_stable(*report);
  ASSERT_GT(report->steady_duration, 5min);
  // Per worker: a read of two entries a second, a heartbeat every failover / 2; the leader:
  // the worker entries twice a second and the lease table every lease_scan_interval. Per
  // shard per minute that is (40 * 2 * 60 + 41 * 2 * 60 + 2000 * 2) / 2000 = 6.9 reads and
  // (40 * 12 + 12) / 2000 = 0.25 writes.
  EXPECT_LE(report->steady_items_read_per_shard_minute(), 10.0);
  EXPECT_LE(report->steady_writes_per_shard_minute(), 1.0);
  EXPECT_EQ(report->steady_stats.renews, 0) << "no per-lease renewals";
}

TEST(LeaderSimulationTest, AHotShardIsBalancedByLoadNotByCount) {
  SimulationOptions o = options(10, 100, 5);
  o.duration = 10min;
  o.shard_kbps.assign(100, 50.0);
  o.shard_kbps[0] = 500.0;  // ten times the others
  o.events = {{4min, Kind::kJoin, 1, 0ms}, {7min, Kind::kCrash, 1, 0ms}};
  auto report = run_lease_simulation(o);
  ASSERT_TRUE(report.ok()) << report.status();
  SCOPED_TRACE(report->to_text());
  EXPECT_EQ(report->invariant_violations, 0);
  for (const auto& phase : report->phases) {
    ASSERT_TRUE(phase.time_to_balance.has_value()) << phase.label << " never balanced by load";
    EXPECT_LE(phase.max_load_over_mean, 1.5) << phase.label;
    EXPECT_GE(phase.min_load_over_mean, 1 / 1.5) << phase.label;
    EXPECT_EQ(phase.moves_after_balance, 0) << phase.label << ": leases moved after balance";
  }
  EXPECT_GT(report->phases.back().max_held - report->phases.back().min_held, 1)
      << "by load, not by count: the hot shard's worker holds fewer leases";
}

}  // namespace
}  // namespace kcl::leases
