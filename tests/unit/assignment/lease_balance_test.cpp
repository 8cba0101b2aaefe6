// Balance and stability of many workers taking leases themselves (LeaseAssignment::
// kWorkerTakes), through the deterministic simulation (every worker a LeaseTaker with
// its own clock offsets, over one in-memory table, on a fake clock). Leader-based assignment
// has its own in leader_simulation_test.cpp.
#include <gtest/gtest.h>

#include <chrono>

#include "simulation/lease_simulation.h"

namespace kcl::leases {
namespace {

using namespace std::chrono_literals;
using Kind = SimulationEvent::Kind;

SimulationOptions takes_options(int workers, int shards, std::uint64_t seed) {
  SimulationOptions o;
  o.workers = workers;
  o.shards = shards;
  o.seed = seed;
  o.lease.application_name = "balance-test";
  o.lease.assignment = LeaseAssignment::kWorkerTakes;
  return o;
}

// Every phase balances within `max_passes` take intervals, nothing moves after balance, and
// the safety invariant holds.
void expect_converges(const SimulationReport& report, double max_passes) {
  SCOPED_TRACE(report.to_text());
  EXPECT_EQ(report.invariant_violations, 0);
  EXPECT_EQ(report.bookkeeping_mismatches, 0);
  for (const auto& phase : report.phases) {
    ASSERT_TRUE(phase.time_to_balance.has_value()) << phase.label << " never balanced";
    EXPECT_LE(*phase.passes_to_balance(report.take_interval), max_passes) << phase.label;
    EXPECT_EQ(phase.moves_after_balance, 0) << phase.label << ": leases moved after balance";
    EXPECT_LE(phase.max_held - phase.min_held, 1) << phase.label;
  }
}

TEST(LeaseBalanceTest, ThreeWorkersTenShards) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    auto report = run_lease_simulation(takes_options(3, 10, seed));
    ASSERT_TRUE(report.ok()) << report.status();
    expect_converges(*report, 8);
    EXPECT_EQ(report->phases.back().max_held, 4);
    EXPECT_EQ(report->phases.back().min_held, 3);
  }
}

TEST(LeaseBalanceTest, TenWorkersHundredShards) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    auto report = run_lease_simulation(takes_options(10, 100, seed));
    ASSERT_TRUE(report.ok()) << report.status();
    expect_converges(*report, 8);
    EXPECT_EQ(report->phases.back().max_held, 10);
    EXPECT_EQ(report->phases.back().min_held, 10);
  }
}

TEST(LeaseBalanceTest, WorkersJoiningAndLeaving) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    SimulationOptions o = takes_options(10, 100, seed);
    o.duration = 60min;
    o.events = {
        {10min, Kind::kJoin, 3, 0ms},   // 13 workers
        {20min, Kind::kCrash, 2, 0ms},  // 11, two leave their leases to expire
        {30min, Kind::kLeave, 3, 0ms},  // 8, three hand back gracefully
        {40min, Kind::kJoin, 1, 0ms},   // 9
        {50min, Kind::kPause, 1, 60s},  // one stops for 60 s (its leases are taken)
    };
    auto report = run_lease_simulation(o);
    ASSERT_TRUE(report.ok()) << report.status();
    // Steals go one lease per pass per worker, so a join into a full table takes a few passes.
    expect_converges(*report, 30);
    ASSERT_EQ(report->phases.size(), 7u);  // start, 5 events, resume
  }
}

TEST(LeaseBalanceTest, FewerShardsThanWorkers) {
  auto report = run_lease_simulation(takes_options(12, 5, 3));
  ASSERT_TRUE(report.ok()) << report.status();
  expect_converges(*report, 6);
  EXPECT_EQ(report->phases.back().max_held, 1);
  EXPECT_EQ(report->phases.back().min_held, 0);
}

TEST(LeaseBalanceTest, GracefulLeaveIsTakenOverFasterThanACrash) {
  SimulationOptions leave = takes_options(4, 40, 9);
  leave.duration = 20min;
  leave.events = {{10min, Kind::kLeave, 1, 0ms}};
  SimulationOptions crash = leave;
  crash.events = {{10min, Kind::kCrash, 1, 0ms}};
  auto l = run_lease_simulation(leave);
  auto c = run_lease_simulation(crash);
  ASSERT_TRUE(l.ok() && c.ok());
  ASSERT_EQ(l->phases.size(), 2u);
  ASSERT_EQ(c->phases.size(), 2u);
  // Hand-back: the free leases are taken on the survivors' next passes (the first of them may
  // take up to the rounded-up share, 14/14/12, and one corrective steal follows). Crash: only
  // after the failover time.
  EXPECT_LE(*l->phases[1].time_to_balance, 2 * l->take_interval + 5s) << l->to_text();
  EXPECT_GE(*c->phases[1].time_to_balance, c->failover_time) << c->to_text();
  EXPECT_EQ(c->phases[1].takes_of_expired, 10);
  EXPECT_EQ(l->phases[1].takes_of_free, 10);
}

}  // namespace
}  // namespace kcl::leases
