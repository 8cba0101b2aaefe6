// LeaseLeader's settling across passes and terms, driven pass by pass on a ManualClock over
// in-memory stores: a membership change noted by a pass that ended early, and a new term.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "assignment/in_memory_coordination_store.h"
#include "assignment/lease_leader.h"
#include "unit/assignment/faulty_stores.h"
#include "unit/leases/lease_test_util.h"

namespace kcl::leases {
namespace {

using namespace ::kcl::assignment;
using namespace std::chrono_literals;
using testing::InjectedFault;

WorkerEntry worker(const std::string& id) {
  WorkerEntry w;
  w.worker_id = id;
  w.incarnation = id + "-1";
  return w;
}

// A leader that saw a worker join in a pass that ended early (its lease-table read failed)
// and then stopped leading has that join noted still. When it leads again, the new term
// starts unsettled as every new term does: the old note does not make it settled at once.
TEST(LeaseLeaderSettleTest, ANewTermStartsUnsettledWhateverAnEarlierTermLeftNoted) {
  ManualClock clock;
  InMemoryLeaseStore leases;
  testing::add_free_leases(leases, 4);
  testing::FaultyLeaseStore lease_view(leases);
  bool scans_fail = false;
  lease_view.faults().set_script([&](std::string_view op, std::string_view) {
    InjectedFault f;
    if (scans_fail && op == "list_leases") f.when = InjectedFault::When::kBefore;
    return f;
  });
  InMemoryCoordinationStore coordination;
  LeaseConfig config;
  config.application_name = "settle-test";
  config.worker_id = "a";
  config.assignment = LeaseAssignment::kLeader;
  config.lease_scan_interval = 100ms;  // every pass reads the lease table
  testing::RecordingMetrics metrics;
  LeaseLeader leader(lease_view, coordination, config, clock, metrics, nullptr);
  ASSERT_TRUE(coordination.register_worker(worker("a")).ok());
  ASSERT_TRUE(coordination.register_worker(worker("b")).ok());

  leader.begin(std::nullopt);
  for (int i = 0; i < 20 && leader.first_settling(); ++i) {
    ASSERT_TRUE(leader.run_pass().status.ok());
    clock.advance(50ms);
  }
  ASSERT_FALSE(leader.first_settling()) << "the first term never settled";

  scans_fail = true;
  ASSERT_TRUE(coordination.register_worker(worker("c")).ok());
  clock.advance(200ms);
  EXPECT_FALSE(leader.run_pass().status.ok()) << "the pass that sees c fails at the scan";
  leader.end();
  scans_fail = false;

  clock.advance(2s);  // well past settle_time, well within failover_time
  leader.begin(std::nullopt);
  ASSERT_TRUE(leader.run_pass().status.ok());
  EXPECT_TRUE(leader.first_settling()) << "a new term was settled at its first pass";
}

}  // namespace
}  // namespace kcl::leases
