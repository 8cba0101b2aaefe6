// The producer's parts: KPL aggregates read back by kcl-cpp's deaggregator and within their
// size estimate, hash keys, and the per-shard token buckets driven by a ManualClock.
#include <gtest/gtest.h>

#include <cmath>

#include "kcl/producer.h"
#include "producer/key_set.h"
#include "producer/kpl_aggregator.h"
#include "producer/shard_rate.h"
#include "retrieval/kpl_deaggregator.h"

namespace kcl::producer {
namespace {

using namespace std::chrono_literals;

TEST(KplAggregatorTest, DeaggregatesToTheSameRecordsAndSizeIsExact) {
  KplAggregator agg;
  std::vector<std::tuple<std::string, std::string, std::string>> in;
  for (int i = 0; i < 300; ++i) {
    std::string pk = "key-" + std::to_string(i % 13);
    std::string ehk = i % 4 == 0 ? std::to_string(i * 1000003) : "";
    std::string data(static_cast<std::size_t>(i % 200), static_cast<char>(i));
    const std::size_t predicted = agg.size_with(pk, ehk, data);
    agg.add(pk, ehk, data);
    EXPECT_EQ(agg.size(), predicted) << i;
    in.emplace_back(pk, ehk, data);
  }
  const std::size_t size = agg.size();
  kinesis::KinesisRecord r;
  r.sequence_number = "49590338271490256608559692538361571095921575989136588898";
  r.partition_key = "key-0";
  const std::string aggregate = agg.finish();
  r.data = aggregate;
  EXPECT_EQ(r.data.size(), size);
  EXPECT_EQ(agg.count(), 0u);
  std::vector<Record> out;
  auto result = retrieval::deaggregate(r, "shardId-000000000000", out);
  ASSERT_EQ(result.outcome, retrieval::DeaggregationOutcome::kDeaggregated) << result.reason;
  ASSERT_EQ(out.size(), in.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].partition_key(), std::get<0>(in[i]));
    EXPECT_EQ(out[i].explicit_hash_key(), std::get<1>(in[i]));
    EXPECT_EQ(out[i].data(), std::get<2>(in[i]));
    EXPECT_EQ(out[i].sub_sequence_number(), i);
  }
}

TEST(HashKeyTest, Md5OfThePartitionKeyAndDecimalRoundTrip) {
  // MD5("") = d41d8cd98f00b204e9800998ecf8427e.
  EXPECT_EQ(hash_key_to_string(partition_key_hash("")), "281949768489412648962353822266799178366");
  const std::string max = "340282366920938463463374607431768211455";
  ASSERT_TRUE(parse_hash_key(max).has_value());
  EXPECT_EQ(hash_key_to_string(*parse_hash_key(max)), max);
  EXPECT_FALSE(parse_hash_key("340282366920938463463374607431768211456").has_value());
  EXPECT_FALSE(parse_hash_key("").has_value());
  EXPECT_FALSE(parse_hash_key("12a").has_value());
  EXPECT_EQ(hash_key_to_string(*parse_hash_key("0")), "0");
}

TEST(ShardRateTest, LimitsShrinksOnThrottleAndRecovers) {
  ManualClock clock;
  ShardRate rate(1000, 1 << 20, clock.now());
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(rate.take(1, 100, clock.now())) << i;
  EXPECT_FALSE(rate.take(1, 100, clock.now()));
  EXPECT_EQ(rate.ready_at(1, 100, clock.now()), clock.now() + 1ms);
  clock.advance(100ms);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(rate.take(1, 100, clock.now())) << i;
  EXPECT_FALSE(rate.take(1, 100, clock.now()));

  rate.on_throttled(clock.now());
  EXPECT_DOUBLE_EQ(rate.records_rate(), 500);
  for (int i = 0; i < 5; ++i) rate.on_throttled(clock.now());
  EXPECT_DOUBLE_EQ(rate.records_rate(), 100);  // floor: a tenth
  clock.advance(3s);
  (void)rate.take(0, 0, clock.now());
  EXPECT_DOUBLE_EQ(rate.records_rate(), 400);
  clock.advance(10s);
  (void)rate.take(0, 0, clock.now());
  EXPECT_DOUBLE_EQ(rate.records_rate(), 1000);
  // A record bigger than a bucket passes once the bucket is full.
  ShardRate small(0, 1000, clock.now());
  EXPECT_TRUE(small.take(1, 5000, clock.now()));
  EXPECT_FALSE(small.take(1, 1, clock.now()));
}

TEST(KplAggregatorTest, AddWithinStopsAtTheLimitAndKeysRepeatFromTheirTable) {
  KplAggregator agg;
  // Many distinct keys (the table index grows) and repeats of earlier ones.
  for (int i = 0; i < 2000; ++i) {
    const std::string pk = "key-" + std::to_string(i % 700);
    const std::string ehk = i % 5 == 0 ? std::to_string(i % 3) : "";
    const std::string data(20, static_cast<char>('a' + i % 26));
    const std::size_t limit = 20000;
    const std::size_t with = agg.size_with(pk, ehk, data);
    const std::size_t count = agg.count();
    EXPECT_EQ(agg.add_within(pk, ehk, data, limit), with <= limit) << i;
    EXPECT_EQ(agg.count(), count + (with <= limit ? 1 : 0));
    if (with > limit) break;
    EXPECT_EQ(agg.size(), with);
  }
  EXPECT_LE(agg.size(), 20000u);
  EXPECT_GT(agg.size(), 19900u);
  const std::size_t n = agg.count();
  kinesis::KinesisRecord r;
  r.sequence_number = "1";
  r.partition_key = "key-0";
  const std::string aggregate = agg.finish();
  r.data = aggregate;
  std::vector<Record> out;
  auto result = retrieval::deaggregate(r, "shardId-000000000000", out);
  ASSERT_EQ(result.outcome, retrieval::DeaggregationOutcome::kDeaggregated) << result.reason;
  ASSERT_EQ(out.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(out[i].partition_key(), "key-" + std::to_string(i % 700));
    EXPECT_EQ(out[i].explicit_hash_key(), i % 5 == 0 ? std::to_string(i % 3) : "");
  }
}

TEST(KeySetTest, HoldsWhatWasInsertedUntilClearedAndGrows) {
  KeySet keys;
  EXPECT_FALSE(keys.contains(0));
  for (std::uint64_t k = 0; k < 5000; ++k) keys.insert(k * 0x9E3779B97F4A7C15ull);
  EXPECT_EQ(keys.size(), 5000u);
  for (std::uint64_t k = 0; k < 5000; ++k) EXPECT_TRUE(keys.contains(k * 0x9E3779B97F4A7C15ull));
  EXPECT_FALSE(keys.contains(12345));
  keys.insert(42);
  keys.insert(42);
  EXPECT_EQ(keys.size(), 5001u);
  keys.clear();
  EXPECT_EQ(keys.size(), 0u);
  EXPECT_FALSE(keys.contains(42));
  EXPECT_FALSE(keys.contains(0x9E3779B97F4A7C15ull));
}

TEST(ShardRateTest, AvailableIsWhatTakeAllows) {
  ManualClock clock;
  ShardRate rate(100, 1000, clock.now());
  EXPECT_DOUBLE_EQ(rate.records_available(clock.now()), 100);
  EXPECT_TRUE(rate.take(40, 600, clock.now()));
  EXPECT_DOUBLE_EQ(rate.records_available(clock.now()), 60);
  EXPECT_DOUBLE_EQ(rate.bytes_available(clock.now()), 400);
  clock.advance(100ms);
  EXPECT_DOUBLE_EQ(rate.records_available(clock.now()), 70);
  ShardRate unlimited(0, 0, clock.now());
  EXPECT_TRUE(std::isinf(unlimited.records_available(clock.now())));
}

TEST(ProducerConfigTest, ValidateNamesEveryProblem) {
  ProducerConfig c;
  EXPECT_EQ(c.validate(), std::vector<std::string>{"stream_name is required"});
  c.stream_name = "s";
  c.max_attempts = 0;
  c.aggregation_max_bytes = 10;
  c.max_concurrent_requests = 0;
  EXPECT_EQ(c.validate().size(), 3u);
}

}  // namespace
}  // namespace kcl::producer
