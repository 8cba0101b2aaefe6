// The producer's parts: KPL aggregates read back by kcl-cpp's deaggregator and within their
// size estimate, hash keys, and the per-shard token buckets driven by a ManualClock.
#include <gtest/gtest.h>

#include "kcl/producer.h"
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
