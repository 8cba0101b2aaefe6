// CloudWatchPublisher on the caller's thread (publish_now, no thread, no network): what it
// reports about points it could not keep.
#include "cloudwatch/cloudwatch_publisher.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "support/captured_log.h"

namespace kcl::cloudwatch {
namespace {

// `n` points of distinct series (shards), so that past max_series some are dropped.
void record_shards(MetricsSink& sink, int n) {
  for (int i = 0; i < n; ++i) {
    const std::string shard = "shardId-" + std::to_string(i);
    const MetricTag tag{"shard", shard};
    sink.count("consumer.records_processed", 1, MetricTags(&tag, 1));
  }
}

// Points dropped past max_series were counted in stats() and never said: a WARN names the
// count dropped so far and max_series at the 1st, 3rd and 10th publication with drops.
TEST(CloudWatchPublisherTest, PointsDroppedPastMaxSeriesAreLoggedOncePerSeries) {
  CloudWatchMetricsConfig config;
  config.mode = CloudWatchMetricsMode::kEmf;  // not started: nothing is written
  config.max_series = 100;
  auto log = std::make_shared<testing::CapturedLog>(LogLevel::kWarn);
  CloudWatchPublisher publisher(config, "app", "worker-1", nullptr, log, SystemClock::instance());
  record_shards(*publisher.sink(), 100);
  publisher.publish_now();
  EXPECT_TRUE(log->lines().empty()) << "nothing dropped yet";

  for (int publication = 1; publication <= 12; ++publication) {
    record_shards(*publisher.sink(), 150);  // 50 dropped each time
    publisher.publish_now();
    record_shards(*publisher.sink(), 10);  // none dropped: not counted
    publisher.publish_now();
  }
  EXPECT_EQ(publisher.stats().dropped_points, 600u);
  const auto lines = log->lines();
  ASSERT_EQ(lines.size(), 3u) << "the 1st, 3rd and 10th publication with drops";
  EXPECT_NE(lines[0].find("50 metric points dropped so far"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("150 metric points dropped so far (3 publications"), std::string::npos)
      << lines[1];
  EXPECT_NE(lines[2].find("500 metric points dropped so far (10 publications"), std::string::npos)
      << lines[2];
  for (const std::string& l : lines) {
    EXPECT_NE(l.find("max_series (100)"), std::string::npos) << l;
  }
}

}  // namespace
}  // namespace kcl::cloudwatch
