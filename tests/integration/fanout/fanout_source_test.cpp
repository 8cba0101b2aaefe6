// The fan-out records source against a scripted SubscribeToShard server (fanout_server.js, on
// Node's built-in http2 module, h2c on 127.0.0.1) for what kinesis-local never does: the end
// of a subscription's lifetime, shard end with ChildShards, exceptions inside the stream, a
// corrupt CRC, an event whose JSON breaks after whole records, a stream reset mid-message,
// ResourceInUse, ResourceNotFound, a slow reader (HTTP/2 flow control) and many shards over
// one connection. In each: no record lost, none delivered twice, resubscriptions after the
// last continuation.
#include "retrieval/fanout_source.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "aws/aws_json_client.h"
#include "aws/streaming_transport.h"
#include "kinesis/kinesis_client.h"
#include "support/aws_clients.h"
#include "support/child_process.h"
#include "support/emulators.h"

namespace kcl::retrieval {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const char* kShardId = "shardId-000000000000";
const char* kConsumerArn =
    "arn:aws:kinesis:us-east-1:123456789012:stream/s/consumer/test-consumer:1700000000";

// Sequence number i as the server makes them.
std::string seq(int i) {
  std::string digits = std::to_string(1000000 + i);
  return "4959033827149025660855969253836157109592157598913" + std::string(7 - digits.size(), '0') +
         digits;
}

json event(std::vector<int> records, std::optional<int> continuation, json child_shards = nullptr) {
  json rs = json::array();
  for (int i : records) rs.push_back({{"seq", seq(i)}, {"data", "r" + std::to_string(i)}});
  json e = {{"records", rs}};
  e["continuation"] = continuation ? json(seq(*continuation)) : json(nullptr);
  if (!child_shards.is_null()) e["childShards"] = child_shards;
  return {{"event", e}};
}

// Counts points by name and tags ("fanout.resubscribes cause=lifetime shard=...").
class RecordingSink final : public MetricsSink {
 public:
  void count(std::string_view name, double value, MetricTags tags) override {
    std::string key(name);
    for (const MetricTag& t : tags) {
      if (t.key != "shard") key += " " + std::string(t.key) + "=" + std::string(t.value);
    }
    std::lock_guard<std::mutex> lock(mu_);
    counts_[key] += value;
  }
  void gauge(std::string_view, double, MetricTags) override {}
  void timing(std::string_view, std::chrono::nanoseconds, MetricTags) override {}
  double get(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_[key];
  }

 private:
  std::mutex mu_;
  std::map<std::string, double> counts_;
};

// A self-signed certificate for 127.0.0.1 (openssl), made once per test binary.
struct TestCertificate {
  std::string key, cert;
  bool ok = false;
};
const TestCertificate& certificate() {
  static const TestCertificate c = [] {
    TestCertificate t;
    const std::string base = ::testing::TempDir() + "/fanout-tls-" + std::to_string(::getpid());
    t.key = base + ".key";
    t.cert = base + ".pem";
    const std::string cmd =
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
        "-addext subjectAltName=IP:127.0.0.1 -keyout " +
        t.key + " -out " + t.cert + " >/dev/null 2>&1";
    t.ok = std::system(cmd.c_str()) == 0;
    return t;
  }();
  return c;
}

class FanOutSourceTest : public ::testing::Test {
 protected:
  // Starts the server playing `subscriptions` (one list of actions per subscription).
  // `tls`: HTTP/2 over TLS with ALPN (as AWS), verified against the test's certificate;
  // else h2c (plain HTTP/2 with prior knowledge).
  // `describe`: what DescribeStreamSummary answers (fanout_server.js), null for the default.
  void serve(json subscriptions, bool tls = true, json describe = nullptr,
             json list_shards = nullptr, long long clock_ahead_ms = 0) {
    // unique_name: the pid alone repeats (pids wrap at 32,768), and the server appends to
    // its log, so a file left by an earlier process of the same pid would be read as ours.
    const std::string base = ::testing::TempDir() + "/" + kcl::testing::unique_name("fanout");
    log_ = base + ".log";
    json script{{"subscriptions", subscriptions}};
    if (!describe.is_null()) script["describeStreamSummary"] = describe;
    if (!list_shards.is_null()) script["listShards"] = list_shards;
    if (clock_ahead_ms != 0) script["clockAheadMs"] = clock_ahead_ms;
    std::ofstream(base + ".json") << script.dump();
    std::vector<std::string> args = {"--script", base + ".json", "--log", log_};
    if (tls) {
      ASSERT_TRUE(certificate().ok) << "openssl could not make a test certificate";
      args.insert(args.end(), {"--tls-key", certificate().key, "--tls-cert", certificate().cert});
    }
    auto started = testing::start_node_server(
        KCL_SOURCE_DIR "/tests/integration/fanout/fanout_server.js", args, base + ".out");
    ASSERT_TRUE(started.ok()) << started.status();
    url_ = tls ? "https://127.0.0.1:" + std::to_string(started->port) : started->url();
    server_ = std::move(started->process);
    AwsConfig aws;
    aws.region = "us-east-1";
    aws.kinesis_endpoint_url = url_;
    aws.credentials = StaticCredentials{"AKIDFANOUT", "fanout-secret", ""};
    aws.http.ca_bundle = certificate().cert;
    ctx_.kinesis = kcl::testing::kinesis_client(aws);
    ASSERT_TRUE(ctx_.kinesis);
    HttpConfig http;
    http.ca_bundle = certificate().cert;  // verification stays on
    ctx_.transport = std::make_shared<aws::StreamingTransport>(http);
    ctx_.consumer_arn = kConsumerArn;
  }

  RetrievalConfig retrieval() const {
    RetrievalConfig c;
    c.throttle_backoff_base = 10ms;
    c.throttle_backoff_max = 50ms;
    c.fanout_in_use_backoff = 300ms;
    return c;
  }

  std::shared_ptr<FanOutSource> source(StartPosition start = StartPosition::trim_horizon(),
                                       RetrievalConfig c = {},
                                       const std::string& shard = kShardId) {
    if (c.throttle_backoff_base == RetrievalConfig{}.throttle_backoff_base) c = retrieval();
    auto s = std::make_shared<FanOutSource>(ctx_, shard, start, c, SystemClock::instance(), 7);
    return s;
  }

  // Steps the source and takes its batches until `done` holds (or 60 s pass).
  bool drive(FanOutSource& s, const std::function<bool()>& done, bool take = true) {
    const auto until = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < until) {
      s.fetch_step();
      while (take) {
        auto b = s.take_batch();
        if (!b) break;
        for (auto& r : b->records) data_.emplace_back(r.data());
        if (b->shard_end) {
          ended_ = true;
          children_ = b->child_shards.size();
        }
      }
      if (done()) return true;
      std::this_thread::sleep_for(5ms);
    }
    return done();
  }

  std::vector<json> log_lines(const std::string& key) const {
    std::vector<json> out;
    for (const std::string& l : testing::finished_lines(log_)) {
      json j = json::parse(l, nullptr, false);
      if (j.is_object() && j.contains(key)) out.push_back(j);
    }
    return out;
  }

  static std::vector<std::string> names(std::vector<int> ids) {
    std::vector<std::string> out;
    for (int i : ids) out.push_back("r" + std::to_string(i));
    return out;
  }

  std::unique_ptr<testing::ChildProcess> server_;
  std::string log_, url_;
  FanOutContext ctx_;
  std::vector<std::string> data_;
  bool ended_ = false;
  std::size_t children_ = 0;
};

TEST_F(FanOutSourceTest, ResubscribesAfterTheLastContinuationWhenASubscriptionEnds) {
  serve(json::array(
      {json::array({{{"initial", true}}, event({0, 1}, 1), event({2}, 2), {{"end", true}}}),
       json::array({event({3}, 3), {{"hold", true}}})}));
  auto metrics = std::make_shared<RecordingSink>();
  ctx_.metrics = metrics;
  auto s = source();
  ASSERT_TRUE(drive(*s, [&] { return data_.size() >= 4; }));
  EXPECT_EQ(data_, names({0, 1, 2, 3}));
  EXPECT_EQ(metrics->get("fanout.subscriptions"), 2);
  EXPECT_EQ(metrics->get("fanout.resubscribes cause=lifetime"), 1);
  const auto subs = log_lines("subscription");
  ASSERT_EQ(subs.size(), 2u);
  EXPECT_EQ(subs[0]["position"]["Type"], "TRIM_HORIZON");
  EXPECT_EQ(subs[0]["consumer"], kConsumerArn);
  EXPECT_EQ(subs[0]["shard"], kShardId);
  EXPECT_TRUE(subs[0]["signed"].get<bool>());
  EXPECT_EQ(subs[1]["position"]["Type"], "AFTER_SEQUENCE_NUMBER");
  EXPECT_EQ(subs[1]["position"]["SequenceNumber"], seq(2));
  EXPECT_EQ(s->subscriptions(), 2u);
  EXPECT_FALSE(s->finished());
}

// Shards whose subscriptions began together end together (the 5-minute lifetime); each
// comes back after its own full-jitter wait, promptly (within fanout_resubscribe_jitter), so
// they do not all subscribe again in one burst. A ManualClock shows each wait exactly.
TEST_F(FanOutSourceTest, ANormalEndResubscribesPromptlyWithJitterThatDiffersAcrossShards) {
  serve(json::array({json::array({event({0}, 0), {{"end", true}}})}));
  ManualClock clock;
  const RetrievalConfig c = retrieval();
  ASSERT_EQ(c.fanout_resubscribe_jitter, 250ms) << "the default window";
  struct Shard {
    std::shared_ptr<RecordingSink> metrics = std::make_shared<RecordingSink>();
    std::shared_ptr<FanOutSource> source;
    std::optional<std::chrono::nanoseconds> delay;
  };
  std::vector<Shard> shards(8);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    ctx_.metrics = shards[i].metrics;  // one sink per shard: its resubscribe is its own
    shards[i].source = std::make_shared<FanOutSource>(
        ctx_, "shardId-00000000010" + std::to_string(i), StartPosition::trim_horizon(), c, clock,
        /*jitter_seed=*/1000 + i);
  }
  // Step every shard until its subscription's lifetime has ended; the step that saw the end
  // says when the shard subscribes again.
  const auto until = std::chrono::steady_clock::now() + 60s;
  auto all_ended = [&] {
    for (auto& sh : shards) {
      if (!sh.delay) return false;
    }
    return true;
  };
  while (!all_ended() && std::chrono::steady_clock::now() < until) {
    for (auto& sh : shards) {
      if (sh.delay) continue;
      const FetchStep step = sh.source->fetch_step();
      while (sh.source->take_batch()) {
      }
      if (sh.metrics->get("fanout.resubscribes cause=lifetime") == 1) {
        sh.delay = step.next_step_at - clock.now();
      }
    }
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(all_ended()) << "every shard saw its subscription end";
  std::set<long long> distinct;
  for (auto& sh : shards) {
    EXPECT_GE(*sh.delay, 0ns);
    EXPECT_LE(*sh.delay, c.fanout_resubscribe_jitter) << "prompt: within the jitter window";
    EXPECT_EQ(sh.source->subscriptions(), 1u) << "nobody subscribed again before its time";
    distinct.insert(sh.delay->count());
  }
  EXPECT_GT(distinct.size(), shards.size() / 2)
      << "the shards come back at different moments, not in one burst";
  // Once the window has passed, every shard has subscribed again after its continuation.
  clock.advance(c.fanout_resubscribe_jitter);
  for (auto& sh : shards) {
    ASSERT_TRUE(drive(*sh.source, [&] { return sh.source->subscriptions() == 2; }));
  }
  ASSERT_TRUE(testing::eventually(
      [&] { return log_lines("subscription").size() == 2 * shards.size(); }, 30s))
      << log_lines("subscription").size() << " subscriptions reached the server";
  const auto subs = log_lines("subscription");
  for (std::size_t i = shards.size(); i < subs.size(); ++i) {
    EXPECT_EQ(subs[i]["position"]["Type"], "AFTER_SEQUENCE_NUMBER");
    EXPECT_EQ(subs[i]["position"]["SequenceNumber"], seq(0));
  }
}

// An idle end (no event for fanout_idle_timeout) is a normal end as well: a prompt, jittered
// resubscribe, whose window doubles while the stream keeps going quiet.
TEST_F(FanOutSourceTest, IdleEndsResubscribeWithinAJitterWindowThatGrowsWhileQuiet) {
  serve(json::array({json::array({{{"hold", true}}})}));
  ManualClock clock;
  RetrievalConfig c = retrieval();
  c.fanout_idle_timeout = 1s;
  c.throttle_backoff_max = 2s;  // the cap of the growing window
  auto s = std::make_shared<FanOutSource>(ctx_, kShardId, StartPosition::trim_horizon(), c, clock,
                                          /*jitter_seed=*/42);
  std::vector<std::chrono::nanoseconds> delays;
  for (int round = 1; round <= 5; ++round) {
    ASSERT_TRUE(drive(*s, [&] { return s->subscriptions() == static_cast<std::uint64_t>(round); }));
    clock.advance(c.fanout_idle_timeout);
    const FetchStep step = s->fetch_step();
    ASSERT_EQ(step.outcome, FetchOutcome::kRetrying) << "round " << round;
    delays.push_back(step.next_step_at - clock.now());
    clock.advance(delays.back());
  }
  ASSERT_TRUE(drive(*s, [&] { return s->subscriptions() == 6; }));
  for (std::size_t k = 0; k < delays.size(); ++k) {
    const auto window = std::min<std::chrono::nanoseconds>(c.fanout_resubscribe_jitter * (1 << k),
                                                           c.throttle_backoff_max);
    EXPECT_GE(delays[k], 0ns) << k;
    EXPECT_LE(delays[k], window) << "idle end " << k + 1;
  }
  EXPECT_EQ(s->streams_lost(), 5u);
}

TEST_F(FanOutSourceTest, PlainHttp2WithPriorKnowledgeWorksForLocalEndpoints) {
  serve(json::array({json::array({event({0, 1}, 1), {{"end", true}}}),
                     json::array({event({2}, 2), {{"hold", true}}})}),
        /*tls=*/false);
  auto s = source();
  ASSERT_TRUE(drive(*s, [&] { return data_.size() >= 3; }));
  EXPECT_EQ(data_, names({0, 1, 2}));
}

// An event that arrives in many pieces (HTTP/2 frames of at most 16 KB carry a large one)
// wakes the source when it is whole, not at each piece.
TEST_F(FanOutSourceTest, AnEventArrivingInPiecesWakesTheSourceOnlyWhenWhole) {
  json pieces = {{"event", event({0, 1, 2}, 2)["event"]}, {"pieces", 8}, {"gapMs", 30}};
  serve(json::array(
      {json::array({{{"initial", true}}, {{"eventInPieces", pieces}}, {{"hold", true}}})}));
  auto wakes = std::make_shared<std::atomic<int>>(0);
  auto s = source();
  s->set_wakeup([wakes] { wakes->fetch_add(1); });
  ASSERT_TRUE(drive(*s, [&] { return data_.size() >= 3; }));
  EXPECT_EQ(data_, names({0, 1, 2}));
  // The initial response and the event: two whole messages, eight pieces of the event.
  EXPECT_LE(wakes->load(), 2);
  EXPECT_GE(wakes->load(), 1);
}

TEST_F(FanOutSourceTest, ShardEndHandsOverTheChildShards) {
  const json children =
      json::array({{{"ShardId", "shardId-000000000001"},
                    {"ParentShards", {kShardId}},
                    {"HashKeyRange", {{"StartingHashKey", "0"}, {"EndingHashKey", "100"}}}},
                   {{"ShardId", "shardId-000000000002"},
                    {"ParentShards", {kShardId}},
                    {"HashKeyRange", {{"StartingHashKey", "101"}, {"EndingHashKey", "200"}}}}});
  serve(json::array(
      {json::array({event({0}, 0), event({1}, std::nullopt, children), {{"hold", true}}})}));
  auto s = source();
  ASSERT_TRUE(drive(*s, [&] { return s->drained(); }));
  EXPECT_EQ(data_, names({0, 1}));
  EXPECT_TRUE(ended_);
  EXPECT_EQ(children_, 2u);
  EXPECT_TRUE(s->terminal_error().ok());
  EXPECT_EQ(log_lines("subscription").size(), 1u) << "nothing after the shard's end";
}

// An event with no ContinuationSequenceNumber and no ChildShards for a shard ListShards shows
// open: it was taken for the shard's end (SHARD_END on a shard still being written). Now the
// event is dropped and the subscription starts again after the last continuation; the shard's
// real end, which names its children, ends it.
TEST_F(FanOutSourceTest, AnEventEndingAnOpenShardWithoutChildrenIsNotItsEnd) {
  const json children =
      json::array({{{"ShardId", "shardId-000000000001"},
                    {"ParentShards", {kShardId}},
                    {"HashKeyRange", {{"StartingHashKey", "0"}, {"EndingHashKey", "200"}}}}});
  serve(json::array(
            {json::array({event({0}, 0), event({1}, std::nullopt), {{"hold", true}}}),
             json::array({event({1}, 1), event({2}, std::nullopt, children), {{"hold", true}}})}),
        true, nullptr, json{{"closed", false}});
  ctx_.stream = "s";
  auto s = source();
  ASSERT_TRUE(drive(*s, [&] { return s->drained(); }));
  EXPECT_EQ(data_, names({0, 1, 2})) << "the shard ended early, or a record came twice";
  EXPECT_TRUE(ended_);
  EXPECT_EQ(children_, 1u);
  EXPECT_EQ(log_lines("subscription").size(), 2u);
  EXPECT_EQ(log_lines("listShards").size(), 1u);
}

// The host's clock two hours behind AWS's (a VM resumed, an NTP step) on a worker whose only
// Kinesis calls are subscriptions (a follower reading with fan-out): SubscribeToShard is
// refused as "Signature expired", which ended the shard's source as an access error (and the
// restarts failed the same way). Now one JSON call through the same client measures the skew
// and the subscription is signed again with it.
TEST_F(FanOutSourceTest, ASubscriptionRefusedForTheClocksSkewIsSignedAgainWithItMeasured) {
  const json children =
      json::array({{{"ShardId", "shardId-000000000001"},
                    {"ParentShards", {kShardId}},
                    {"HashKeyRange", {{"StartingHashKey", "0"}, {"EndingHashKey", "200"}}}}});
  serve(json::array(
            {json::array({event({0}, 0), event({1}, std::nullopt, children), {{"hold", true}}})}),
        true, json{{"status", "ACTIVE"}}, nullptr, 2LL * 3600 * 1000);
  ctx_.stream = "s";
  auto s = source();
  ASSERT_TRUE(drive(*s, [&] { return s->drained(); }));
  EXPECT_TRUE(s->terminal_error().ok()) << s->terminal_error();
  EXPECT_EQ(data_, names({0, 1}));
  EXPECT_TRUE(ended_);
  EXPECT_EQ(log_lines("subscription").size(), 1u);
}

TEST_F(FanOutSourceTest, AnExceptionInsideTheStreamResubscribesWithoutLossOrRepeat) {
  serve(json::array(
      {json::array({event({0}, 0), {{"exception", "InternalFailure"}, {"message", "oops"}}}),
       json::array({event({1}, 1), {{"hold", true}}})}));
  auto s = source();
  ASSERT_TRUE(drive(*s, [&] { return data_.size() >= 2; }));
  EXPECT_EQ(data_, names({0, 1}));
  const auto subs = log_lines("subscription");
  ASSERT_GE(subs.size(), 2u);
  EXPECT_EQ(subs[1]["position"]["SequenceNumber"], seq(0));
}

TEST_F(FanOutSourceTest, ACorruptMessageEndsTheStreamAndNothingOfItIsDelivered) {
  serve(json::array({json::array({event({0}, 0), {{"corrupt", true}}, event({5}, 5)}),
                     json::array({event({1}, 1), {{"hold", true}}})}));
  auto s = source();
  ASSERT_TRUE(drive(*s, [&] { return data_.size() >= 2; }));
  EXPECT_EQ(data_, names({0, 1})) << "neither the corrupt event nor what followed it";
  EXPECT_GE(s->streams_lost(), 1u);
  EXPECT_EQ(log_lines("subscription")[1]["position"]["SequenceNumber"], seq(0));
  EXPECT_NE(s->last_retry_reason().find("the event stream is corrupt: "), std::string::npos)
      << "the cause is kept for the retry's reason: " << s->last_retry_reason();
}

// An event whose frame is sound but whose JSON turns out broken after whole records: the
// parser has handed those records over by then, and none of them may be delivered.
TEST_F(FanOutSourceTest, AnEventFoundBrokenAfterWholeRecordsDeliversNoneOfThem) {
  json broken = event({5, 6, 7}, 7);
  broken["event"]["records"][2]["noData"] = true;
  serve(json::array({json::array({event({0}, 0), broken, event({8}, 8)}),
                     json::array({event({1}, 1), {{"hold", true}}})}));
  auto s = source();
  ASSERT_TRUE(drive(*s, [&] { return data_.size() >= 2; }));
  EXPECT_EQ(data_, names({0, 1})) << "nothing of the broken event, nor of what followed it";
  EXPECT_GE(s->streams_lost(), 1u);
  EXPECT_EQ(log_lines("subscription")[1]["position"]["SequenceNumber"], seq(0));
  EXPECT_NE(s->last_retry_reason().find("an event could not be read: "), std::string::npos)
      << s->last_retry_reason();
}

TEST_F(FanOutSourceTest, AStreamResetMidMessageResubscribesAfterTheLastWholeEvent) {
  serve(json::array({json::array({event({0}, 0), {{"resetMidMessage", true}}}),
                     json::array({event({1}, 1), {{"hold", true}}})}));
  auto s = source();
  ASSERT_TRUE(drive(*s, [&] { return data_.size() >= 2; }));
  EXPECT_EQ(data_, names({0, 1}));
  EXPECT_GE(s->streams_lost(), 1u);
  EXPECT_NE(s->last_retry_reason().find("the event stream "), std::string::npos)
      << s->last_retry_reason();
}

TEST_F(FanOutSourceTest, ResourceInUseWaitsPastTheWindowBeforeSubscribingAgain) {
  serve(json::array(
      {json::array({{{"httpError",
                      {{"status", 400},
                       {"type", "ResourceInUseException"},
                       {"message", "Another active subscription exists for this consumer"}}}}}),
       json::array({event({0}, 0), {{"hold", true}}})}));
  auto s = source();
  ASSERT_TRUE(drive(*s, [&] { return !data_.empty(); }));
  EXPECT_EQ(data_, names({0}));
  EXPECT_EQ(s->in_use_rejections(), 1u);
  const auto subs = log_lines("subscription");
  ASSERT_EQ(subs.size(), 2u);
  EXPECT_GE(subs[1]["at"].get<long long>() - subs[0]["at"].get<long long>(), 300)
      << "fanout_in_use_backoff (300 ms here) is waited out";
}

TEST_F(FanOutSourceTest, ResourceNotFoundForTheShardEndsItCleanly) {
  serve(json::array({json::array(
      {event({0}, 0),
       {{"exception", "ResourceNotFoundException"},
        {"message", "Shard shardId-000000000000 in stream s under account 1 does not exist"}}})}));
  auto s = source();
  ASSERT_TRUE(drive(*s, [&] { return s->drained(); }));
  EXPECT_EQ(data_, names({0}));
  EXPECT_TRUE(ended_);
  EXPECT_EQ(children_, 0u);
  EXPECT_TRUE(s->terminal_error().ok());
}

// The stream deleted while a shard is read: its subscription ends with ResourceNotFound as a
// trimmed shard's does, and DescribeStreamSummary tells the two apart (as polling does): the
// source fails with kNotFound instead of ending the shard (its lease checkpointed at
// SHARD_END, a stream made again under the name would never be read).
TEST_F(FanOutSourceTest, ResourceNotFoundForADeletedStreamIsAnErrorNotTheShardsEnd) {
  for (const json& describe : {json{{"notFound", true}}, json{{"status", "DELETING"}}}) {
    SCOPED_TRACE(describe.dump());
    ended_ = false;
    serve(json::array({json::array({event({0}, 0),
                                    {{"exception", "ResourceNotFoundException"},
                                     {"message", "Stream s under account 1 not found."}}})}),
          true, describe);
    auto s = source();
    ASSERT_TRUE(drive(*s, [&] { return s->finished(); }));
    EXPECT_FALSE(ended_) << "the shard was taken for ended";
    EXPECT_EQ(s->terminal_error().code(), StatusCode::kNotFound) << s->terminal_error();
    EXPECT_NE(s->terminal_error().message().find("was deleted"), std::string::npos)
        << s->terminal_error();
    EXPECT_EQ(log_lines("describeStreamSummary").size(), 1u);
  }
}

// In the stream of a CBOR subscription AWS writes an exception's message in CBOR: the
// consumer's absence must still be told from the shard's.
TEST_F(FanOutSourceTest, AConsumerNotFoundInACborExceptionIsAnErrorNotTheShardsEnd) {
  serve(json::array({json::array(
      {event({0}, 0),
       {{"exception", "ResourceNotFoundException"},
        {"cbor", true},
        {"message", "Consumer arn:aws:kinesis:us-east-1:1:stream/s/consumer/c:1 not found."}}})}));
  auto s = source();
  ASSERT_TRUE(drive(*s, [&] { return s->finished(); }));
  EXPECT_FALSE(ended_) << "the shard was taken for ended";
  EXPECT_EQ(s->terminal_error().code(), StatusCode::kUnavailable) << s->terminal_error();
  EXPECT_NE(s->terminal_error().message().find("not found."), std::string::npos)
      << s->terminal_error();
}

TEST_F(FanOutSourceTest, ResourceNotFoundForTheConsumerIsAnError) {
  serve(json::array({json::array({{{"httpError",
                                    {{"status", 400},
                                     {"type", "ResourceNotFoundException"},
                                     {"message", "Consumer arn:... not found"}}}}})}));
  auto s = source();
  ASSERT_TRUE(drive(*s, [&] { return s->finished(); }));
  // Not kNotFound: that would stop a one-stream worker as if its stream were gone; the
  // shard's next source registers the consumer again.
  EXPECT_EQ(s->terminal_error().code(), StatusCode::kUnavailable) << s->terminal_error();
  EXPECT_NE(s->terminal_error().message().find("no longer exists"), std::string::npos)
      << s->terminal_error();
}

TEST_F(FanOutSourceTest, ACheckpointStartsAtItsSequenceNumberAndSkipsWhatWasCheckpointed) {
  serve(json::array({json::array({event({4, 5, 6}, 6), {{"hold", true}}})}));
  auto s = source(StartPosition::after_checkpoint(seq(4)));
  ASSERT_TRUE(drive(*s, [&] { return data_.size() >= 2; }));
  EXPECT_EQ(data_, names({5, 6}));
  const auto subs = log_lines("subscription");
  EXPECT_EQ(subs[0]["position"]["Type"], "AT_SEQUENCE_NUMBER");
  EXPECT_EQ(subs[0]["position"]["SequenceNumber"], seq(4));
}

TEST_F(FanOutSourceTest, ASlowReaderPausesTheStreamAndMemoryStaysBounded) {
  // 2,000 events of 10 records of ~1 KB: 20 MB the server would push at once.
  serve(json::array({json::array(
      {{{"flood", {{"events", 2000}, {"records", 10}, {"bytes", 1000}}}}, {{"hold", true}}})}));
  RetrievalConfig c = retrieval();
  c.max_prefetch_bytes = 512 * 1024;
  c.max_prefetch_records = 100000;
  auto s = source(StartPosition::trim_horizon(), c);
  // Read without taking: the source stops at its bound, its inbox fills, the stream pauses,
  // and the server's writes wait for the window.
  ASSERT_TRUE(drive(
      *s, [&] { return !log_lines("flood").empty(); }, /*take=*/false));
  std::size_t most = 0;
  for (int i = 0; i < 50; ++i) {
    s->fetch_step();
    most = std::max(most, s->queued_bytes());
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_LE(most, c.max_prefetch_bytes + 16 * 1024) << "the queue stops at its bound";
  EXPECT_EQ(log_lines("flood")[0]["flood"], "paused");
  // Then everything, in order, once.
  ASSERT_TRUE(drive(*s, [&] { return data_.size() >= 20000; }));
  ASSERT_EQ(data_.size(), 20000u);
  for (int i = 0; i < 20000; ++i) {
    ASSERT_EQ(data_[static_cast<std::size_t>(i)].substr(1000), ":" + std::to_string(i));
  }
}

// Over TLS, as AWS: one shard's processor is slow (its stream is paused with a large backlog
// arriving) while another shard's events come every 50 ms. The slow one must not hold up the
// other (libcurl 7.88 stops reading a connection while one of its streams is paused with data
// waiting, so a paused stream must not share a connection).
TEST_F(FanOutSourceTest, APausedShardDoesNotHoldUpTheOthers) {
  json steady = json::array();
  for (int i = 0; i < 60; ++i) {
    steady.push_back(event({i}, i));
    steady.push_back({{"sleepMs", 50}});
  }
  steady.push_back({{"hold", true}});
  serve(json::array({json::array({{{"flood", {{"events", 4000}, {"records", 10}, {"bytes", 1000}}}},
                                  {{"hold", true}}}),
                     steady}));
  RetrievalConfig c = retrieval();
  c.max_prefetch_bytes = 512 * 1024;
  c.max_prefetch_records = 100000;
  c.fanout_idle_timeout = 60s;
  auto slow = source(StartPosition::trim_horizon(), c, "shardId-000000000100");
  ASSERT_TRUE(drive(
      *slow, [&] { return log_lines("subscription").size() == 1; }, /*take=*/false));
  auto quick = source(StartPosition::trim_horizon(), c, "shardId-000000000101");
  // The slow shard is stepped (its queue full, its stream paused) but never taken from.
  ASSERT_TRUE(drive(
      *quick,
      [&] {
        slow->fetch_step();
        return data_.size() >= 60;
      },
      /*take=*/true))
      << "the steady shard got " << data_.size() << " of 60 records while the other was paused";
  EXPECT_EQ(data_, [] {
    std::vector<std::string> want;
    for (int i = 0; i < 60; ++i) want.push_back("r" + std::to_string(i));
    return want;
  }());
}

// The connection goes silent after the first event (a dead host whose socket still looks
// alive): the idle end's new subscription must not go onto it, or it waits in the same
// silence at every try.
TEST_F(FanOutSourceTest, AfterASilentStreamTheNextSubscriptionTakesANewConnection) {
  serve(json::array({json::array({event({0}, 0), {{"silence", true}}}),
                     json::array({event({1}, 1), {{"hold", true}}})}));
  RetrievalConfig c = retrieval();
  c.fanout_idle_timeout = 1s;
  auto s = source(StartPosition::trim_horizon(), c);
  ASSERT_TRUE(drive(*s, [&] { return data_.size() >= 2; }))
      << "after the silence: " << ::testing::PrintToString(data_) << ", "
      << log_lines("silenced").size() << " subscriptions sent into it";
  EXPECT_EQ(data_, names({0, 1}));
  EXPECT_EQ(log_lines("session").size(), 2u) << "a second connection";
  EXPECT_EQ(log_lines("silenced").size(), 0u) << "nothing sent into the silent one";
  EXPECT_EQ(log_lines("subscription")[1]["position"]["SequenceNumber"], seq(0));
}

TEST_F(FanOutSourceTest, ManyShardsShareOneConnection) {
  serve(json::array({json::array({event({0}, 0), {{"hold", true}}})}));
  std::vector<std::shared_ptr<FanOutSource>> sources;
  for (int i = 0; i < 20; ++i) {
    sources.push_back(
        source(StartPosition::trim_horizon(), {}, "shardId-00000000000" + std::to_string(100 + i)));
  }
  std::size_t got = 0;
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (got < 20 && std::chrono::steady_clock::now() < until) {
    for (auto& s : sources) {
      s->fetch_step();
      while (auto b = s->take_batch()) got += b->records.size();
    }
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(got, 20u);
  EXPECT_EQ(log_lines("subscription").size(), 20u);
  EXPECT_EQ(log_lines("session").size(), 1u) << "one HTTP/2 connection for every shard";
  EXPECT_EQ(ctx_.transport->open_streams(), 20u);
  sources.clear();
  EXPECT_TRUE(testing::eventually([&] { return ctx_.transport->open_streams() == 0; }, 10s));
}

}  // namespace
}  // namespace kcl::retrieval
