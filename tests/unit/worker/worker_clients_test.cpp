// WorkerClients on their own, with no service behind them: what the worker makes from its
// configuration (a Kinesis client on the configured wire, a DynamoDB client and lease store,
// no CloudWatch publisher when metrics are off, the endpoint only with http_address), and what
// it takes as given instead (worker_access.h). Making a client sends nothing; the wire is
// configured (kJson, kCbor), so no probe is sent either.
#include "worker/worker_clients.h"

#include <gtest/gtest.h>

#include <memory>

#include "leases/in_memory_lease_store.h"
#include "metrics/metrics_registry.h"
#include "support/captured_log.h"

namespace kcl::worker {
namespace {

WorkerConfig config(KinesisWire wire) {
  WorkerConfig c;
  c.stream_name = "orders";
  c.leases.application_name = "clients-test";
  c.leases.worker_id = "w1";
  c.aws.region = "us-east-1";
  c.aws.endpoint_url = "http://127.0.0.1:9";  // never called
  c.aws.credentials = StaticCredentials{"AKIDCLIENTS", "clients-secret", ""};
  c.aws.kinesis_wire = wire;
  return c;
}

TEST(WorkerClientsTest, MadeFromTheConfigurationOnTheConfiguredWire) {
  auto log = std::make_shared<testing::CapturedLog>();
  auto metrics = std::make_shared<metrics::MetricsRegistry>();
  for (const auto& [wire, want] : {std::pair{KinesisWire::kJson, kinesis::Wire::kJson},
                                   std::pair{KinesisWire::kCbor, kinesis::Wire::kCbor}}) {
    WorkerClients clients;
    ASSERT_TRUE(make_data_clients(config(wire), {}, metrics, log, clients).ok());
    ASSERT_TRUE(clients.kinesis && clients.dynamodb && clients.store);
    EXPECT_EQ(clients.kinesis->wire(), want);
    EXPECT_FALSE(clients.cloudwatch);
    EXPECT_FALSE(clients.fanout);
  }
  int said = 0;
  for (const auto& line : log->lines()) said += line.rfind("Kinesis data calls in ", 0) == 0;
  EXPECT_EQ(said, 2) << "the wire is said once for each worker";
}

TEST(WorkerClientsTest, GivenClientsAreTakenAsTheyAre) {
  WorkerInternals given;
  given.lease_store = std::make_shared<leases::InMemoryLeaseStore>();
  WorkerClients clients;
  ASSERT_TRUE(make_data_clients(config(KinesisWire::kJson), given, nullptr,
                                std::make_shared<testing::CapturedLog>(), clients)
                  .ok());
  EXPECT_EQ(clients.store, given.lease_store);
  EXPECT_FALSE(clients.dynamodb) << "no DynamoDB client beside a given lease store";
  EXPECT_TRUE(clients.kinesis);
}

TEST(WorkerClientsTest, MetricsOffMakeNoPublisher) {
  WorkerConfig c = config(KinesisWire::kJson);
  c.cloudwatch.mode = CloudWatchMetricsMode::kOff;
  WorkerClients clients;
  std::shared_ptr<MetricsSink> metrics = std::make_shared<metrics::MetricsRegistry>();
  const MetricsSink* before = metrics.get();
  ASSERT_TRUE(make_cloudwatch(c, nullptr, SystemClock::instance(), clients, &metrics).ok());
  EXPECT_FALSE(clients.cloudwatch);
  EXPECT_EQ(metrics.get(), before) << "the sink is not wrapped";
}

TEST(WorkerClientsTest, TheEndpointOnlyWithAnAddressAndEveryPointGoesThroughIt) {
  std::shared_ptr<MetricsSink> given = std::make_shared<metrics::MetricsRegistry>();
  std::shared_ptr<MetricsSink> metrics = given;
  EXPECT_FALSE(make_endpoint(config(KinesisWire::kJson), given, &metrics));
  EXPECT_EQ(metrics, given);

  WorkerConfig c = config(KinesisWire::kJson);
  c.http_address = "127.0.0.1:0";
  auto endpoint = make_endpoint(c, given, &metrics);
  ASSERT_TRUE(endpoint);
  EXPECT_EQ(metrics, endpoint->sink()) << "the endpoint's sink feeds its registry and `given`";
  metrics->count("leases.taken", 1, {});
  bool seen = false;
  for (const auto& s : endpoint->registry()->snapshot()) seen = seen || s.value == 1;
  EXPECT_TRUE(seen);
  bool passed_on = false;
  for (const auto& s : static_cast<metrics::MetricsRegistry&>(*given).snapshot()) {
    passed_on = passed_on || s.value == 1;
  }
  EXPECT_TRUE(passed_on) << "the given sink keeps receiving every point";
}

}  // namespace
}  // namespace kcl::worker
