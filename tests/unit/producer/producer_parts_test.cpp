// The producer's parts: KPL aggregates read back by kcl-cpp's deaggregator and within their
// size estimate, hash keys, and the per-shard token buckets driven by a ManualClock.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

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

TEST(ShardRateTest, TakesWithinTheBucketAndTheWindow) {
  ManualClock clock;
  ShardRate rate(1000, 1 << 20, clock.now());  // starts with a second's tokens
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(rate.take(1, 100, clock.now())) << i;
  EXPECT_FALSE(rate.take(1, 100, clock.now()));
  EXPECT_DOUBLE_EQ(rate.window_records(clock.now()), 1000);
  const auto taken = clock.now();
  clock.advance(100ms);
  // The bucket has 100 tokens again, but the 1,000 records in flight fill the window.
  EXPECT_FALSE(rate.take(1, 100, clock.now()));
  rate.on_answered(1000, 100000, 1000, 100000, taken, clock.now());
  EXPECT_FALSE(rate.take(1, 100, clock.now()));
  // The shard's first call: its records count until a second after its answer.
  EXPECT_EQ(rate.ready_at(1, 100, clock.now()), taken + 1100ms);
  clock.advance(999ms);
  EXPECT_FALSE(rate.take(1, 100, clock.now()));
  clock.advance(1ms);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(rate.take(1, 100, clock.now())) << i;
  EXPECT_FALSE(rate.take(1, 100, clock.now()));
  // A later call answered after the jitter (20 ms): a second after the jitter.
  const auto second = clock.now();
  clock.advance(100ms);
  rate.on_answered(1000, 100000, 1000, 100000, second, clock.now());
  EXPECT_EQ(rate.ready_at(1, 100, clock.now()), second + 1020ms);
  clock.advance(920ms);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(rate.take(1, 100, clock.now())) << i;
  // An answer within the jitter: a second after the answer.
  const auto again = clock.now();
  clock.advance(5ms);
  rate.on_answered(1000, 100000, 1000, 100000, again, clock.now());
  EXPECT_EQ(rate.ready_at(1, 100, clock.now()), again + 1005ms);
  // A record bigger than the limit passes once nothing else counts.
  ShardRate small(0, 1000, clock.now());
  EXPECT_TRUE(small.take(1, 5000, clock.now()));
  EXPECT_FALSE(small.take(1, 1, clock.now()));
}

TEST(ShardRateTest, StartsWithoutASecondsBurst) {
  ManualClock clock;
  ShardRate rate(1000, 1 << 20, clock.now(), /*start_seconds=*/0.1);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(rate.take(1, 100, clock.now())) << i;
  EXPECT_FALSE(rate.take(1, 100, clock.now()));
  EXPECT_EQ(rate.ready_at(1, 100, clock.now()), clock.now() + 1ms);
  clock.advance(50ms);
  EXPECT_DOUBLE_EQ(rate.records_available(clock.now()), 50);
}

TEST(ShardRateTest, RecordsTheAnswerRefusedLeaveTheWindowAtTheAnswer) {
  ManualClock clock;
  ShardRate rate(1000, 1 << 20, clock.now());
  const auto taken = clock.now();
  ASSERT_TRUE(rate.take(1000, 1000, clock.now()));
  clock.advance(20ms);
  // 400 of them throttled: not written, so not counted by the service.
  rate.on_answered(1000, 1000, 600, 600, taken, clock.now());
  const auto answered = clock.now();
  EXPECT_DOUBLE_EQ(rate.window_records(clock.now()), 600);
  clock.advance(400ms);
  ASSERT_TRUE(rate.take(400, 400, clock.now()));
  EXPECT_FALSE(rate.take(1, 1, clock.now()));
  // The 600 written leave at a second after their answer; the 400 in flight still count.
  EXPECT_EQ(rate.ready_at(1, 1, clock.now()), answered + 1s);
  clock.advance(600ms);
  EXPECT_DOUBLE_EQ(rate.window_records(clock.now()), 400);
  EXPECT_DOUBLE_EQ(rate.records_available(clock.now()), 600);
  // Only in-flight records in the way: their answer frees them (checked again in a second).
  ASSERT_TRUE(rate.take(600, 600, clock.now()));
  EXPECT_EQ(rate.ready_at(1, 1, clock.now()), clock.now() + 1s);
}

TEST(ShardRateTest, AThrottleFarBelowTheLimitCutsTheRateOncePerCallAndItRecovers) {
  // Nothing in the window: someone else writes to the shard.
  ManualClock clock;
  ShardRate rate(1000, 1 << 20, clock.now());
  const auto first_sent = clock.now();
  clock.advance(10ms);
  const auto second_sent = clock.now();
  clock.advance(40ms);
  EXPECT_TRUE(rate.on_throttled(first_sent, 10, 1000, clock.now()));
  EXPECT_DOUBLE_EQ(rate.records_rate(), 500);
  EXPECT_DOUBLE_EQ(rate.bytes_rate(), 512 * 1024);
  // A call sent before the cut says nothing about the cut rate.
  EXPECT_FALSE(rate.on_throttled(second_sent, 10, 1000, clock.now()));
  EXPECT_DOUBLE_EQ(rate.records_rate(), 500);
  // A call sent after it does.
  rate.on_throttled(clock.now(), 10, 1000, clock.now());
  EXPECT_DOUBLE_EQ(rate.records_rate(), 250);
  for (int i = 0; i < 5; ++i) rate.on_throttled(clock.now(), 10, 1000, clock.now());
  EXPECT_DOUBLE_EQ(rate.records_rate(), 100);  // floor: a tenth
  // A quarter of the configured rate back each second without a throttle.
  clock.advance(1s);
  EXPECT_DOUBLE_EQ(rate.records_available(clock.now()), 100);  // the bucket holds a second
  EXPECT_DOUBLE_EQ(rate.records_rate(), 350);
  clock.advance(2s);
  (void)rate.take(0, 0, clock.now());
  EXPECT_DOUBLE_EQ(rate.records_rate(), 850);
  clock.advance(1s);
  (void)rate.take(0, 0, clock.now());
  EXPECT_DOUBLE_EQ(rate.records_rate(), 1000);
}

TEST(ShardRateTest, AThrottleNearTheLimitWidensTheJitterWhichComesBack) {
  ManualClock clock;
  ShardRate rate(1000, 1 << 20, clock.now(), 1.0, 20ms);
  const auto taken = clock.now();
  ASSERT_TRUE(rate.take(950, 95000, clock.now()));
  clock.advance(30ms);
  // 50 of the 950 refused: the window held 900 and those 50, within a tenth of the limit.
  rate.on_answered(950, 95000, 900, 90000, taken, clock.now());
  EXPECT_FALSE(rate.on_throttled(taken, 50, 5000, clock.now()));
  EXPECT_EQ(rate.jitter(), 40ms);
  EXPECT_DOUBLE_EQ(rate.records_rate(), 1000);  // the pace is kept
  // Twice more (calls sent after the last change): 80, 160 ms (less the little that came
  // back in the millisecond between them).
  for (int i = 0; i < 2; ++i) {
    clock.advance(1ms);
    EXPECT_FALSE(rate.on_throttled(clock.now(), 50, 5000, clock.now()));
  }
  const auto us = [](auto d) {
    return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
  };
  EXPECT_NEAR(us(rate.jitter()), 160000, 50);
  // The excess over 20 ms halves in 10 s without a throttle: 20 + 140 / 2.
  clock.advance(10s);
  (void)rate.take(0, 0, clock.now());
  EXPECT_NEAR(us(rate.jitter()), 90000, 50);
  // Written records now count until a second after the send and the wider jitter.
  const auto later = clock.now();
  ASSERT_TRUE(rate.take(1000, 1000, clock.now()));
  clock.advance(500ms);
  rate.on_answered(1000, 1000, 1000, 1000, later, clock.now());
  const auto ready = rate.ready_at(1, 1, clock.now());
  EXPECT_GT(ready, later + 1089ms);
  EXPECT_LT(ready, later + 1091ms);
}

// A sender that keeps one call in flight on a shard, each taking what the shard allows (up to
// 150 Kinesis records). A call reaches the service `delay` ms after it is sent, a base of 2 ms
// plus up to `arrival_jitter` ms, and is answered 5 to 100 ms after that; the service counts
// its records when it arrives. Returns the arrival times (ms) and what each record weighs.
struct Simulated {
  std::vector<std::pair<std::int64_t, double>> arrivals;  // (ms, bytes) per record
  double records = 0;
};
Simulated simulate(double records_per_second, double bytes_per_second, double record_bytes,
                   int seconds, int arrival_jitter, std::chrono::milliseconds rate_jitter,
                   std::uint32_t seed) {
  ManualClock clock;
  ShardRate rate(records_per_second, bytes_per_second, clock.now(), 0.1, rate_jitter);
  std::uint32_t x = seed;
  auto next = [&x](int lo, int hi) {  // xorshift, in [lo, hi]
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return lo + static_cast<int>(x % static_cast<std::uint32_t>(hi - lo + 1));
  };
  Simulated out;
  std::int64_t answer_at = -1;  // the call in flight's answer (ms), -1 when none
  Clock::MonoTime taken_at{};
  double in_flight = 0;
  for (std::int64_t ms = 0; ms < seconds * 1000; ++ms) {
    if (answer_at == ms) {
      rate.on_answered(in_flight, in_flight * record_bytes, in_flight, in_flight * record_bytes,
                       taken_at, clock.now());
      answer_at = -1;
    }
    if (answer_at < 0) {
      double taken = 0;
      while (taken < 150 && rate.take(1, record_bytes, clock.now())) ++taken;
      if (taken > 0) {
        in_flight = taken;
        taken_at = clock.now();
        const std::int64_t arrives = ms + 2 + next(0, arrival_jitter);
        answer_at = arrives + next(5, 100);
        for (int i = 0; i < taken; ++i) out.arrivals.emplace_back(arrives, record_bytes);
        out.records += taken;
      }
    }
    clock.advance(1ms);
  }
  std::sort(out.arrivals.begin(), out.arrivals.end());
  return out;
}

// The most records and bytes that arrived within any one second.
std::pair<double, double> peak_second(const Simulated& s) {
  double peak_records = 0, peak_bytes = 0, bytes = 0;
  std::size_t lo = 0;
  for (std::size_t hi = 0; hi < s.arrivals.size(); ++hi) {
    bytes += s.arrivals[hi].second;
    while (s.arrivals[lo].first <= s.arrivals[hi].first - 1000) bytes -= s.arrivals[lo++].second;
    peak_records = std::max(peak_records, static_cast<double>(hi - lo + 1));
    peak_bytes = std::max(peak_bytes, bytes);
  }
  return {peak_records, peak_bytes};
}

TEST(ShardRateTest, SustainedAtTheLimitNoSecondHoldsMoreThanTheLimit) {
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    // Arrivals that vary by up to 18 ms, within the rate's 20 ms.
    const Simulated s = simulate(1000, 1 << 20, 116, 30, 18, 20ms, seed);
    const auto [records, bytes] = peak_second(s);
    EXPECT_LE(records, 1000) << "seed " << seed;
    EXPECT_LE(bytes, 116000) << "seed " << seed;
    // About limit / (1 s + 20 ms), less the calls' granularity.
    EXPECT_GE(s.records / 30, 960) << "seed " << seed;
  }
}

TEST(ShardRateTest, ArrivalsAnywhereBeforeTheAnswerStayUnderTheLimitWithAWideJitter) {
  // Arrivals that vary by up to 300 ms: a rate told so counts each record until a second after
  // its answer, and stays under the limit.
  const Simulated s = simulate(1000, 1 << 20, 116, 30, 300, 10s, 7);
  EXPECT_LE(peak_second(s).first, 1000);
  EXPECT_GE(s.records / 30, 700);
  // The same arrivals against the default 20 ms overrun the limit: the test can fail.
  const Simulated tight = simulate(1000, 1 << 20, 116, 30, 300, 20ms, 7);
  EXPECT_GT(peak_second(tight).first, 1000);
}

TEST(ShardRateTest, SustainedAtTheByteLimitNoSecondHoldsMoreThanIt) {
  // 2,000-byte records: 524 a second fill the shard's MiB.
  for (std::uint32_t seed : {4u, 5u}) {
    const Simulated s = simulate(1000, 1 << 20, 2000, 30, 18, 20ms, seed);
    const auto [records, bytes] = peak_second(s);
    EXPECT_LE(bytes, 1 << 20) << "seed " << seed;
    EXPECT_LE(records, 524) << "seed " << seed;
    EXPECT_GE(s.records * 2000 / 30, 0.95 * (1 << 20)) << "seed " << seed;
  }
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
  // The bucket holds 70 again; the window, 60 besides the 40 in flight.
  EXPECT_DOUBLE_EQ(rate.records_available(clock.now()), 60);
  rate.on_answered(40, 600, 0, 0, clock.now(), clock.now());  // none written
  EXPECT_DOUBLE_EQ(rate.records_available(clock.now()), 70);
  EXPECT_DOUBLE_EQ(rate.bytes_available(clock.now()), 500);
  ShardRate unlimited(0, 0, clock.now());
  EXPECT_TRUE(std::isinf(unlimited.records_available(clock.now())));
  EXPECT_TRUE(unlimited.take(1e6, 1e9, clock.now()));
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
