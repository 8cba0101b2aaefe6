// CloudWatchPublisher on the caller's thread (publish_now, no thread, no network): what it
// reports about points it could not keep.
#include "cloudwatch/cloudwatch_publisher.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "aws/aws_json_client.h"
#include "metrics/metrics_registry.h"
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

// A PutMetricData that fails (a role without cloudwatch:PutMetricData) is counted where it
// can be seen, besides CloudWatch itself: the sink given (the worker's /metrics).
TEST(CloudWatchPublisherTest, FailedCallsAreCountedInTheWorkersOwnMetricsToo) {
  CloudWatchMetricsConfig config;
  config.mode = CloudWatchMetricsMode::kPutMetricData;
  // A CloudWatch that refuses every call.
  class Refusing final : public aws::AwsJsonClient {
   public:
    Result<std::string> call(std::string_view, std::string, const aws::CallOptions&) override {
      return Status(StatusCode::kPermissionDenied, "AccessDenied: not authorized");
    }
    const std::string& endpoint() const override { return endpoint_; }
    const std::string& region() const override { return region_; }

   private:
    std::string endpoint_ = "http://127.0.0.1:1", region_ = "us-east-1";
  };
  auto client = std::make_unique<Refusing>();
  auto registry = std::make_shared<metrics::MetricsRegistry>();
  CloudWatchPublisher publisher(config, "app", "worker-1", std::move(client),
                                std::make_shared<testing::CapturedLog>(LogLevel::kWarn),
                                SystemClock::instance());
  publisher.report_failures_to(registry);
  record_shards(*publisher.sink(), 3);
  publisher.publish_now();
  EXPECT_EQ(publisher.stats().failed_calls, 1u);
  EXPECT_NE(registry->prometheus_text().find("cloudwatch_publish_failures"), std::string::npos)
      << registry->prometheus_text();
}

}  // namespace
}  // namespace kcl::cloudwatch
