// The JSON client's metric points: every attempt counted by service, operation and outcome
// (ok, throttled, error), every retry counted, GetRecords round trips timed.
#include <gtest/gtest.h>

#include "aws/aws_json_client.h"
#include "aws/retry.h"
#include "aws_test_util.h"
#include "metrics/metrics_registry.h"

namespace kcl::aws {
namespace {

using std::chrono::milliseconds;

double value_of(const metrics::MetricsRegistry& reg, const std::string& family,
                const metrics::Labels& labels) {
  for (const auto& s : reg.snapshot()) {
    if (s.family == family && s.labels == labels) {
      return s.kind == metrics::MetricKind::kHistogram ? static_cast<double>(s.count) : s.value;
    }
  }
  return 0;
}

TEST(AwsMetrics, AttemptsByOutcomeRetriesAndGetRecordsTimes) {
  AwsConfig config;
  config.region = "us-east-1";
  config.kinesis_endpoint_url = "https://kinesis.example.test";
  config.retry.max_attempts = 5;
  ManualClock clock;
  auto transport = std::make_shared<test::ScriptedTransport>();
  auto registry = std::make_shared<metrics::MetricsRegistry>();
  RetryHooks hooks;
  hooks.sleep = [&](milliseconds d) { clock.advance(d); };
  hooks.jitter_seed = 1;
  hooks.metrics = registry;
  auto client =
      make_aws_json_client(kinesis_service(), config, transport,
                           std::make_shared<test::FixedCredentials>(), clock, std::move(hooks));

  transport->push_response(
      400, R"({"__type":"ProvisionedThroughputExceededException","message":"slow down"})");
  transport->push_response(500, R"({"__type":"InternalFailure","message":"oops"})");
  transport->push_response(200, R"({"Records":[]})");
  ASSERT_TRUE(client->call("GetRecords", "{}").ok());
  transport->push_response(400, R"({"__type":"ValidationException","message":"bad"})");
  ASSERT_FALSE(client->call("ListShards", "{}").ok());

  auto req = [&](const char* op, const char* outcome) {
    return value_of(*registry, "kcl_aws_requests_total",
                    {{"operation", op}, {"outcome", outcome}, {"service", "Kinesis"}});
  };
  EXPECT_EQ(req("GetRecords", "throttled"), 1);
  EXPECT_EQ(req("GetRecords", "error"), 1);
  EXPECT_EQ(req("GetRecords", "ok"), 1);
  EXPECT_EQ(req("ListShards", "error"), 1);
  EXPECT_EQ(value_of(*registry, "kcl_aws_retries_total",
                     {{"operation", "GetRecords"}, {"service", "Kinesis"}}),
            2);
  EXPECT_EQ(value_of(*registry, "kcl_aws_retries_total",
                     {{"operation", "ListShards"}, {"service", "Kinesis"}}),
            0);
  EXPECT_EQ(value_of(*registry, "kcl_get_records_duration_seconds", {}), 3);
}

}  // namespace
}  // namespace kcl::aws
