// The producer's planner (producer/put_planner.h) on explicit times, with no threads and no
// service: linger, full calls, ordering across a retry, the shard's rate window, aggregation;
// and the shard map.
#include "producer/put_planner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "aws/retry.h"
#include "kcl/producer.h"
#include "producer/kpl_aggregator.h"
#include "producer/shard_map.h"
#include "retrieval/kpl_deaggregator.h"

namespace kcl::producer {
namespace {

using namespace std::chrono_literals;

const Clock::MonoTime kT0 = Clock::MonoTime{} + std::chrono::hours(1);

// Two shards splitting the hash key space in halves.
ShardMap two_shards() {
  const HashKey half = HashKey{1} << 127;
  return ShardMap({{0, half - 1, "shardId-0"}, {half, ~HashKey{0}, "shardId-1"}});
}

ProducerConfig base_config() {
  ProducerConfig c;
  c.stream_name = "s";
  c.aggregate = false;
  c.linger = 100ms;
  c.shard_records_per_second = 0;  // no limit unless a test sets one
  c.shard_bytes_per_second = 0;
  return c;
}

std::unique_ptr<PutItem> record(const std::string& pk, std::size_t data_bytes, char fill = 'x') {
  auto item = std::make_unique<PutItem>();
  item->pk = pk;
  item->data.assign(data_bytes, fill);
  item->bytes = item->pk.size() + item->data.size();
  item->hash = partition_key_hash(pk);
  item->key_id = static_cast<std::uint64_t>(item->hash);
  return item;
}

// A key whose hash falls in shard `shard` (0 or 1) of two_shards(), the n-th such.
std::string key_in(int shard, int n) {
  const ShardMap map = two_shards();
  for (int i = 0, found = 0;; ++i) {
    std::string pk = "k" + std::to_string(i);
    if (map.find(partition_key_hash(pk)) == static_cast<std::size_t>(shard) && found++ == n) {
      return pk;
    }
  }
}

// The answer that every entry of `call` was written to the shard the map said.
Result<kinesis::PutRecordsResult> all_ok(const PlannedCall& call) {
  kinesis::PutRecordsResult r;
  r.shard_ids = call.shards;
  for (const PlannedEntry& e : call.entries) {
    kinesis::PutRecordsEntryResult entry;
    entry.ok = true;
    entry.shard = e.shard;
    entry.shard_id = call.shards[e.shard];
    entry.sequence_number = "1";
    r.records.push_back(entry);
  }
  return r;
}

// The answer that every entry of `call` (of one shard) was written to shard `shard` instead:
// a split or a merge the map has not seen.
Result<kinesis::PutRecordsResult> all_written_to(const PlannedCall& call,
                                                 const std::string& shard) {
  auto r = all_ok(call);
  r->shard_ids = {shard};
  for (auto& entry : r->records) entry.shard_id = shard;
  return r;
}

struct Fixture {
  explicit Fixture(ProducerConfig c) : config(std::move(c)), planner(config, policy) {
    planner.set_map(two_shards(), kT0);
  }
  ProducerConfig config;
  aws::RetryPolicy policy{RetryConfig{}, 7};
  PutPlanner planner;
};

TEST(ShardMapTest, FindsTheOpenShardOfAHashKeyAndSkipsClosedOnes) {
  std::vector<kinesis::Shard> shards(3);
  shards[0].shard_id = "shardId-2";  // out of order on purpose: the map sorts
  shards[0].hash_key_range = {"100", "340282366920938463463374607431768211455"};
  shards[1].shard_id = "shardId-0";
  shards[1].hash_key_range = {"0", "99"};
  shards[2].shard_id = "shardId-1";  // closed (the parent of a split)
  shards[2].hash_key_range = {"0", "340282366920938463463374607431768211455"};
  shards[2].sequence_number_range.ending_sequence_number = "5";
  auto map = ShardMap::from_shards(shards);
  ASSERT_TRUE(map.ok()) << map.status().message();
  ASSERT_EQ(map->ranges().size(), 2u);
  EXPECT_EQ(map->ranges()[map->find(0)].shard_id, "shardId-0");
  EXPECT_EQ(map->ranges()[map->find(99)].shard_id, "shardId-0");
  EXPECT_EQ(map->ranges()[map->find(100)].shard_id, "shardId-2");
  EXPECT_EQ(map->ranges()[map->find(~HashKey{0})].shard_id, "shardId-2");
  EXPECT_EQ(ShardMap(std::vector<ShardMap::Range>{{10, 20, "a"}}).find(5), ShardMap::kNone);

  shards[1].hash_key_range.ending_hash_key = "not a number";
  auto bad = ShardMap::from_shards(shards);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("shardId-0"), std::string::npos);
}

TEST(PutPlannerTest, LingerFiresAtItsDeadlineAndNotBefore) {
  Fixture f(base_config());
  f.planner.add(record(key_in(0, 0), 10), kT0);
  auto at0 = f.planner.next_call(kT0, {});
  EXPECT_TRUE(at0.call.empty());
  EXPECT_EQ(at0.wake, kT0 + 100ms);
  auto before = f.planner.next_call(kT0 + 99ms, {});
  EXPECT_TRUE(before.call.empty());
  EXPECT_EQ(before.wake, kT0 + 100ms);
  auto at = f.planner.next_call(kT0 + 100ms, {});
  ASSERT_EQ(at.call.entries.size(), 1u);
  EXPECT_EQ(at.call.items[0]->pk, key_in(0, 0));
  EXPECT_EQ(at.call.items[0]->attempts, 1);
  EXPECT_EQ(f.planner.queued_records(), 0u);
}

TEST(PutPlannerTest, FlushSendsBeforeTheLinger) {
  Fixture f(base_config());
  f.planner.add(record(key_in(0, 0), 10), kT0);
  EXPECT_TRUE(f.planner.next_call(kT0, {}).call.empty());
  PutPlanner::Urgency flush;
  flush.flush = true;
  EXPECT_EQ(f.planner.next_call(kT0 + 1ms, flush).call.entries.size(), 1u);
}

TEST(PutPlannerTest, AFullCallOfRecordsGoesAtOnce) {
  ProducerConfig c = base_config();
  c.linger = 1000ms;
  c.max_in_flight_per_shard = 2;  // not ordered: a key may repeat in a call
  Fixture f(c);
  for (int i = 0; i < 499; ++i) {
    EXPECT_FALSE(f.planner.add(record(key_in(i % 2, 0), 10), kT0).fills_call);
  }
  EXPECT_TRUE(f.planner.next_call(kT0, {}).call.empty()) << "499 records wait for the linger";
  EXPECT_TRUE(f.planner.add(record(key_in(1, 0), 10), kT0).fills_call);
  auto next = f.planner.next_call(kT0, {});
  EXPECT_EQ(next.call.entries.size(), kMaxCallRecords);
  EXPECT_EQ(f.planner.queued_records(), 0u);
  // 501 queued: a call takes 500 of them.
  for (int i = 0; i < 501; ++i) f.planner.add(record(key_in(i % 2, 0), 10), kT0 + 1ms);
  auto again = f.planner.next_call(kT0 + 1ms, {});
  EXPECT_EQ(again.call.entries.size(), kMaxCallRecords);
  EXPECT_EQ(f.planner.queued_records(), 1u);
}

TEST(PutPlannerTest, AFullCallOfBytesGoesAtOnceAndStaysWithin5MiB) {
  ProducerConfig c = base_config();
  c.linger = 1000ms;
  c.max_in_flight_per_shard = 2;
  Fixture f(c);
  const std::size_t data = kMaxRecordBytes - 8;  // a record of about 1 MiB with its key
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(f.planner.add(record(key_in(i % 2, i), data), kT0).fills_call);
  }
  EXPECT_LT(f.planner.queued_bytes(), kMaxCallBytes);
  EXPECT_TRUE(f.planner.next_call(kT0, {}).call.empty()) << "under 5 MiB waits for the linger";
  EXPECT_TRUE(f.planner.add(record(key_in(1, 9), data), kT0).fills_call);
  auto next = f.planner.next_call(kT0, {});
  EXPECT_EQ(next.call.entries.size(), 5u);
  EXPECT_LE(next.call.bytes, kMaxCallBytes);
  EXPECT_EQ(f.planner.queued_records(), 1u);
}

TEST(PutPlannerTest, OrderOfAKeyHoldsAcrossARetryOfAFailedRecord) {
  ProducerConfig c = base_config();
  c.linger = 0ms;
  Fixture f(c);  // max_in_flight_per_shard = 1: ordered
  const std::string a = key_in(0, 0), b = key_in(0, 1);
  f.planner.add(record(a, 10, '1'), kT0);
  f.planner.add(record(b, 10, '1'), kT0);
  f.planner.add(record(a, 10, '2'), kT0);
  auto first = f.planner.next_call(kT0, {});
  // A key is in at most one Kinesis record of a call: the call stops before a's second.
  ASSERT_EQ(first.call.items.size(), 2u);
  EXPECT_EQ(first.call.items[0]->data, "1111111111");
  EXPECT_EQ(first.call.items[1]->pk, b);
  // One call of the shard in flight: nothing more goes until it is answered.
  EXPECT_TRUE(f.planner.next_call(kT0 + 50ms, {}).call.empty());

  auto answer = all_ok(first.call);
  answer->records[0].ok = false;
  answer->records[0].error_code = "ProvisionedThroughputExceededException";
  PutPlanner::Done done;
  const auto settled = f.planner.on_result(first.call, answer, kT0 + 60ms, done);
  EXPECT_TRUE(done.empty());
  EXPECT_EQ(settled.succeeded, 1u);
  EXPECT_EQ(settled.retried, 1u);
  EXPECT_EQ(settled.throttled, 1u);

  // Every record of key a in the order sent from here: the retried one comes first.
  std::vector<std::string> a_sent;
  auto t = kT0 + 60ms;
  for (int step = 0; step < 20000 && a_sent.size() < 2; ++step, t += 1ms) {
    auto next = f.planner.next_call(t, {});
    if (next.call.empty()) continue;
    for (const auto& item : next.call.items) {
      if (item->pk == a) a_sent.push_back(item->data);
    }
    PutPlanner::Done more;
    f.planner.on_result(next.call, all_ok(next.call), t, more);
  }
  ASSERT_EQ(a_sent.size(), 2u);
  EXPECT_EQ(a_sent[0], "1111111111");
  EXPECT_EQ(a_sent[1], "2222222222");
  EXPECT_EQ(f.planner.counts().records_retried, 1u);
}

TEST(PutPlannerTest, RateWindowKeepsAShardAtItsLimits) {
  ProducerConfig c = base_config();
  c.linger = 10ms;
  c.shard_records_per_second = 1000;
  c.shard_bytes_per_second = 1048576;
  c.max_in_flight_per_shard = 4;
  // Small records test the records limit, large ones the bytes limit: 6 s of either.
  struct Sent {
    Clock::MonoTime at;
    double records, bytes;
  };
  for (const std::size_t size : {std::size_t{10}, std::size_t{20000}}) {
    Fixture g(c);
    const std::size_t total = size == 10 ? 6000 : 320;
    for (std::size_t i = 0; i < total; ++i)
      g.planner.add(record(key_in(0, int(i % 50)), size), kT0);
    std::deque<Sent> window;
    double in_window_records = 0, in_window_bytes = 0, most_records = 0, most_bytes = 0;
    std::size_t sent = 0;
    std::deque<std::pair<Clock::MonoTime, PlannedCall>> in_flight;
    for (auto t = kT0; t < kT0 + 20s && sent < total; t += 1ms) {
      // Each call is answered 30 ms after it left.
      while (!in_flight.empty() && in_flight.front().first + 30ms <= t) {
        PutPlanner::Done done;
        g.planner.on_result(in_flight.front().second, all_ok(in_flight.front().second), t, done);
        in_flight.pop_front();
      }
      auto next = g.planner.next_call(t, {});
      if (next.call.empty()) continue;
      for (const PlannedEntry& e : next.call.entries) {
        window.push_back({t, 1, double(e.bytes)});
        in_window_records += 1;
        in_window_bytes += e.bytes;
      }
      while (window.front().at + 1s <= t) {
        in_window_records -= window.front().records;
        in_window_bytes -= window.front().bytes;
        window.pop_front();
      }
      most_records = std::max(most_records, in_window_records);
      most_bytes = std::max(most_bytes, in_window_bytes);
      sent += next.call.items.size();
      in_flight.emplace_back(t, std::move(next.call));
    }
    EXPECT_EQ(sent, total) << size;
    EXPECT_LE(most_records, 1000) << size;
    EXPECT_LE(most_bytes, 1048576) << size;
    // And the shard is not held far below its limit either.
    if (size == 10) {
      EXPECT_GE(most_records, 900);
    } else {
      EXPECT_GE(most_bytes, 0.9 * 1048576);
    }
  }
}

// A call due takes from every shard that may send what its tokens allow, also from one not
// yet ready for a linger's worth: the shards then spend their tokens together and come ready
// together (before, such a shard waited and went in a call of its own).
TEST(PutPlannerTest, ACallDueTakesWhatAShardNotYetReadyMaySend) {
  ProducerConfig c = base_config();
  c.shard_records_per_second = 1000;  // records limit only; ordered (one call of a shard)
  Fixture f(c);
  auto count_of = [](const PlannedCall& call, const std::string& shard) {
    std::size_t n = 0;
    for (const PlannedEntry& e : call.entries) n += call.shards[e.shard] == shard ? e.count : 0;
    return n;
  };
  for (int i = 0; i < 300; ++i) f.planner.add(record(key_in(1, i), 20), kT0);
  f.planner.add(record(key_in(0, 0), 20), kT0);
  EXPECT_TRUE(f.planner.next_call(kT0, {}).call.empty());  // the shards ready from here
  auto first = f.planner.next_call(kT0 + 100ms, {});
  ASSERT_EQ(first.call.shards.size(), 2u);
  const std::size_t first_of_1 = count_of(first.call, "shardId-1");
  EXPECT_GE(first_of_1, 90u);  // shard 1 spent its tokens (a linger's worth)
  EXPECT_LT(first_of_1, 300u);
  // Both shards in flight (ordered): nothing to look at before the answer, though shard 1
  // holds more records and its next token comes in a millisecond.
  EXPECT_EQ(first.wake, kT0 + 100ms + std::chrono::hours(1));
  PutPlanner::Done done;
  f.planner.on_result(first.call, all_ok(first.call), kT0 + 110ms, done);

  // 50 ms later shard 0 has a record that may go at once (put() waits for room); shard 1 has
  // 50 ms of tokens, half a linger's worth: they go along.
  f.planner.add(record(key_in(0, 1), 20), kT0 + 150ms);
  PutPlanner::Urgency putters_wait;
  putters_wait.waiting_putters = true;
  auto second = f.planner.next_call(kT0 + 150ms, putters_wait);
  EXPECT_EQ(count_of(second.call, "shardId-0"), 1u);
  const std::size_t second_of_1 = count_of(second.call, "shardId-1");
  EXPECT_GE(second_of_1, 40u);
  EXPECT_LE(second_of_1, 60u);
  f.planner.on_result(second.call, all_ok(second.call), kT0 + 160ms, done);
  EXPECT_TRUE(done.empty());
  EXPECT_EQ(f.planner.queued_records(), 300u - first_of_1 - second_of_1);
}

TEST(PutPlannerTest, AggregationPacksRecordsUpToItsSizeLimit) {
  ProducerConfig c = base_config();
  c.aggregate = true;
  c.aggregation_max_bytes = 4096;
  Fixture f(c);
  // Ordered (the default): a key is in one Kinesis record of a call, so the keys differ.
  // Small records, so that an aggregate ends within a few bytes of its limit.
  const ShardMap map = two_shards();
  int added = 0;
  for (int i = 0; added < 400; ++i) {
    const std::string pk = "k" + std::to_string(i);
    if (map.find(partition_key_hash(pk)) != 1) continue;
    f.planner.add(record(pk, 10, char('a' + added % 26)), kT0);
    ++added;
  }
  EXPECT_TRUE(f.planner.next_call(kT0, {}).call.empty());
  auto next = f.planner.next_call(kT0 + 100ms, {});
  ASSERT_FALSE(next.call.empty());
  std::size_t records = 0;
  for (std::size_t i = 0; i < next.call.entries.size(); ++i) {
    const PlannedEntry& e = next.call.entries[i];
    ASSERT_TRUE(e.aggregated()) << i;
    const std::string& pk = next.call.items[e.first]->pk;
    // Its own Kinesis record: the aggregate, its partition key and its hash key.
    EXPECT_LE(e.aggregate.size() + pk.size() + 39, c.aggregation_max_bytes) << i;
    EXPECT_EQ(e.bytes, e.aggregate.size() + pk.size() + 39) << i;
    // Full: one more record of the shard would not have fit.
    if (e.first + e.count < next.call.items.size()) {
      KplAggregator agg;
      for (std::uint32_t k = 0; k <= e.count; ++k) {
        const PutItem& it = *next.call.items[e.first + k];
        agg.add(it.pk, it.ehk, it.data);
      }
      EXPECT_GT(agg.size() + pk.size() + 39, c.aggregation_max_bytes) << i;
    }
    // The aggregate reads back as its records, in order.
    kinesis::KinesisRecord r;
    r.partition_key = pk;
    r.sequence_number = "1";
    r.data = e.aggregate;
    std::vector<Record> out;
    auto result = retrieval::deaggregate(r, "shardId-1", out);
    ASSERT_EQ(result.outcome, retrieval::DeaggregationOutcome::kDeaggregated) << result.reason;
    ASSERT_EQ(out.size(), e.count);
    for (std::uint32_t k = 0; k < e.count; ++k) {
      EXPECT_EQ(out[k].data(), next.call.items[e.first + k]->data);
    }
    records += e.count;
  }
  EXPECT_EQ(records, 400u);
  EXPECT_LT(next.call.entries.size(), 10u);
}

TEST(PutPlannerTest, AfterASplitTheChildrenWaitForTheParentsCallSoAKeyStaysInOrder) {
  ProducerConfig c = base_config();
  c.linger = 0ms;
  Fixture f(c);  // ordered
  const std::string k = key_in(1, 0);
  f.planner.add(record(k, 10, '1'), kT0);
  auto first = f.planner.next_call(kT0, {});
  ASSERT_EQ(first.call.items.size(), 1u);
  ASSERT_EQ(first.call.shards, std::vector<std::string>{"shardId-1"});
  // shardId-1 splits while its call is in flight; the key's next record is for a child.
  const HashKey half = HashKey{1} << 127, three_quarters = half + (HashKey{1} << 126);
  f.planner.set_map(ShardMap({{0, half - 1, "shardId-0"},
                              {half, three_quarters - 1, "shardId-2"},
                              {three_quarters, ~HashKey{0}, "shardId-3"}}),
                    kT0);
  f.planner.add(record(k, 10, '2'), kT0 + 1ms);
  PutPlanner::Urgency flush;
  flush.flush = true;
  EXPECT_TRUE(f.planner.next_call(kT0 + 2ms, flush).call.empty())
      << "the child must not send the key's second record before the parent's call answers";
  // The parent's call is throttled: its record comes back ahead of the second.
  auto answer = all_ok(first.call);
  answer->records[0].ok = false;
  answer->records[0].error_code = "ProvisionedThroughputExceededException";
  PutPlanner::Done done;
  f.planner.on_result(first.call, answer, kT0 + 3ms, done);
  std::vector<std::string> sent;
  auto t = kT0 + 3ms;
  for (int step = 0; step < 20000 && sent.size() < 2; ++step, t += 1ms) {
    auto next = f.planner.next_call(t, flush);
    if (next.call.empty()) continue;
    for (const auto& item : next.call.items) sent.push_back(item->data);
    PutPlanner::Done more;
    f.planner.on_result(next.call, all_ok(next.call), t, more);
  }
  EXPECT_EQ(sent, (std::vector<std::string>{"1111111111", "2222222222"}));
}

TEST(PutPlannerTest, ASplitMovesQueuedRecordsToTheOpenShards) {
  ProducerConfig c = base_config();
  Fixture f(c);
  f.planner.add(record(key_in(0, 0), 10), kT0);
  f.planner.add(record(key_in(1, 0), 10), kT0);
  // shardId-1 split into 2 and 3 at 3/4 of the space.
  const HashKey half = HashKey{1} << 127, three_quarters = half + (HashKey{1} << 126);
  f.planner.set_map(ShardMap({{0, half - 1, "shardId-0"},
                              {half, three_quarters - 1, "shardId-2"},
                              {three_quarters, ~HashKey{0}, "shardId-3"}}),
                    kT0);
  EXPECT_EQ(f.planner.rate_of("shardId-1"), nullptr);
  EXPECT_TRUE(f.planner.next_call(kT0, {}).call.empty());
  auto next = f.planner.next_call(kT0 + 100ms, {});
  ASSERT_EQ(next.call.items.size(), 2u);
  for (const std::string& id : next.call.shards) EXPECT_NE(id, "shardId-1");
}

// shardId-1 of two_shards() split at 3/4 of the space into shardId-2 and shardId-3.
ShardMap after_split_of_shard_1() {
  const HashKey half = HashKey{1} << 127, three_quarters = half + (HashKey{1} << 126);
  return ShardMap({{0, half - 1, "shardId-0"},
                   {half, three_quarters - 1, "shardId-2"},
                   {three_quarters, ~HashKey{0}, "shardId-3"}});
}

// `n` shards splitting the hash key space in equal ranges ("s0", "s1", ...).
ShardMap shards_of(int n) {
  std::vector<ShardMap::Range> ranges;
  const HashKey step = ~HashKey{0} / static_cast<unsigned>(n);
  for (int i = 0; i < n; ++i) {
    const HashKey start = step * static_cast<unsigned>(i);
    const HashKey end = i + 1 == n ? ~HashKey{0} : start + step - 1;
    ranges.push_back({start, end, "s" + std::to_string(i)});
  }
  return ShardMap(std::move(ranges));
}

// A call of 120 shards failing as a whole (a 500) is one retry: it pays the quota (500 tokens,
// 5 a retry) once, not once a shard, so no record fails after its first attempt.
TEST(PutPlannerTest, ACallFailingAsAWholePaysTheRetryQuotaOnce) {
  ProducerConfig c = base_config();
  c.linger = 0ms;
  Fixture f(c);
  const ShardMap map = shards_of(120);
  f.planner.set_map(map, kT0);
  std::set<std::size_t> covered;
  for (int i = 0; covered.size() < 120; ++i) {
    const std::string pk = "k" + std::to_string(i);
    if (covered.insert(map.find(partition_key_hash(pk))).second) f.planner.add(record(pk, 10), kT0);
  }
  PutPlanner::Urgency flush;
  flush.flush = true;
  auto next = f.planner.next_call(kT0, flush);
  ASSERT_EQ(next.call.shards.size(), 120u);
  PutPlanner::Done done;
  const Result<kinesis::PutRecordsResult> failed(Status(StatusCode::kUnavailable, "HTTP 500"));
  const auto settled = f.planner.on_result(next.call, failed, kT0 + 1ms, done);
  EXPECT_TRUE(done.empty()) << done.size() << " records failed after one attempt: "
                            << (done.empty() ? "" : done.front().second.status().message());
  EXPECT_EQ(settled.retried, 120u);
  EXPECT_GE(f.policy.quota().available(), 490);
}

// A shard that closes takes the quota its retries took back with it: its records succeed on
// the shards that replaced it, which cannot give it back.
TEST(PutPlannerTest, AClosedShardGivesBackWhatItsRetriesTookFromTheQuota) {
  ProducerConfig c = base_config();
  c.linger = 0ms;
  Fixture f(c);
  f.planner.add(record(key_in(1, 0), 10), kT0);
  PutPlanner::Urgency flush;
  flush.flush = true;
  auto next = f.planner.next_call(kT0, flush);
  ASSERT_EQ(next.call.shards, std::vector<std::string>{"shardId-1"});
  PutPlanner::Done done;
  (void)f.planner.on_result(
      next.call, Result<kinesis::PutRecordsResult>(Status(StatusCode::kUnavailable, "500")),
      kT0 + 1ms, done);
  ASSERT_LT(f.policy.quota().available(), 500);
  f.planner.set_map(after_split_of_shard_1(), kT0 + 2ms);
  EXPECT_EQ(f.policy.quota().available(), 500);
}

// An aggregate planned for shardId-1 from the old map, answered as written to shardId-3: a
// consumer following the Java KCL drops it there (some of its records hash into shardId-2),
// so its records are sent again, each to its own shard of the new map.
TEST(PutPlannerTest, AnAggregateWrittenToAnotherShardThanPredictedIsSentAgain) {
  ProducerConfig c = base_config();
  c.aggregate = true;
  c.linger = 0ms;
  Fixture f(c);
  const ShardMap split = after_split_of_shard_1();
  int in_2 = 0, in_3 = 0;
  for (int i = 0; in_2 < 3 || in_3 < 3; ++i) {
    const std::string pk = key_in(1, i);
    const std::size_t child = split.find(partition_key_hash(pk));
    int& n = split.ranges()[child].shard_id == "shardId-2" ? in_2 : in_3;
    if (n == 3) continue;
    ++n;
    f.planner.add(record(pk, 10, char('a' + in_2 + in_3)), kT0);
  }
  PutPlanner::Urgency flush;
  flush.flush = true;
  auto first = f.planner.next_call(kT0, flush);
  ASSERT_EQ(first.call.entries.size(), 1u);
  ASSERT_TRUE(first.call.entries[0].aggregated());
  ASSERT_EQ(first.call.shards, std::vector<std::string>{"shardId-1"});
  auto answer = all_written_to(first.call, "shardId-3");
  PutPlanner::Done done;
  const PutPlanner::Settled settled = f.planner.on_result(first.call, answer, kT0 + 1ms, done);
  EXPECT_TRUE(settled.refresh_needed);
  EXPECT_EQ(settled.aggregates_resent, 1u);
  EXPECT_EQ(settled.succeeded, 0u);
  EXPECT_EQ(settled.retried, 6u);
  EXPECT_TRUE(done.empty());
  EXPECT_TRUE(first.call.entries[0].resent) << "the caller must not answer its records";
  EXPECT_EQ(f.planner.queued_records(), 6u);
  // Not sent again by the old map (another request thread may plan before the map is read
  // again): they would go astray once more.
  EXPECT_TRUE(f.planner.next_call(kT0 + 2ms, flush).call.empty());

  f.planner.set_map(split, kT0 + 2ms);
  std::size_t sent = 0;
  auto t = kT0 + 2ms;
  for (int step = 0; step < 1000 && sent < 6; ++step, t += 1ms) {
    auto next = f.planner.next_call(t, flush);
    if (next.call.empty()) continue;
    for (const PlannedEntry& e : next.call.entries) {
      for (std::uint32_t k = 0; k < e.count; ++k) {
        const PutItem& item = *next.call.items[e.first + k];
        EXPECT_EQ(next.call.shards[e.shard], split.ranges()[split.find(item.hash)].shard_id)
            << item.pk;
        EXPECT_EQ(item.attempts, 2) << item.pk;
        ++sent;
      }
    }
    PutPlanner::Done more;
    const auto again = f.planner.on_result(next.call, all_ok(next.call), t, more);
    EXPECT_EQ(again.aggregates_resent, 0u);
    EXPECT_TRUE(more.empty());
  }
  EXPECT_EQ(sent, 6u);
  EXPECT_EQ(f.planner.queued_records(), 0u);
}

// The map not read again (ListShards failing): the records wait kMisroutedHold, then go by
// the map there is.
TEST(PutPlannerTest, AMisroutedAggregateWaitsForTheNewMapAtMostTheHold) {
  ProducerConfig c = base_config();
  c.aggregate = true;
  c.linger = 0ms;
  Fixture f(c);
  f.planner.add(record(key_in(1, 0), 10), kT0);
  f.planner.add(record(key_in(1, 1), 10), kT0);
  PutPlanner::Urgency flush;
  flush.flush = true;
  auto first = f.planner.next_call(kT0, flush);
  ASSERT_EQ(first.call.entries.size(), 1u);
  auto answer = all_written_to(first.call, "shardId-3");
  PutPlanner::Done done;
  (void)f.planner.on_result(first.call, answer, kT0 + 1ms, done);
  const auto before = f.planner.next_call(kT0 + kMisroutedHold, flush);
  EXPECT_TRUE(before.call.empty());
  EXPECT_LE(before.wake, kT0 + 1ms + kMisroutedHold);
  const auto after = f.planner.next_call(kT0 + 1ms + kMisroutedHold, flush);
  ASSERT_EQ(after.call.items.size(), 2u);
  EXPECT_EQ(after.call.items[0]->attempts, 2);
}

// Out of attempts, the records of a misrouted aggregate fail, saying where they were written.
TEST(PutPlannerTest, AMisroutedAggregateOutOfAttemptsFailsNamingTheShardItWentTo) {
  ProducerConfig c = base_config();
  c.aggregate = true;
  c.linger = 0ms;
  c.max_attempts = 1;
  Fixture f(c);
  f.planner.add(record(key_in(1, 0), 10), kT0);
  f.planner.add(record(key_in(1, 1), 10), kT0);
  PutPlanner::Urgency flush;
  flush.flush = true;
  auto first = f.planner.next_call(kT0, flush);
  ASSERT_EQ(first.call.entries.size(), 1u);
  ASSERT_TRUE(first.call.entries[0].aggregated());
  auto answer = all_written_to(first.call, "shardId-3");
  PutPlanner::Done done;
  const PutPlanner::Settled settled = f.planner.on_result(first.call, answer, kT0 + 1ms, done);
  EXPECT_EQ(settled.failed, 2u);
  EXPECT_EQ(settled.retried, 0u);
  ASSERT_EQ(done.size(), 2u);
  for (const auto& [item, result] : done) {
    ASSERT_FALSE(result.ok());
    EXPECT_NE(result.status().message().find("written to shard shardId-3, not to shardId-1"),
              std::string::npos)
        << result.status().message();
  }
  EXPECT_EQ(f.planner.queued_records(), 0u);
}

// A plain record written to another shard (a split the map has not seen) is where its hash
// key belongs: it succeeds; only the map is read again.
TEST(PutPlannerTest, APlainRecordWrittenToAnotherShardSucceeds) {
  ProducerConfig c = base_config();
  c.linger = 0ms;
  Fixture f(c);
  f.planner.add(record(key_in(1, 0), 10), kT0);
  PutPlanner::Urgency flush;
  flush.flush = true;
  auto first = f.planner.next_call(kT0, flush);
  ASSERT_EQ(first.call.entries.size(), 1u);
  auto answer = all_written_to(first.call, "shardId-3");
  PutPlanner::Done done;
  const PutPlanner::Settled settled = f.planner.on_result(first.call, answer, kT0 + 1ms, done);
  EXPECT_TRUE(settled.refresh_needed);
  EXPECT_EQ(settled.succeeded, 1u);
  EXPECT_EQ(settled.aggregates_resent, 0u);
  EXPECT_FALSE(first.call.entries[0].resent);
  EXPECT_EQ(f.planner.queued_records(), 0u);
}

}  // namespace
}  // namespace kcl::producer
