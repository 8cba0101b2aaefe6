// PutMetricData publishing against a CloudWatch endpoint written for the test
// (put_metric_data_server.js, Node): every request's shape and SigV4 signature are checked
// by that server, independently of kcl-cpp's client. Covers batching to the API's limits, a
// 500 retried, a slow server that never slows the points, and the Java KCL's names and
// dimensions.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cloudwatch/cloudwatch_publisher.h"
#include "support/captured_log.h"
#include "support/child_process.h"
#include "support/emulators.h"
#include "support/eventually.h"
#include "support/local_http_server.h"

namespace kcl::cloudwatch {
namespace {

using namespace std::chrono_literals;

class PutMetricDataTest : public ::testing::Test {
 protected:
  // Starts the server with `extra` options; false when it did not come up.
  bool start_server(std::vector<std::string> extra = {}) {
    // Not the pid alone: pids repeat, and the server appends to its log.
    const std::string dir = ::testing::TempDir() + "/" + kcl::testing::unique_name("pmd");
    log_ = dir + ".log";
    std::vector<std::string> args = {"--log", log_, "--secret", "pmd-secret"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto started = testing::start_node_server(
        KCL_SOURCE_DIR "/tests/integration/cloudwatch/put_metric_data_server.js", args,
        dir + ".out");
    if (!started.ok()) {
      ADD_FAILURE() << started.status();
      return false;
    }
    url_ = started->url();
    server_ = std::move(started->process);
    return true;
  }

  std::unique_ptr<aws::AwsJsonClient> client(const std::string& secret = "pmd-secret") {
    AwsConfig aws;
    aws.region = "us-east-1";
    aws.cloudwatch_endpoint_url = url_;
    aws.credentials = StaticCredentials{"AKIDPMDTEST", secret, ""};
    aws.retry.max_attempts = 3;
    auto c = aws::make_aws_json_client(cloudwatch_service(), aws);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::unique_ptr<CloudWatchPublisher> publisher(std::size_t max_series = 10000,
                                                 const std::string& secret = "pmd-secret") {
    CloudWatchMetricsConfig config;
    config.mode = CloudWatchMetricsMode::kPutMetricData;
    config.max_series = max_series;
    config.buffer_time = 600s;  // the test publishes by hand
    config.worker_identifier_dimension = true;
    return std::make_unique<CloudWatchPublisher>(config, "orders-app", "worker-1", client(secret),
                                                 nullptr, SystemClock::instance());
  }

  std::vector<nlohmann::json> requests() const {
    std::vector<nlohmann::json> out;
    for (const std::string& l : testing::finished_lines(log_)) {
      out.push_back(nlohmann::json::parse(l));
    }
    return out;
  }

  std::unique_ptr<testing::ChildProcess> server_;
  std::string log_, url_;
};

TEST_F(PutMetricDataTest, BatchesToTheLimitsSignedAndWellFormedWithJavaNames) {
  ASSERT_TRUE(start_server());
  auto p = publisher();
  ASSERT_TRUE(p->start().ok());
  auto sink = p->sink();
  // 2,400 series: three calls of at most 1,000 datums.
  for (int s = 0; s < 2400; ++s) {
    const std::string shard = "shardId-" + std::to_string(s);
    const MetricTag tag{"shard", shard};
    sink->count("consumer.records_processed", 10, MetricTags(&tag, 1));
    sink->count("consumer.records_processed", 5, MetricTags(&tag, 1));
  }
  p->publish_now();
  const auto got = requests();
  ASSERT_EQ(got.size(), 3u);
  std::size_t datums = 0;
  double sum = 0;
  for (const auto& r : got) {
    EXPECT_EQ(r["status"], 200) << r.dump();
    EXPECT_TRUE(r["problems"].empty()) << r.dump();
    EXPECT_EQ(r["namespace"], "orders-app");
    EXPECT_LE(r["metrics"].size(), 1000u);
    for (const auto& m : r["metrics"]) {
      EXPECT_EQ(m["name"], "RecordsProcessed");
      EXPECT_EQ(m["unit"], "Count");
      EXPECT_EQ(m["dims"]["Operation"], "ProcessTask");
      EXPECT_EQ(m["dims"]["WorkerIdentifier"], "worker-1");
      EXPECT_TRUE(m["dims"].contains("ShardId"));
      EXPECT_EQ(m["count"], 2);
      sum += m["sum"].get<double>();
      ++datums;
    }
  }
  EXPECT_EQ(datums, 2400u);
  EXPECT_EQ(sum, 2400.0 * 15);
  const PublisherStats st = p->stats();
  EXPECT_EQ(st.calls, 3u);
  EXPECT_EQ(st.failed_calls, 0u);
  EXPECT_EQ(st.datums_published, 2400u);
}

TEST_F(PutMetricDataTest, AServerErrorIsRetried) {
  ASSERT_TRUE(start_server({"--fail-first", "1"}));
  auto p = publisher();
  ASSERT_TRUE(p->start().ok());
  p->sink()->gauge("leases.held", 3, {});
  p->publish_now();
  const auto got = requests();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0]["status"], 500);
  EXPECT_EQ(got[1]["status"], 200) << got[1].dump();
  EXPECT_EQ(got[1]["metrics"][0]["name"], "CurrentLeases");
  EXPECT_EQ(got[1]["metrics"][0]["dims"]["Operation"], "RenewAllLeases");
  EXPECT_EQ(p->stats().calls, 1u);
  EXPECT_EQ(p->stats().failed_calls, 0u);
}

TEST_F(PutMetricDataTest, FailuresAreCountedAndDropNothingButMetrics) {
  ASSERT_TRUE(start_server({"--fail-first", "100"}));
  auto p = publisher();
  ASSERT_TRUE(p->start().ok());
  p->sink()->count("leases.taken", 1, {});
  p->publish_now();
  EXPECT_EQ(p->stats().failed_calls, 1u);
  EXPECT_EQ(p->stats().calls, 0u);
  EXPECT_EQ(requests().size(), 3u) << "three attempts";
}

TEST_F(PutMetricDataTest, TheServerRejectsASignatureMadeWithAnotherSecret) {
  // The server's check is not vacuous: a request signed with another key is refused.
  ASSERT_TRUE(start_server());
  auto p = publisher(10000, "not-the-secret");
  ASSERT_TRUE(p->start().ok());
  p->sink()->count("leases.taken", 1, {});
  p->publish_now();
  const auto got = requests();
  ASSERT_EQ(got.size(), 1u) << "a 400 is not retried";
  EXPECT_EQ(got[0]["status"], 400);
  EXPECT_EQ(got[0]["problems"][0], "signature does not match");
  EXPECT_EQ(p->stats().failed_calls, 1u);
}

TEST_F(PutMetricDataTest, ASlowServerNeverSlowsThePoints) {
  ASSERT_TRUE(start_server({"--delay-ms", "5000"}));
  auto p = publisher();
  ASSERT_TRUE(p->start().ok());
  auto sink = p->sink();
  sink->count("leases.taken", 1, {});
  std::atomic<bool> published{false};
  std::thread publishing([&] {
    p->publish_now();
    published.store(true);
  });
  // The call is in flight (the server logged it and holds its answer).
  ASSERT_TRUE(testing::eventually([&] { return !requests().empty(); }, 30s));
  for (int i = 0; i < 100000; ++i) {
    const MetricTag tag{"shard", "shardId-1"};
    sink->count("consumer.records_processed", 1, MetricTags(&tag, 1));
  }
  EXPECT_FALSE(published.load()) << "100,000 points were recorded while the call was held";
  publishing.join();
  EXPECT_TRUE(published.load());
  // What came in meanwhile is published next time.
  auto lines_before = requests().size();
  p->publish_now();
  EXPECT_EQ(requests().size(), lines_before + 1);
}

// An endpoint that accepts and never answers: stop() took two minutes (the call in flight,
// 60 s of attempts of 30 s, then a final publication of as much), past Kubernetes' 30 s
// grace. Now the call in flight ends within min(buffer_time, 10 s) and the final publication
// makes one attempt within what is left of 5 s from stop(). The client keeps its defaults
// (5 attempts, 30 s per request, 60 s per call).
TEST(PutMetricDataStopTest, StopEndsPromptlyAgainstAnEndpointThatNeverAnswers) {
  testing::LocalHttpServer server([](const testing::ServedRequest&) {
    testing::CannedResponse r;
    r.delay = std::chrono::minutes(10);  // ends when the server stops
    return r;
  });
  AwsConfig aws;
  aws.region = "us-east-1";
  aws.cloudwatch_endpoint_url = server.url();
  aws.credentials = StaticCredentials{"AKIDPMDTEST", "pmd-secret", ""};
  auto client = aws::make_aws_json_client(cloudwatch_service(), aws);
  ASSERT_TRUE(client.ok()) << client.status();
  CloudWatchMetricsConfig config;
  config.mode = CloudWatchMetricsMode::kPutMetricData;
  config.buffer_time = 1s;
  auto log = std::make_shared<testing::CapturedLog>(LogLevel::kWarn);
  CloudWatchPublisher p(config, "orders-app", "worker-1", std::move(client).value(), log,
                        SystemClock::instance());
  ASSERT_TRUE(p.start().ok());
  p.sink()->count("leases.taken", 1, {});
  // The publisher's thread has a call in flight that the server holds.
  ASSERT_TRUE(testing::eventually([&] { return server.requests().size() == 1; }, 30s));
  p.sink()->count("leases.taken", 1, {});  // left for the final publication

  const auto began = std::chrono::steady_clock::now();
  p.stop();
  const auto took = std::chrono::steady_clock::now() - began;
  EXPECT_LT(took, 20s) << "stop() took "
                       << std::chrono::duration_cast<std::chrono::seconds>(took).count() << " s";
  // The call in flight made one attempt within its 1 s budget; the final publication one.
  EXPECT_LE(server.requests().size(), 2u);
  EXPECT_EQ(p.stats().calls, 0u);
  EXPECT_EQ(p.stats().failed_calls, 2u);
  EXPECT_FALSE(log->lines().empty()) << "the failures are logged";
}

}  // namespace
}  // namespace kcl::cloudwatch
