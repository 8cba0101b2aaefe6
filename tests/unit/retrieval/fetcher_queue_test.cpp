// ShardFetcher's prefetch queue: bounds in records and bytes, oversized responses, empty
// responses, and take_batch() from another thread.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "support/fetcher_fake_kinesis.h"

namespace kcl::retrieval {
namespace {

using namespace std::chrono_literals;
using testing::FetcherHarness;
using testing::seq_number;

TEST(FetcherQueueTest, StopsCallingWhileTheConsumerTakesNothing) {
  FetcherHarness h;
  h.fake->add_records(10000);
  RetrievalConfig cfg;
  cfg.max_records_per_call = 100;
  cfg.max_prefetch_records = 250;
  auto f = h.make(StartPosition::trim_horizon(), cfg);

  FetchStep s;
  int full_steps = 0;
  for (int i = 0; i < 200; ++i) {
    if (s.wait_for_take) {
      h.clock.advance(1s);  // a consumer that never takes; time passes anyway
    } else {
      h.advance_to(s);
    }
    s = f->fetch_step();
    if (s.outcome == FetchOutcome::kQueueFull) {
      ++full_steps;
      EXPECT_TRUE(s.wait_for_take);
      EXPECT_EQ(s.next_step_at, Clock::MonoTime::max());
    }
  }
  EXPECT_GT(full_steps, 190);
  EXPECT_EQ(f->queued_records(), 300u) << "calls stop once the bound is reached";
  EXPECT_EQ(h.fake->calls_of("GetRecords").size(), 3u);
  EXPECT_FALSE(f->has_room());

  // The consumer takes one batch: there is room again, and one more call is made.
  auto b = f->take_batch();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->records.front().sequence_number(), seq_number(0));
  EXPECT_EQ(f->queued_records(), 200u);
  EXPECT_TRUE(f->has_room());
  s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(f->queued_records(), 300u);
  s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kNotDue);
  h.advance_to(s);
  EXPECT_EQ(f->fetch_step().outcome, FetchOutcome::kQueueFull);
  EXPECT_EQ(h.fake->calls_of("GetRecords").size(), 4u);
}

TEST(FetcherQueueTest, ByteBound) {
  FetcherHarness h;
  for (int i = 0; i < 1000; ++i) h.fake->add_record(std::string(1000, 'x'));
  RetrievalConfig cfg;
  cfg.max_records_per_call = 100;
  cfg.max_prefetch_bytes = 250'000;
  auto f = h.make(StartPosition::trim_horizon(), cfg);
  FetchStep s;
  for (int i = 0; i < 50; ++i) {
    if (s.wait_for_take) {
      h.clock.advance(1s);
    } else {
      h.advance_to(s);
    }
    s = f->fetch_step();
  }
  // A batch's bytes are what it holds: the answer's body (100 records of 1,000 bytes, base64
  // in JSON, decoded in place) and its records, 100-250 KB. One batch stays under the bound,
  // two reach it.
  EXPECT_EQ(s.outcome, FetchOutcome::kQueueFull);
  EXPECT_EQ(f->queued_records(), 200u);
  EXPECT_GE(f->queued_bytes(), 250'000u);
  auto b = f->take_batch();
  ASSERT_TRUE(b.has_value());
  EXPECT_GT(b->bytes, 100'000u);
  EXPECT_LT(b->bytes, 250'000u);
  EXPECT_LT(f->queued_bytes(), 250'000u);
  EXPECT_EQ(f->queued_records(), 100u);
}

TEST(FetcherQueueTest, OneResponseLargerThanTheBoundIsAccepted) {
  FetcherHarness h;
  h.fake->add_records(500);
  RetrievalConfig cfg;
  cfg.max_records_per_call = 100;
  cfg.max_prefetch_records = 10;
  auto f = h.make(StartPosition::trim_horizon(), cfg);
  FetchStep s = f->fetch_step();
  h.advance_to(s);
  s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(s.records_queued, 100u);
  h.advance_to(s);
  EXPECT_EQ(f->fetch_step().outcome, FetchOutcome::kQueueFull);
  EXPECT_EQ(f->queued_records(), 100u);
}

TEST(FetcherQueueTest, EmptyResponsesMakeNoBatchButUpdateMillisBehind) {
  FetcherHarness h;
  h.fake->set_millis_behind(42);
  auto f = h.make(StartPosition::trim_horizon());
  FetchStep s;
  for (int i = 0; i < 5; ++i) {
    h.advance_to(s);
    s = f->fetch_step();
  }
  EXPECT_EQ(s.outcome, FetchOutcome::kNoRecords);
  EXPECT_EQ(f->queued_batches(), 0u);
  EXPECT_FALSE(f->take_batch().has_value());
  EXPECT_EQ(f->millis_behind_latest(), 42);
}

TEST(FetcherQueueTest, BatchesCarryMillisBehindAndBytes) {
  FetcherHarness h;
  h.fake->add_record("abc");
  h.fake->add_record("de");
  h.fake->set_millis_behind(1234);
  auto f = h.make(StartPosition::trim_horizon());
  FetchStep s = f->fetch_step();
  h.advance_to(s);
  (void)f->fetch_step();
  auto b = f->take_batch();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->millis_behind_latest, 1234);
  // What the batch holds: the answer's body (the 5 bytes of data decoded in it) and the
  // two records.
  EXPECT_GE(b->bytes, 5u + 2 * sizeof(kcl::Record));
  EXPECT_LT(b->bytes, 64u * 1024);
  EXPECT_FALSE(b->shard_end);
  ASSERT_EQ(b->records.size(), 2u);
  EXPECT_FALSE(b->records[0].aggregated());
  EXPECT_EQ(b->records[0].partition_key(), "pk");
  EXPECT_EQ(b->records[0].sub_sequence_number(), 0u);
}

TEST(FetcherQueueTest, TakeBatchFromAnotherThreadWhileFetching) {
  FetcherHarness h;
  constexpr std::size_t kQueued = 20000;
  h.fake->add_records(kQueued);
  RetrievalConfig cfg;
  cfg.max_records_per_call = 137;
  cfg.max_prefetch_records = 500;
  auto f = h.make(StartPosition::trim_horizon(), cfg);

  std::atomic<bool> failed{false};
  std::atomic<std::size_t> taken{0};
  std::thread consumer([&] {
    std::size_t next = 0;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (next < kQueued && std::chrono::steady_clock::now() < deadline) {
      auto b = f->take_batch();
      if (!b) {
        std::this_thread::yield();
        continue;
      }
      for (const auto& r : b->records) {
        if (r.sequence_number() != seq_number(next)) failed = true;
        ++next;
      }
      (void)f->queued_records();  // accessors are safe from this thread too
      taken = next;
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (taken.load() < kQueued && std::chrono::steady_clock::now() < deadline) {
    FetchStep s = f->fetch_step();
    if (s.wait_for_take) {
      std::this_thread::yield();
    } else {
      h.advance_to(s);
    }
  }
  consumer.join();
  EXPECT_EQ(taken.load(), kQueued);
  EXPECT_FALSE(failed.load());
  EXPECT_LE(f->queued_records(), 0u);
}

}  // namespace
}  // namespace kcl::retrieval
