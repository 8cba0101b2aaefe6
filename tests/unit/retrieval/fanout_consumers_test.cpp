// The per-stream fan-out consumers of a worker reading several streams
// (retrieval/fanout_consumers.h), against a scripted Kinesis account: each stream gets a
// consumer of the one name registered on its own ARN; a multi-stream lease
// ("<account>:<stream>:<epoch>:<shard>") maps to its stream's consumer even where two streams
// have shards of the same id; ARNs are looked up once, a consumer still CREATING is asked
// about again, a consumer that went away is registered again, and a stream that does not
// exist ends its shards' sources with an error naming it.
#include "retrieval/fanout_consumers.h"

#include <gtest/gtest.h>

#include <future>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kcl/lease.h"
#include "leases/stream_identifier.h"
#include "metrics/metrics_registry.h"
#include "support/fake_json_client.h"
#include "support/stepping_clock.h"

namespace kcl::retrieval {
namespace {

using namespace std::chrono_literals;
using kinesis::fake::Call;
using kinesis::fake::FakeJsonClient;
using kinesis::fake::SteppingClock;

std::string stream_arn_of(const std::string& stream) {
  return "arn:aws:kinesis:us-east-1:123456789012:stream/" + stream;
}

// A Kinesis account with some streams: DescribeStreamSummary, DescribeStreamConsumer and
// RegisterStreamConsumer as AWS answers them. A consumer is registered in `register_status`
// and becomes ACTIVE at its `looks_until_active`-th describe.
struct FakeAccount {
  std::set<std::string> streams;
  std::string register_status = "ACTIVE";
  int looks_until_active = 0;
  struct Consumer {
    std::string arn;
    int looks = 0;
  };
  std::map<std::pair<std::string, std::string>, Consumer> consumers;  // (stream ARN, name)
  int generation = 0;  // makes each registration's ARN unique

  Result<std::string> answer(const Call& c) {
    const std::string op = c.operation;
    if (op == "DescribeStreamSummary") {
      const std::string name = c.body["StreamName"];
      if (!streams.count(name)) return error(StatusCode::kNotFound, op);
      return R"({"StreamDescriptionSummary":{"StreamName":")" + name + R"(","StreamARN":")" +
             stream_arn_of(name) +
             R"(","StreamStatus":"ACTIVE","StreamCreationTimestamp":1700000000,)"
             R"("OpenShardCount":2}})";
    }
    const auto key =
        std::make_pair(std::string(c.body["StreamARN"]), std::string(c.body["ConsumerName"]));
    if (op == "DescribeStreamConsumer") {
      auto it = consumers.find(key);
      if (it == consumers.end()) return error(StatusCode::kNotFound, op);
      ++it->second.looks;
      const bool active = register_status == "ACTIVE" || it->second.looks >= looks_until_active;
      return description("ConsumerDescription", key.second, it->second.arn,
                         active ? "ACTIVE" : register_status);
    }
    if (op == "RegisterStreamConsumer") {
      if (consumers.count(key)) return error(StatusCode::kAlreadyExists, op);
      Consumer& made = consumers[key];
      made.arn = key.first + "/consumer/" + key.second + ":" + std::to_string(++generation);
      return description("Consumer", key.second, made.arn, register_status);
    }
    return Status(StatusCode::kInternal, "fake account: unexpected " + op);
  }

  static std::string description(const char* member, const std::string& name,
                                 const std::string& arn, const std::string& status) {
    return std::string("{\"") + member + R"(":{"ConsumerName":")" + name + R"(","ConsumerARN":")" +
           arn + R"(","ConsumerStatus":")" + status + "\"}}";
  }
  static Status error(StatusCode code, const std::string& op) {
    return kinesis::fake::aws_error(
        code,
        code == StatusCode::kNotFound ? "ResourceNotFoundException" : "ResourceInUseException", op);
  }
};

class FanOutConsumersTest : public ::testing::Test {
 protected:
  FanOutConsumersTest() {
    account.streams = {"orders", "payments"};
    fake->handler = [this](const Call& c) { return account.answer(c); };
  }
  int calls(const std::string& op) const {
    int n = 0;
    for (const Call& c : fake->calls) n += c.operation == op;
    return n;
  }
  static Lease multi_stream_lease(const std::string& stream, std::int64_t epoch,
                                  const std::string& shard) {
    Lease l;
    l.lease_key = leases::multi_stream_lease_key(
        "123456789012:" + stream + ":" + std::to_string(epoch), shard);
    return l;
  }

  FakeAccount account;
  std::shared_ptr<FakeJsonClient> fake = std::make_shared<FakeJsonClient>();
  std::shared_ptr<kinesis::KinesisClient> client = std::make_shared<kinesis::KinesisClient>(fake);
  SteppingClock clock;
};

TEST_F(FanOutConsumersTest, EachStreamGetsAConsumerOfTheOneNameOnItsOwnArn) {
  FanOutConsumers consumers(client, "audit", clock);
  auto orders = consumers.consumer_arn("orders", 60s);
  auto payments = consumers.consumer_arn("payments", 60s);
  ASSERT_TRUE(orders.ok()) << orders.status();
  ASSERT_TRUE(payments.ok()) << payments.status();
  EXPECT_NE(*orders, *payments);
  EXPECT_EQ(orders->rfind(stream_arn_of("orders") + "/consumer/audit:", 0), 0u) << *orders;
  EXPECT_EQ(payments->rfind(stream_arn_of("payments") + "/consumer/audit:", 0), 0u) << *payments;
  // Registered once per stream, on that stream's ARN, under the one name.
  std::vector<std::pair<std::string, std::string>> registered;
  for (const Call& c : fake->calls) {
    if (c.operation == "RegisterStreamConsumer")
      registered.emplace_back(c.body["StreamARN"], c.body["ConsumerName"]);
  }
  EXPECT_EQ(registered,
            (std::vector<std::pair<std::string, std::string>>{
                {stream_arn_of("orders"), "audit"}, {stream_arn_of("payments"), "audit"}}));
  // Known now: no more calls.
  const std::size_t before = fake->calls.size();
  EXPECT_EQ(*consumers.consumer_arn("orders", 60s), *orders);
  EXPECT_EQ(*consumers.consumer_arn("payments", 0ms), *payments);
  EXPECT_EQ(fake->calls.size(), before);
  EXPECT_EQ(consumers.known(),
            (std::map<std::string, std::string>{{"orders", *orders}, {"payments", *payments}}));
}

// The mapping a worker's shard consumer makes: the lease's stream (from the multi-stream key)
// picks the consumer, so shardId-000000000000 of each stream subscribes through its own.
TEST_F(FanOutConsumersTest, MultiStreamLeaseKeysMapToTheirStreamsConsumer) {
  FanOutConsumers consumers(client, "audit", clock);
  const Lease a = multi_stream_lease("orders", 1700000000, "shardId-000000000000");
  const Lease b = multi_stream_lease("payments", 1700000001, "shardId-000000000000");
  EXPECT_EQ(a.lease_key, "123456789012:orders:1700000000:shardId-000000000000");
  ASSERT_EQ(leases::lease_shard_id(a), leases::lease_shard_id(b));
  auto arn_a = consumers.consumer_arn(leases::lease_stream_name(a), 60s);
  auto arn_b = consumers.consumer_arn(leases::lease_stream_name(b), 60s);
  ASSERT_TRUE(arn_a.ok() && arn_b.ok());
  EXPECT_NE(arn_a->find("stream/orders/consumer/audit"), std::string::npos) << *arn_a;
  EXPECT_NE(arn_b->find("stream/payments/consumer/audit"), std::string::npos) << *arn_b;
}

TEST_F(FanOutConsumersTest, AKnownStreamArnSavesTheDescribeStreamSummary) {
  FanOutConsumers consumers(client, "audit", clock, [](const std::string& stream) {
    return std::optional<std::string>(stream_arn_of(stream));
  });
  ASSERT_TRUE(consumers.consumer_arn("orders", 60s).ok());
  EXPECT_EQ(calls("DescribeStreamSummary"), 0);
  EXPECT_EQ(calls("RegisterStreamConsumer"), 1);
}

TEST_F(FanOutConsumersTest, AConsumerStillCreatingIsAskedAboutAgainWithoutRegisteringTwice) {
  account.register_status = "CREATING";
  account.looks_until_active = 2;
  FanOutConsumers consumers(client, "audit", clock);
  auto first = consumers.consumer_arn("orders", 0ms);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), StatusCode::kDeadlineExceeded) << first.status();
  EXPECT_NE(first.status().message().find("stream consumer audit of stream orders"),
            std::string::npos)
      << first.status();
  EXPECT_TRUE(consumers.known().empty());
  auto second = consumers.consumer_arn("orders", 0ms);
  ASSERT_FALSE(second.ok());  // one look: still CREATING
  auto third = consumers.consumer_arn("orders", 0ms);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(calls("RegisterStreamConsumer"), 1);
}

// At start: a group's consumers are all registered before any is waited for, so the waits
// for ACTIVE overlap; groups of at most `group` (AWS keeps 5 CREATING per account at once).
TEST_F(FanOutConsumersTest, PrepareRegistersAGroupBeforeWaitingForAnyOfIt) {
  account.streams = {"s1", "s2", "s3"};  // not "gone"
  account.register_status = "CREATING";
  account.looks_until_active = 1;
  FanOutConsumers consumers(client, "audit", clock);
  auto failed = consumers.prepare({"s1", "s2", "s3", "gone"}, 60s, 2);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed.at("gone").code(), StatusCode::kNotFound) << failed.at("gone");
  EXPECT_EQ(consumers.known().size(), 3u);
  // Registrations in stream order; s2's before s1 is first looked at again (its wait), s3's
  // (the next group) after.
  std::vector<std::string> order;
  for (const Call& c : fake->calls) {
    if (c.operation == "RegisterStreamConsumer") {
      const std::string arn = c.body["StreamARN"];
      order.push_back("register " + arn.substr(arn.rfind('/') + 1));
    }
  }
  EXPECT_EQ(order, (std::vector<std::string>{"register s1", "register s2", "register s3"}));
  std::size_t second_register = 0, first_wait = 0, third_register = 0;
  int registers = 0;
  for (std::size_t i = 0; i < fake->calls.size(); ++i) {
    const Call& c = fake->calls[i];
    if (c.operation == "RegisterStreamConsumer") {
      ++registers;
      if (registers == 2) second_register = i;
      if (registers == 3) third_register = i;
    }
    // The first look at a registered consumer (s1's wait).
    if (c.operation == "DescribeStreamConsumer" && first_wait == 0 && registers > 0 &&
        c.body["StreamARN"] == stream_arn_of("s1")) {
      first_wait = i;
    }
  }
  EXPECT_LT(second_register, first_wait) << "s2 registered before s1 is waited for";
  EXPECT_LT(first_wait, third_register) << "s3 is of the next group";
}

// A source looking up its stream's consumer on a pool thread is not held behind another
// shard's lookup (slow AWS calls and their retries): it hears kUnavailable at once and asks
// again after its backoff.
TEST_F(FanOutConsumersTest, ALookupThatWillNotWaitIsNotHeldBehindAnother) {
  FanOutConsumers consumers(client, "audit", clock);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> entered;
  fake->handler = [&, released](const Call& c) {
    if (c.operation == "DescribeStreamSummary" && c.body["StreamName"] == "orders") {
      entered.set_value();
      released.wait();
    }
    return account.answer(c);
  };
  auto slow = std::async(std::launch::async, [&] { return consumers.consumer_arn("orders", 0ms); });
  entered.get_future().wait();
  auto other =
      std::async(std::launch::async, [&] { return consumers.consumer_arn("payments", 0ms); });
  const bool answered = other.wait_for(2s) == std::future_status::ready;
  release.set_value();
  ASSERT_TRUE(answered) << "held behind the other lookup";
  const Result<std::string> told = other.get();
  EXPECT_EQ(told.status().code(), StatusCode::kUnavailable) << told.status();
  EXPECT_TRUE(slow.get().ok());
  EXPECT_TRUE(consumers.consumer_arn("payments", 0ms).ok()) << "asked again, it is found";
}

TEST_F(FanOutConsumersTest, AConsumerThatWentAwayIsRegisteredAgainAfterForget) {
  FanOutConsumers consumers(client, "audit", clock);
  const std::string old_arn = *consumers.consumer_arn("orders", 60s);
  account.consumers.clear();                              // deregistered behind the worker's back
  consumers.forget("orders", "arn:some-other-consumer");  // not the one known: kept
  EXPECT_EQ(*consumers.consumer_arn("orders", 60s), old_arn);
  consumers.forget("orders", old_arn);
  auto fresh = consumers.consumer_arn("orders", 60s);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_NE(*fresh, old_arn);
  EXPECT_EQ(calls("RegisterStreamConsumer"), 2);
}

TEST_F(FanOutConsumersTest, AStreamThatDoesNotExistIsNotFoundAndNamed) {
  FanOutConsumers consumers(client, "audit", clock);
  auto r = consumers.consumer_arn("gone", 60s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("stream gone does not exist"), std::string::npos)
      << r.status();
}

// The sources the worker makes: a shard of a stream that does not exist ends with an error
// naming the shard and the stream; one whose consumer is still being registered backs off
// and says why; the other stream's shard is unaffected.
TEST_F(FanOutConsumersTest, SourcesLookUpTheirStreamsConsumerAtTheFirstSubscription) {
  account.register_status = "CREATING";
  account.looks_until_active = 1000;
  auto consumers = std::make_shared<FanOutConsumers>(client, "audit", clock);
  FanOutContext shared;
  shared.kinesis = client;
  RetrievalConfig config;
  RecordsSourceFactory make = fanout_sources(shared, consumers, config, clock);

  auto gone = make("gone", "shardId-000000000001", StartPosition::trim_horizon());
  FetchStep step = gone->fetch_step();
  EXPECT_EQ(step.outcome, FetchOutcome::kFailed);
  EXPECT_TRUE(gone->finished());
  EXPECT_EQ(gone->terminal_error().code(), StatusCode::kNotFound);
  EXPECT_NE(gone->terminal_error().message().find("shard shardId-000000000001 of stream gone"),
            std::string::npos)
      << gone->terminal_error();

  auto creating = make("orders", "shardId-000000000001", StartPosition::trim_horizon());
  step = creating->fetch_step();
  EXPECT_EQ(step.outcome, FetchOutcome::kRetrying);
  EXPECT_FALSE(creating->finished());
  EXPECT_NE(creating->last_retry_reason().find("stream consumer audit of stream orders"),
            std::string::npos)
      << creating->last_retry_reason();
  EXPECT_EQ(calls("RegisterStreamConsumer"), 1);
}

// A worker reading several streams labels its fan-out metrics with the stream, since shards
// of one id in two streams would otherwise share a series; one stream keeps its labels.
TEST_F(FanOutConsumersTest, SeveralStreamsLabelTheFanOutMetricsWithTheStream) {
  account.register_status = "CREATING";
  account.looks_until_active = 1000;
  for (const bool several : {true, false}) {
    auto registry = std::make_shared<metrics::MetricsRegistry>();
    FanOutContext shared;
    shared.kinesis = client;
    shared.metrics = registry;
    shared.stream_label = several;
    RecordsSourceFactory make =
        fanout_sources(shared, std::make_shared<FanOutConsumers>(client, "audit", clock),
                       RetrievalConfig{}, clock);
    for (const char* stream : {"orders", "payments"}) {
      auto source = make(stream, "shardId-000000000000", StartPosition::trim_horizon());
      EXPECT_EQ(source->fetch_step().outcome, FetchOutcome::kRetrying);  // still CREATING
    }
    const std::string text = registry->prometheus_text();
    for (const char* stream : {"orders", "payments"}) {
      const std::string label = std::string("stream=\"") + stream + "\"";
      EXPECT_EQ(text.find(label) != std::string::npos, several) << label << "\n" << text;
    }
    EXPECT_NE(text.find("kcl_fanout_resubscribes_total"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace kcl::retrieval
