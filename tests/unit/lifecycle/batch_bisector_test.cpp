// BatchBisector: which parts of a failing batch are delivered, in which order, how often, and
// which records end up dead-lettered, against a processor that fails on chosen records.
#include "lifecycle/batch_bisector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "support/bisection.h"

namespace kcl::lifecycle {
namespace {

// Drives a bisector to the end against a processor that fails whenever a part holds a bad
// record, and while `down` says what it depends on is out (the first `transient` calls by
// default), checking at each step that every record before resolved() is finished.
struct Outcome {
  std::vector<BatchBisector::Part> calls;    // every delivery, in order
  std::vector<bool> failed;                  // per call
  std::vector<std::size_t> processed_order;  // records processed, in the order of the calls
  std::vector<std::size_t> lettered;         // records dead-lettered, in order
  std::vector<int> letter_attempts;          // their failures_of()
  std::vector<int> seen;                     // per record: deliveries
  std::vector<int> processed;                // per record: deliveries in calls that succeeded
  int backoffs = 0;
  int look_aheads = 0;
  int outages = 0;
  std::vector<std::size_t> after_outage;  // the size of the call after each outage verdict
};

struct BisectScript {
  std::set<std::size_t> bad;
  int transient = 0;  // the first calls fail whatever they hold
  // What the processor depends on is out from this call on, until that many outage verdicts
  // were given (it comes back during the backoff after the last one).
  std::size_t down_from_call = 0;
  int down_until_outages = 0;
  bool vouched_before = true;      // the delivery before the batch succeeded
  int give_up_after_outages = -1;  // give_up() at that outage verdict
};

Outcome run_script(std::size_t size, int max_attempts, const BisectScript& s) {
  Outcome r;
  r.seen.assign(size, 0);
  r.processed.assign(size, 0);
  BatchBisector b(size, max_attempts, s.vouched_before);
  int transient = s.transient;
  bool outage_just_declared = false;
  for (;;) {
    // No checkpoint may pass a record neither processed nor dead-lettered.
    for (std::size_t i = 0; i < b.resolved(); ++i) {
      const bool lettered = std::count(r.lettered.begin(), r.lettered.end(), i) > 0;
      if (r.processed[i] == 0 && !lettered) {
        ADD_FAILURE() << "record " << i << " is before resolved() " << b.resolved()
                      << " but neither processed nor dead-lettered";
        return r;
      }
    }
    if (const auto letter = b.letter()) {
      r.lettered.push_back(*letter);
      r.letter_attempts.push_back(b.failures_of(*letter));
      b.dead_lettered();
      continue;
    }
    const auto part = b.current();
    if (!part) break;
    const bool down = r.calls.size() >= s.down_from_call && r.outages < s.down_until_outages;
    bool fails = transient > 0 || down;
    if (transient > 0) --transient;
    for (std::size_t i = part->begin; i < part->end; ++i) {
      ++r.seen[i];
      if (s.bad.count(i)) fails = true;
    }
    if (outage_just_declared) r.after_outage.push_back(part->size());
    outage_just_declared = false;
    r.calls.push_back(*part);
    r.failed.push_back(fails);
    if (!fails) {
      for (std::size_t i = part->begin; i < part->end; ++i) {
        ++r.processed[i];
        r.processed_order.push_back(i);
      }
      b.succeeded();
      continue;
    }
    switch (b.failed()) {
      case BatchBisector::Next::kRetryAfterBackoff:
        ++r.backoffs;
        break;
      case BatchBisector::Next::kDeliverNow:
      case BatchBisector::Next::kDeadLetter:  // letter() is due
        break;
      case BatchBisector::Next::kLookAhead:
        ++r.look_aheads;
        EXPECT_EQ(b.resolved(), *b.suspect()) << "a checkpoint passes the suspect";
        break;
      case BatchBisector::Next::kOutage:
        ++r.backoffs;
        outage_just_declared = true;
        if (++r.outages == s.give_up_after_outages) b.give_up();
        break;
    }
    if (r.calls.size() > 100000) break;  // a bug, not a hang
  }
  return r;
}

Outcome run(std::size_t size, int max_attempts, const std::set<std::size_t>& bad,
            int transient = 0) {
  BisectScript s;
  s.bad = bad;
  s.transient = transient;
  return run_script(size, max_attempts, s);
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

// The processor sees the records it processes in shard order, and the sink gets the poison
// records in shard order (run() checks that no checkpoint passes one before it is set aside).
TEST(BatchBisectorTest, PartsFinishInShardOrder) {
  const std::set<std::size_t> bad{0, 3, 9, 30, 63};
  Outcome r = run(64, 2, bad);
  EXPECT_EQ(r.lettered, (std::vector<std::size_t>{0, 3, 9, 30, 63}));
  ASSERT_EQ(r.processed_order.size(), 59u);
  EXPECT_TRUE(std::is_sorted(r.processed_order.begin(), r.processed_order.end()));
  for (std::size_t i = 0; i < 64; ++i) EXPECT_EQ(r.processed[i], bad.count(i) ? 0 : 1) << i;
  EXPECT_EQ(r.outages, 0);
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

// Alone in its batch, a record's only neighbour is the one before it: it vouches when the
// delivery before the batch succeeded.
TEST(BatchBisectorTest, ASingleRecordBatchIsDeadLetteredAfterMaxAttempts) {
  Outcome r = run(1, 4, {0});
  EXPECT_EQ(r.calls.size(), 4u);
  EXPECT_EQ(r.letter_attempts, (std::vector<int>{4}));
}

TEST(BatchBisectorTest, ASingleRecordBatchNoNeighbourVouchesForIsHeldUntilGivenUp) {
  BisectScript s;
  s.bad = {0};
  s.vouched_before = false;
  s.give_up_after_outages = 5;
  Outcome r = run_script(1, 2, s);
  EXPECT_EQ(r.outages, 5);
  EXPECT_EQ(r.lettered, (std::vector<std::size_t>{0}));
  EXPECT_EQ(r.letter_attempts, (std::vector<int>{12})) << "5 x 2 before giving up, then 2";
}

// Every call fails while the processor's database is down: the search reaches the first
// record alone, the record after it fails too, and that is an outage, not a poison record:
// nothing is dead-lettered and the batch is delivered again as a whole until it succeeds.
TEST(BatchBisectorTest, AnOutageDeadLettersNothingAndRetriesTheBatchWhole) {
  for (int attempts : {1, 3}) {
    BisectScript s;
    s.down_until_outages = 10;
    Outcome r = run_script(100, attempts, s);
    EXPECT_TRUE(r.lettered.empty()) << attempts;
    EXPECT_EQ(r.outages, 10);
    for (std::size_t i = 0; i < 100; ++i) EXPECT_EQ(r.processed[i], 1) << i;
    for (std::size_t size : r.after_outage) EXPECT_EQ(size, 100u) << "retried as a whole";
    ASSERT_FALSE(r.calls.empty());
    EXPECT_EQ(r.calls.back().size(), 100u) << "the batch succeeded whole once it ended";
  }
}

// The outage begins in the middle of a search (a poison record's): the records not yet
// processed are retried as a whole, and only the poison record is dead-lettered.
TEST(BatchBisectorTest, AnOutageDuringASearchDeadLettersOnlyThePoisonRecord) {
  BisectScript s;
  s.bad = {40};
  s.down_from_call = 4;  // after [0,64) x 2, [0,32) and [32,64)
  s.down_until_outages = 3;
  Outcome r = run_script(64, 2, s);
  EXPECT_EQ(r.lettered, (std::vector<std::size_t>{40}));
  for (std::size_t i = 0; i < 64; ++i) EXPECT_EQ(r.processed[i], i == 40 ? 0 : 1) << i;
  EXPECT_EQ(r.outages, 3);
}

// The first record of a batch has no earlier neighbour in it: the records after it vouch,
// delivered while it waits (no checkpoint passes it), then it is dead-lettered.
TEST(BatchBisectorTest, AFirstRecordIsPoisonWhenTheRecordsAfterItSucceed) {
  BisectScript s;
  s.bad = {0};
  s.vouched_before = false;
  Outcome r = run_script(8, 2, s);
  EXPECT_EQ(r.lettered, (std::vector<std::size_t>{0}));
  EXPECT_EQ(r.look_aheads, 1);
  EXPECT_EQ(r.outages, 0);
  // 2 x [0,8), [0,4), [0,2), 2 x [0,1), then [1,2) vouches, [2,4), [4,8).
  ASSERT_EQ(r.calls.size(), 9u);
  EXPECT_EQ(r.calls[6].begin, 1u);
  EXPECT_EQ(r.calls[6].end, 2u);
  for (std::size_t i = 1; i < 8; ++i) EXPECT_EQ(r.processed[i], 1) << i;
}

// A look-ahead that fails is split towards the suspect: a poison record further on does not
// make the suspect's failure an outage.
TEST(BatchBisectorTest, ALookAheadThatFailsIsSplitTowardsTheSuspect) {
  const std::set<std::size_t> bad{5, 7};
  Outcome r = run(16, 2, bad);
  EXPECT_EQ(r.lettered, (std::vector<std::size_t>{5, 7}));
  EXPECT_EQ(r.outages, 0);
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(r.processed[i], bad.count(i) ? 0 : 1) << i;
}

// Two bad records side by side: the first one's neighbour fails too, which is what an outage
// looks like, so they are held (delivered again as a whole) until the outage limit gives up;
// then each goes to the sink and every other record is processed once.
TEST(BatchBisectorTest, BadRecordsSideBySideAreHeldAsAnOutageUntilGivenUp) {
  BisectScript s;
  s.bad = {4, 5};
  s.give_up_after_outages = 3;
  Outcome r = run_script(16, 2, s);
  EXPECT_EQ(r.outages, 3);
  EXPECT_EQ(r.lettered, (std::vector<std::size_t>{4, 5}));
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(r.processed[i], s.bad.count(i) ? 0 : 1) << i;
}

TEST(BatchBisectorTest, AnEmptyBatchHasNothingToDeliver) {
  BatchBisector b(0, 3, true);
  EXPECT_FALSE(b.current().has_value());
}

}  // namespace
}  // namespace kcl::lifecycle
