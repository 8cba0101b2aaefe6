// BatchBisector: which parts of a failing batch are delivered, in which order, how often, and
// which records end up dead-lettered, against a processor that fails on chosen records.
#include "lifecycle/batch_bisector.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "support/bisection.h"

namespace kcl::lifecycle {
namespace {

// Drives a bisector to the end against a processor that fails whenever a part holds a bad
// record (plus `transient` failures of whatever comes first).
struct Outcome {
  std::vector<BatchBisector::Part> calls;  // every delivery, in order
  std::vector<bool> failed;                // per call
  std::vector<std::size_t> order;          // records finished (processed or lettered)
  std::vector<std::size_t> lettered;       // records dead-lettered
  std::vector<int> letter_attempts;        // their failures_of_current()
  std::vector<int> seen;                   // per record: deliveries
  std::vector<int> processed;              // per record: deliveries in calls that succeeded
  int backoffs = 0;
};

Outcome run(std::size_t size, int max_attempts, const std::set<std::size_t>& bad,
            int transient = 0) {
  Outcome r;
  r.seen.assign(size, 0);
  r.processed.assign(size, 0);
  BatchBisector b(size, max_attempts);
  while (auto part = b.current()) {
    bool fails = transient > 0;
    if (transient > 0) --transient;
    for (std::size_t i = part->begin; i < part->end; ++i) {
      ++r.seen[i];
      if (bad.count(i)) fails = true;
    }
    r.calls.push_back(*part);
    r.failed.push_back(fails);
    if (!fails) {
      for (std::size_t i = part->begin; i < part->end; ++i) {
        ++r.processed[i];
        r.order.push_back(i);
      }
      b.succeeded();
      continue;
    }
    switch (b.failed()) {
      case BatchBisector::Next::kRetryAfterBackoff:
        ++r.backoffs;
        break;
      case BatchBisector::Next::kDeliverNow:
        break;
      case BatchBisector::Next::kDeadLetter:
        r.lettered.push_back(b.current()->begin);
        r.letter_attempts.push_back(b.failures_of_current());
        r.order.push_back(b.current()->begin);
        b.dead_lettered();
        break;
    }
    if (r.calls.size() > 100000) break;  // a bug, not a hang
  }
  return r;
}

int good_in_failed_calls(const Outcome& r, const std::set<std::size_t>& bad) {
  int n = 0;
  for (std::size_t c = 0; c < r.calls.size(); ++c) {
    if (!r.failed[c]) continue;
    for (std::size_t i = r.calls[c].begin; i < r.calls[c].end; ++i) n += bad.count(i) ? 0 : 1;
  }
  return n;
}

TEST(BatchBisectorTest, ABatchThatSucceedsIsDeliveredOnce) {
  Outcome r = run(10, 3, {});
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].begin, 0u);
  EXPECT_EQ(r.calls[0].end, 10u);
  EXPECT_TRUE(r.lettered.empty());
}

TEST(BatchBisectorTest, TransientFailuresBelowMaxAttemptsRetryTheWholeBatch) {
  Outcome r = run(10, 3, {}, 2);
  ASSERT_EQ(r.calls.size(), 3u);
  for (const auto& c : r.calls) EXPECT_EQ(c.size(), 10u);
  EXPECT_EQ(r.backoffs, 2);
  EXPECT_TRUE(r.lettered.empty());
  for (int p : r.processed) EXPECT_EQ(p, 1);
}

TEST(BatchBisectorTest, OneBadRecordIsFoundAndEveryGoodRecordProcessedOnce) {
  const std::set<std::size_t> bad{5};
  Outcome r = run(10, 3, bad);
  ASSERT_EQ(r.lettered, (std::vector<std::size_t>{5}));
  // 3 whole-batch failures, [5,10) and [5,7) failing once each, then 3 failures alone.
  EXPECT_EQ(r.letter_attempts, (std::vector<int>{8}));
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(r.processed[i], i == 5 ? 0 : 1) << "record " << i;
  }
  EXPECT_EQ(good_in_failed_calls(r, bad), 3 * 9 + 4 + 1);
  EXPECT_EQ(good_in_failed_calls(r, bad), kcl::testing::implied_redeliveries(10, 5, 3));
  // Backoffs only before the bisection and for the record alone, never between halves.
  EXPECT_EQ(r.backoffs, 2 + 2);
}

TEST(BatchBisectorTest, PartsFinishInShardOrder) {
  const std::set<std::size_t> bad{0, 3, 4, 9, 63};
  Outcome r = run(64, 2, bad);
  EXPECT_EQ(r.lettered, (std::vector<std::size_t>{0, 3, 4, 9, 63}));
  ASSERT_EQ(r.order.size(), 64u);
  for (std::size_t i = 0; i < r.order.size(); ++i) EXPECT_EQ(r.order[i], i);
  for (std::size_t i = 0; i < 64; ++i) EXPECT_EQ(r.processed[i], bad.count(i) ? 0 : 1) << i;
}

TEST(BatchBisectorTest, TheRedeliveryFormulaHoldsForEveryPositionAndSize) {
  for (std::size_t size : {1u, 2u, 3u, 7u, 100u, 1000u, 10000u}) {
    for (std::size_t bad = 0; bad < size; bad += std::max<std::size_t>(1, size / 13)) {
      for (int n : {1, 3}) {
        Outcome r = run(size, n, {bad});
        ASSERT_EQ(r.lettered, (std::vector<std::size_t>{bad})) << size << " " << bad;
        EXPECT_EQ(good_in_failed_calls(r, {bad}), kcl::testing::implied_redeliveries(size, bad, n))
            << "size " << size << " bad " << bad << " attempts " << n;
      }
    }
  }
}

TEST(BatchBisectorTest, ASingleRecordBatchIsDeadLetteredAfterMaxAttempts) {
  Outcome r = run(1, 4, {0});
  EXPECT_EQ(r.calls.size(), 4u);
  EXPECT_EQ(r.letter_attempts, (std::vector<int>{4}));
}

TEST(BatchBisectorTest, AnEmptyBatchHasNothingToDeliver) {
  BatchBisector b(0, 3);
  EXPECT_FALSE(b.current().has_value());
}

}  // namespace
}  // namespace kcl::lifecycle
