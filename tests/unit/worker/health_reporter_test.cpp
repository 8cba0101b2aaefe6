// HealthReporter and worker_health() on a manual clock: when a stall begins, lasts and ends
// (logs, the shard.stalled gauge, the stalled list the pages read), a lease no live worker
// holds, a worker that judges no stalls, the leader gauge, and /healthz and /readyz's
// answers from the worker's state.
#include "worker/health_reporter.h"

#include <gtest/gtest.h>

#include <string>

#include "metrics/metrics_registry.h"
#include "support/captured_log.h"

namespace kcl::worker {
namespace {

using namespace std::chrono_literals;

class HealthReporterTest : public ::testing::Test {
 protected:
  HealthReporter make(std::chrono::milliseconds threshold) {
    return HealthReporter(
        threshold, registry_, clock_,
        [this](LogLevel level, const std::string& message) { log_.log(level, "test", message); });
  }
  // The value of the gauge `family` whose labels include `label`=`value`; -1 when absent.
  double gauge(const std::string& family, const std::string& label = "",
               const std::string& value = "") const {
    for (const auto& s : registry_.snapshot()) {
      if (s.family != family) continue;
      if (label.empty()) return s.value;
      for (const auto& [k, v] : s.labels) {
        if (k == label && v == value) return s.value;
      }
    }
    return -1;
  }
  int lines_with(const std::string& text) const {
    int n = 0;
    for (const auto& line : log_.lines()) n += line.find(text) != std::string::npos;
    return n;
  }
  static std::map<std::string, std::optional<lifecycle::StallSignal>> throttled(
      Clock::MonoTime since) {
    return {{"shardId-0", lifecycle::StallSignal{lifecycle::kStallThrottled, "GetRecords", since}},
            {"shardId-1", std::nullopt}};
  }

  ManualClock clock_;
  metrics::MetricsRegistry registry_;
  testing::CapturedLog log_;
};

TEST_F(HealthReporterTest, AStallBeginsLastsAndEnds) {
  HealthReporter h = make(10s);
  ASSERT_TRUE(h.judges_stalls());
  const Clock::MonoTime since = clock_.now();
  h.look(throttled(since), {});
  EXPECT_TRUE(h.stalled_shards().empty()) << "not before the threshold";
  clock_.advance(11s);
  h.look(throttled(since), {});
  const auto stalled = h.stalled_shards();
  ASSERT_EQ(stalled.size(), 1u);
  EXPECT_EQ(stalled[0].shard, "shardId-0");
  EXPECT_EQ(stalled[0].cause, lifecycle::kStallThrottled);
  EXPECT_EQ(gauge("kcl_shard_stalled", "shard", "shardId-0"), 1);
  EXPECT_EQ(gauge("kcl_shards_stalled"), 1);
  EXPECT_EQ(lines_with("shard shardId-0 stalled (throttled)"), 1);
  for (int i = 0; i < 5; ++i) {
    clock_.advance(1s);
    h.look(throttled(since), {});
  }
  EXPECT_EQ(lines_with("still stalled"), 1) << "repeats reported at the 3rd look only";
  h.look({{"shardId-0", std::nullopt}}, {});
  EXPECT_TRUE(h.stalled_shards().empty());
  EXPECT_EQ(gauge("kcl_shard_stalled", "shard", "shardId-0"), 0);
  EXPECT_EQ(lines_with("no longer stalled"), 1);
}

TEST_F(HealthReporterTest, ALeaseNoLiveWorkerHoldsIsAStallUnlessReadHere) {
  HealthReporter h = make(1s);
  const Clock::MonoTime since = clock_.now();
  clock_.advance(5s);
  h.look({{"shardId-1", std::nullopt}}, {{"shardId-7", "w9", since}, {"shardId-1", "w9", since}});
  const auto stalled = h.stalled_shards();
  ASSERT_EQ(stalled.size(), 1u);
  EXPECT_EQ(stalled[0].shard, "shardId-7");
  EXPECT_EQ(stalled[0].cause, lifecycle::kStallNoLiveOwner);
  EXPECT_NE(stalled[0].detail.find("w9"), std::string::npos);
}

TEST_F(HealthReporterTest, WithoutAThresholdNothingIsJudged) {
  HealthReporter h = make(0ms);
  EXPECT_FALSE(h.judges_stalls());
  clock_.advance(1h);
  h.look(throttled(Clock::MonoTime{}), {});
  EXPECT_TRUE(h.stalled_shards().empty());
  EXPECT_EQ(gauge("kcl_shards_stalled"), -1);
}

TEST_F(HealthReporterTest, TheLeaderGaugeOnlyWithALeader) {
  HealthReporter h = make(0ms);
  assignment::AssignmentReport r;
  h.report_leading(r);
  EXPECT_EQ(gauge("kcl_leader_is_leader"), -1);
  r.leading = true;
  h.report_leading(r);
  EXPECT_EQ(gauge("kcl_leader_is_leader"), 1);
  r.leading = false;
  h.report_leading(r);
  EXPECT_EQ(gauge("kcl_leader_is_leader"), 0);
}

TEST_F(HealthReporterTest, HealthFromTheWorkersState) {
  WorkerState starting;
  auto h = worker_health(starting, {}, clock_.now());
  EXPECT_TRUE(h.live);
  EXPECT_FALSE(h.ready);
  EXPECT_NE(h.ready_reason.find("starting"), std::string::npos);

  WorkerState running;
  running.ready = true;
  running.report = [&] {
    assignment::AssignmentReport r;
    r.failing.push_back({"membership heartbeat", 7, clock_.now() - 3200ms,
                         Status(StatusCode::kUnavailable, "HTTP 500")});
    return r;
  };
  h = worker_health(running, {{"shardId-0", "throttled", "GetRecords", 0}}, clock_.now());
  EXPECT_TRUE(h.live && h.ready);
  ASSERT_EQ(h.warnings.size(), 1u);
  EXPECT_NE(h.warnings[0].find("membership heartbeat failing for 3.2 s, 7 times in a row"),
            std::string::npos)
      << h.warnings[0];
  ASSERT_EQ(h.stalled.size(), 1u);

  WorkerState failed;
  failed.ended = Status(StatusCode::kNotFound, "stream orders was deleted");
  h = worker_health(failed, {}, clock_.now());
  EXPECT_FALSE(h.live);
  EXPECT_FALSE(h.ready);
  EXPECT_NE(h.ready_reason.find("the worker failed"), std::string::npos);

  WorkerState stopped;
  stopped.ended = Status::Ok();
  h = worker_health(stopped, {}, clock_.now());
  EXPECT_TRUE(h.live);
  EXPECT_EQ(h.ready_reason, "the worker has stopped");
}

}  // namespace
}  // namespace kcl::worker
