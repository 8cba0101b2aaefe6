// The simulation itself, workers taking leases themselves (LeaseAssignment::kWorkerTakes): the
// small case runs here (the 200 x 10,000 case is bench_lease_simulation); its counts follow
// from the intervals.
#include "simulation/lease_simulation.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

namespace kcl::leases {
namespace {

using namespace std::chrono_literals;
using Kind = SimulationEvent::Kind;

TEST(LeaseSimulationTest, SmallCaseReport) {
  SimulationOptions o;
  o.workers = 10;
  o.shards = 100;
  o.duration = 30min;
  o.seed = 7;
  o.lease.application_name = "sim-test";
  o.lease.assignment = LeaseAssignment::kWorkerTakes;
  o.events = {
      {8min, Kind::kJoin, 2, 0ms},
      {14min, Kind::kCrash, 2, 0ms},
      {20min, Kind::kLeave, 1, 0ms},
      {24min, Kind::kPause, 1, 60s},
  };
  auto report = run_lease_simulation(o);
  ASSERT_TRUE(report.ok()) << report.status();
  std::printf("%s", report->to_text().c_str());
  EXPECT_EQ(report->invariant_violations, 0);
  EXPECT_EQ(report->bookkeeping_mismatches, 0);
  EXPECT_TRUE(report->all_phases_balanced()) << report->to_text();
  EXPECT_EQ(report->total_moves_after_balance(), 0);
  ASSERT_EQ(report->phases.size(), 6u);
  // Cold start with the ramp: balanced within about one take interval, nothing stolen.
  EXPECT_LE(*report->phases[0].time_to_balance, 30s);
  EXPECT_EQ(report->phases[0].steals, 0);
  // A crash: the leases go after the failover time, within failover + one take interval
  // (+ jitter) of it for the takes, then a few corrective steals at most.
  EXPECT_GE(*report->phases[2].time_to_balance, o.lease.failover_time - 4s);
  EXPECT_GE(report->phases[2].takes_of_expired, 16);  // two of 12 workers with 8 or 9 each
  EXPECT_LE(report->phases[2].takes_of_expired, 18);

  // Steady state: every lease renewed every failover/3 (18 writes per shard per minute), and
  // each worker reads every lease once per take interval (3 reads per worker per minute).
  ASSERT_GT(report->steady_duration, 60s);
  const auto& s = report->steady_stats;
  double writes = SimulationReport::per_shard_minute(s.writes, 100, report->steady_duration);
  double reads = SimulationReport::per_shard_minute(s.items_scanned, 100, report->steady_duration);
  EXPECT_NEAR(writes, 18.0, 0.5);
  const int running = report->phases.back().running_workers;
  EXPECT_NEAR(reads, 3.0 * running, 0.15 * 3.0 * running);
}

TEST(LeaseSimulationTest, JavaStyleColdStartWithoutTheRampNeedsManySteals) {
  SimulationOptions o;
  o.workers = 10;
  o.shards = 100;
  o.duration = 20min;
  o.seed = 3;
  o.lease.application_name = "sim-test";
  o.lease.assignment = LeaseAssignment::kWorkerTakes;
  o.lease.take_ramp_floor = 0;
  auto java = run_lease_simulation(o);
  o.lease.take_ramp_floor = 10;
  auto ramp = run_lease_simulation(o);
  ASSERT_TRUE(java.ok() && ramp.ok());
  std::printf("without ramp:\n%swith ramp:\n%s", java->to_text().c_str(), ramp->to_text().c_str());
  EXPECT_GT(java->phases[0].steals, 30);
  EXPECT_EQ(ramp->phases[0].steals, 0);
  EXPECT_LT(*ramp->phases[0].time_to_balance, *java->phases[0].time_to_balance);
}

TEST(LeaseSimulationTest, RejectsBadOptions) {
  SimulationOptions o;
  o.workers = 0;
  o.lease.application_name = "x";
  EXPECT_EQ(run_lease_simulation(o).status().code(), StatusCode::kInvalidArgument);
  o.workers = 2;
  o.lease.failover_time = 1ms;
  EXPECT_EQ(run_lease_simulation(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(LeaseSimulationTest, IsDeterministic) {
  SimulationOptions o;
  o.workers = 5;
  o.shards = 37;
  o.duration = 10min;
  o.seed = 11;
  o.lease.application_name = "sim-test";
  o.lease.assignment = LeaseAssignment::kWorkerTakes;
  o.events = {{3min, Kind::kCrash, 1, 0ms}};
  auto a = run_lease_simulation(o);
  auto b = run_lease_simulation(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->to_text(), b->to_text());
}

}  // namespace
}  // namespace kcl::leases
