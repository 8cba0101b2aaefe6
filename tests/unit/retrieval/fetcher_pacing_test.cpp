// ShardFetcher pacing: the call-rate limit, the shard's read budget (bytes a second),
// re-polling when behind, idling when caught up, backoff under throttling, and the per-call
// options.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "support/fetcher_fake_kinesis.h"

namespace kcl::retrieval {
namespace {

using namespace std::chrono_literals;
using testing::expect_all_in_order;
using testing::FakeKinesis;
using testing::FetcherHarness;
// The default least time between two GetRecords calls of a shard.
const std::chrono::milliseconds kMinCall = RetrievalConfig{}.min_call_interval;

TEST(FetcherPacingTest, NeverTwoCallsOfOneKindWithinMinCallInterval) {
  FetcherHarness h;
  h.fake->add_records(3000);
  RetrievalConfig cfg;
  cfg.max_records_per_call = 100;
  auto f = h.make(StartPosition::trim_horizon(), cfg);

  // A caller that steps far more often than it is told to (every 7 ms of clock).
  std::vector<kcl::Record> out;
  for (int i = 0; i < 100000 && out.size() < 3000; ++i) {
    FetchStep step = f->fetch_step();
    if (step.outcome == FetchOutcome::kNotDue) {
      EXPECT_GT(step.next_step_at, h.clock.now());
    }
    while (auto b = f->take_batch()) {
      for (auto& r : b->records) out.push_back(std::move(r));
    }
    h.clock.advance(7ms);
  }
  expect_all_in_order(out, 3000);

  ASSERT_EQ(h.fake->calls().size(), 1u + 30u);  // one iterator, 30 pages
  const auto pages = h.fake->calls_of("GetRecords");
  ASSERT_EQ(pages.size(), 30u);
  for (std::size_t i = 1; i < pages.size(); ++i) {
    EXPECT_GE(pages[i].at - pages[i - 1].at, kMinCall) << "GetRecords " << i - 1 << " and " << i;
  }
  // The service limits GetShardIterator and GetRecords each on its own: the new iterator is
  // used at once (the next step after it).
  EXPECT_LE(pages[0].at - h.fake->calls_of("GetShardIterator")[0].at, 7ms);
  EXPECT_EQ(f->calls_made(), 31u);
}

TEST(FetcherPacingTest, SteppingAgainWithoutTimePassingMakesNoCall) {
  FetcherHarness h;
  h.fake->add_records(10);
  auto f = h.make(StartPosition::trim_horizon());
  FetchStep it = f->fetch_step();
  EXPECT_EQ(it.outcome, FetchOutcome::kGotIterator);
  EXPECT_EQ(it.next_step_at, Clock::MonoTime{}) << "the first GetRecords is due at once";
  FetchStep first = f->fetch_step();
  EXPECT_EQ(first.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(first.next_step_at, h.clock.now() + kMinCall);
  h.fake->add_records(10);
  for (int i = 0; i < 10; ++i) {
    FetchStep s = f->fetch_step();
    EXPECT_EQ(s.outcome, FetchOutcome::kNotDue);
    EXPECT_EQ(s.next_step_at, first.next_step_at);
  }
  EXPECT_EQ(h.fake->call_count(), 2u);
  h.clock.advance(kMinCall - 1ms);
  EXPECT_EQ(f->fetch_step().outcome, FetchOutcome::kNotDue);
  h.clock.advance(1ms);
  FetchStep got = f->fetch_step();
  EXPECT_EQ(got.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(got.records_queued, 10u);
  EXPECT_EQ(h.fake->call_count(), 3u);
}

TEST(FetcherPacingTest, RepollsAtOnceWhenBehindAndIdlesWhenCaughtUp) {
  FetcherHarness h;
  h.fake->add_records(250);
  RetrievalConfig cfg;
  cfg.max_records_per_call = 100;
  cfg.min_call_interval = 200ms;  // the times below are in steps of it
  auto f = h.make(StartPosition::trim_horizon(), cfg);
  const auto t0 = h.clock.now();

  FetchStep s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kGotIterator);
  EXPECT_EQ(s.next_step_at, Clock::MonoTime{}) << "the new iterator is used at once";
  h.advance_to(s);

  s = f->fetch_step();  // 100 records, 150 behind
  ASSERT_EQ(s.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(s.records_queued, 100u);
  EXPECT_EQ(f->millis_behind_latest(), 5000);
  EXPECT_EQ(s.next_step_at, t0 + 200ms) << "behind: due again after min_call_interval";
  h.advance_to(s);

  s = f->fetch_step();  // 100 more
  ASSERT_EQ(s.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(s.next_step_at, t0 + 400ms);
  h.advance_to(s);

  s = f->fetch_step();  // the last 50: MillisBehindLatest 0, but records came back
  ASSERT_EQ(s.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(s.records_queued, 50u);
  EXPECT_EQ(f->millis_behind_latest(), 0);
  EXPECT_EQ(s.next_step_at, t0 + 600ms);
  h.advance_to(s);

  s = f->fetch_step();  // nothing: caught up
  ASSERT_EQ(s.outcome, FetchOutcome::kNoRecords);
  EXPECT_EQ(s.next_step_at, t0 + 600ms + 1s) << "caught up: idle_time_between_calls";
  EXPECT_EQ(f->queued_batches(), 3u) << "an empty response makes no batch";
  h.advance_to(s);

  s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kNoRecords);
  EXPECT_EQ(s.next_step_at, t0 + 1600ms + 1s);
  h.advance_to(s);

  // A new record: fetched at the next (idle-paced) call, then straight back to fast polling.
  h.fake->add_record("late");
  s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(s.next_step_at, t0 + 2600ms + 200ms);
  h.advance_to(s);

  // An empty response that says the shard is behind: poll again soon, still no batch.
  h.fake->set_millis_behind(3000);
  const std::size_t batches = f->queued_batches();
  s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kNoRecords);
  EXPECT_EQ(f->millis_behind_latest(), 3000);
  EXPECT_EQ(f->queued_batches(), batches);
  EXPECT_EQ(s.next_step_at, t0 + 2800ms + 200ms);
}

TEST(FetcherPacingTest, IdleTimeMeasuredFromTheResponse) {
  // A slow call: the idle pause starts when the response is handled, and min_call_interval
  // from when the call started.
  FetcherHarness h;
  RetrievalConfig cfg;
  cfg.idle_time_between_calls = 500ms;
  auto f = h.make(StartPosition::trim_horizon(), cfg);
  FetchStep s = f->fetch_step();
  h.advance_to(s);
  s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kNoRecords);
  EXPECT_EQ(s.next_step_at, h.clock.now() + 500ms);
}

// The delays of a storm of 40 throttles (base 200 ms, cap 10 s): they grow, the late ones far
// longer than the early ones and reaching toward the cap, and the capped ones differ (jitter).
void expect_growing_jittered_backoff(const std::vector<std::chrono::milliseconds>& delays) {
  const int storm = static_cast<int>(delays.size());
  const auto max_delay = *std::max_element(delays.begin(), delays.end());
  EXPECT_LE(max_delay, 10s);
  EXPECT_GT(max_delay, 5s);
  std::chrono::milliseconds early{0}, late{0};
  for (int k = 0; k < 3; ++k) early += delays[static_cast<std::size_t>(k)];
  for (int k = storm - 10; k < storm; ++k) late += delays[static_cast<std::size_t>(k)];
  EXPECT_GT(late / 10, early / 3 * 4);
  std::set<std::int64_t> distinct;
  for (int k = 10; k < storm; ++k) distinct.insert(delays[static_cast<std::size_t>(k)].count());
  EXPECT_GT(distinct.size(), 20u);
}

TEST(FetcherPacingTest, ThrottlingStormBacksOffWithJitterBoundedByMaxAndRecovers) {
  FetcherHarness h;
  h.fake->add_records(1000);
  RetrievalConfig cfg;
  cfg.max_records_per_call = 100;
  cfg.throttle_backoff_base = 200ms;
  cfg.throttle_backoff_max = 10s;
  auto f = h.make(StartPosition::trim_horizon(), cfg, /*seed=*/7);

  std::vector<kcl::Record> out;
  // Iterator + 2 pages.
  for (int i = 0; i < 3; ++i) {
    FetchStep s = f->fetch_step();
    h.advance_to(s);
  }
  while (auto b = f->take_batch()) {
    for (auto& r : b->records) out.push_back(std::move(r));
  }
  ASSERT_EQ(out.size(), 200u);

  constexpr int kStorm = 40;
  h.fake->fail_next("GetRecords", FakeKinesis::throttled(), kStorm);
  std::vector<std::chrono::milliseconds> delays;
  for (int k = 1; k <= kStorm; ++k) {
    const auto now = h.clock.now();
    FetchStep s = f->fetch_step();
    ASSERT_EQ(s.outcome, FetchOutcome::kRetrying) << "failure " << k;
    ASSERT_FALSE(f->finished());
    const auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(s.next_step_at - now);
    const std::chrono::milliseconds cap =
        std::min<std::chrono::milliseconds>(10s, 200ms * (std::int64_t{1} << std::min(k - 1, 20)));
    EXPECT_GE(delay, kMinCall) << "never faster than min_call_interval (failure " << k << ")";
    EXPECT_LE(delay, std::max<std::chrono::milliseconds>(cap, kMinCall)) << "failure " << k;
    delays.push_back(delay);
    h.advance_to(s);
  }
  EXPECT_EQ(f->throttles_seen(), static_cast<std::uint64_t>(kStorm));
  EXPECT_TRUE(f->terminal_error().ok());

  expect_growing_jittered_backoff(delays);

  // The storm passes: everything arrives, once, in order.
  h.run(*f, out, 1000, [&] { return out.size() >= 1000; });
  expect_all_in_order(out, 1000);

  // The backoff started over after the success: the next throttle waits the base at most
  // (here exactly min_call_interval, its floor).
  h.fake->add_records(1);
  h.fake->fail_next("GetRecords", FakeKinesis::throttled());
  FetchStep s;
  do {
    h.advance_to(s);
    s = f->fetch_step();
  } while (s.outcome == FetchOutcome::kNotDue || s.outcome == FetchOutcome::kNoRecords);
  ASSERT_EQ(s.outcome, FetchOutcome::kRetrying);
  EXPECT_EQ(s.next_step_at - h.clock.now(), kMinCall);
}

TEST(FetcherPacingTest, TimeoutsAndServerErrorsOnGetShardIteratorAreRetried) {
  FetcherHarness h;
  h.fake->add_records(5);
  auto f = h.make(StartPosition::trim_horizon());
  h.fake->fail_next("GetShardIterator",
                    Status(StatusCode::kDeadlineExceeded, "request timed out after 10000 ms"));
  h.fake->fail_next("GetShardIterator", Status(StatusCode::kUnavailable, "HTTP 500"));
  FetchStep s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kRetrying);
  h.advance_to(s);
  s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kRetrying);
  h.advance_to(s);
  s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kGotIterator);
  h.advance_to(s);
  s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(s.records_queued, 5u);
  EXPECT_EQ(f->throttles_seen(), 2u);
}

TEST(FetcherPacingTest, PassesTimeoutsAndAttemptsPerCall) {
  FetcherHarness h;
  h.fake->add_records(3);
  RetrievalConfig cfg;
  cfg.get_records_timeout = 12345ms;
  cfg.iterator_request_timeout = 2345ms;
  cfg.call_max_attempts = 1;
  cfg.max_records_per_call = 77;
  auto f = h.make(StartPosition::trim_horizon(), cfg);
  std::vector<kcl::Record> out;
  h.run(*f, out, 3);
  const auto its = h.fake->calls_of("GetShardIterator");
  const auto grs = h.fake->calls_of("GetRecords");
  ASSERT_EQ(its.size(), 1u);
  ASSERT_GE(grs.size(), 1u);
  EXPECT_EQ(its[0].options.request_timeout, 2345ms);
  EXPECT_EQ(its[0].options.max_attempts, 1);
  EXPECT_EQ(its[0].body.at("ShardIteratorType"), "TRIM_HORIZON");
  EXPECT_EQ(its[0].body.at("StreamName"), testing::kStream);
  EXPECT_EQ(its[0].body.at("ShardId"), testing::kShard);
  EXPECT_EQ(grs[0].options.request_timeout, 12345ms);
  EXPECT_EQ(grs[0].options.max_attempts, 1);
  EXPECT_EQ(grs[0].body.at("Limit"), 77);
}

// ---- the shard's read budget (RetrievalConfig::max_read_bytes_per_second, 2 MiB/s) ----

constexpr std::size_t kMiB = std::size_t{1} << 20;

// A record whose data and partition key ("pk") are `bytes` in all, as the service counts them.
void add_sized_record(FakeKinesis& fake, std::size_t bytes) {
  fake.add_record(std::string(bytes - 2, 'x'), "pk");
}

void drop_batches(ShardFetcher& f) {
  while (f.take_batch()) {
  }
}

// A fetcher that asks for one record a call, past its GetShardIterator.
std::unique_ptr<ShardFetcher> one_record_a_call(FetcherHarness& h, RetrievalConfig cfg = {}) {
  cfg.max_records_per_call = 1;
  auto f = h.make(StartPosition::trim_horizon(), cfg, /*seed=*/3);
  EXPECT_EQ(f->fetch_step().outcome, FetchOutcome::kGotIterator);
  return f;
}

TEST(FetcherPacingTest, ATenMiBAnswerHoldsTheNextCallFiveSeconds) {
  FetcherHarness h;
  add_sized_record(*h.fake, 10 * kMiB);  // the largest answer AWS gives
  h.fake->add_records(2);
  auto f = one_record_a_call(h);
  const auto t0 = h.clock.now();
  FetchStep s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(s.next_step_at, t0 + 5s) << "10 MiB at 2 MiB/s";
  drop_batches(*f);
  h.clock.advance(4999ms);
  EXPECT_EQ(f->fetch_step().outcome, FetchOutcome::kNotDue);
  h.clock.advance(1ms);
  s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kRecords) << "due 5 s after the 10 MiB call";
  EXPECT_EQ(s.next_step_at, t0 + 5s + kMinCall) << "a small answer: min_call_interval only";
  const auto pages = h.fake->calls_of("GetRecords");
  ASSERT_EQ(pages.size(), 2u);
  EXPECT_EQ(pages[1].at - pages[0].at, 5s);
}

// Reads the `n` records of the fake shard `per_call` at a time: every GetRecords call starts
// `apart` after the one before.
void expect_calls_apart(FetcherHarness& h, std::size_t n, int per_call,
                        std::chrono::milliseconds apart) {
  RetrievalConfig cfg;
  cfg.max_records_per_call = per_call;
  auto f = h.make(StartPosition::trim_horizon(), cfg);
  std::vector<kcl::Record> out;
  h.run(*f, out, 1000, [&] { return out.size() >= n; });
  ASSERT_EQ(out.size(), n);
  const auto pages = h.fake->calls_of("GetRecords");
  ASSERT_EQ(pages.size(), (n + static_cast<std::size_t>(per_call) - 1) / per_call);
  for (std::size_t i = 1; i < pages.size(); ++i) {
    EXPECT_EQ(pages[i].at - pages[i - 1].at, apart) << "GetRecords " << i - 1 << " and " << i;
  }
}

TEST(FetcherPacingTest, SmallAnswersArePacedByMinCallIntervalOnly) {
  FetcherHarness h;
  h.fake->add_records(3000);  // about 1.3 KB an answer of 100
  expect_calls_apart(h, 3000, 100, kMinCall);
}

TEST(FetcherPacingTest, AShardFarBehindIsReadAtTheByteRate) {
  // Behind (MillisBehindLatest > 0): each call as soon as the previous MiB is paid for.
  FetcherHarness h;
  for (int i = 0; i < 40; ++i) add_sized_record(*h.fake, 128 * 1024);  // 5 MiB
  expect_calls_apart(h, 40, 8, 500ms);                                 // 1 MiB an answer
}

TEST(FetcherPacingTest, PastTheFirstAnswerACallAsksForAboutOneSecondOfTheBudget) {
  // The Limit of each call: one second's budget of records of the last answer's mean size
  // (never more than max_records_per_call); without pacing by bytes, max_records_per_call.
  auto limits_and_gaps = [](std::size_t rate) {
    FetcherHarness h;
    for (int i = 0; i < 164; ++i) add_sized_record(*h.fake, 64 * 1024);
    RetrievalConfig cfg;
    cfg.max_records_per_call = 100;
    cfg.max_read_bytes_per_second = rate;
    auto f = h.make(StartPosition::trim_horizon(), cfg);
    std::vector<kcl::Record> out;
    h.run(*f, out, 1000, [&] { return out.size() >= 164; });
    EXPECT_EQ(out.size(), 164u);
    std::vector<std::pair<int, std::chrono::milliseconds>> seen;
    const auto pages = h.fake->calls_of("GetRecords");
    for (std::size_t i = 0; i < pages.size(); ++i) {
      seen.emplace_back(pages[i].body.at("Limit").get<int>(),
                        i == 0 ? 0ms
                               : std::chrono::duration_cast<std::chrono::milliseconds>(
                                     pages[i].at - pages[i - 1].at));
    }
    return seen;
  };
  using Seen = std::vector<std::pair<int, std::chrono::milliseconds>>;
  // 100 records (6.25 MiB: 3,125 ms), then 32 (2 MiB of 64 KiB records: 1 s) at a time.
  EXPECT_EQ(limits_and_gaps(2 * kMiB), (Seen{{100, 0ms}, {32, 3125ms}, {32, 1000ms}}));
  EXPECT_EQ(limits_and_gaps(0), (Seen{{100, 0ms}, {100, kMinCall}}));
}

TEST(FetcherPacingTest, TheBudgetIsChargedWhenTheAnswerArrivesWithOneSecondOfCredit) {
  // A slow answer: its bytes are paid for from its arrival, less the one second the budget
  // holds; a fast one from the call (the budget is empty at the start).
  FetcherHarness h;
  add_sized_record(*h.fake, 10 * kMiB);
  add_sized_record(*h.fake, 10 * kMiB);
  h.fake->add_records(1);
  auto f = one_record_a_call(h);
  std::chrono::milliseconds latency = 500ms;
  h.fake->during_call([&](const std::string&) { h.clock.advance(latency); });
  const auto t0 = h.clock.now();
  FetchStep s = f->fetch_step();  // answered at t0 + 0.5 s, within the second of credit
  ASSERT_EQ(s.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(s.next_step_at, t0 + 5s);
  drop_batches(*f);
  h.advance_to(s);
  latency = 2500ms;
  s = f->fetch_step();  // answered at t0 + 7.5 s: paid from t0 + 6.5 s
  ASSERT_EQ(s.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(s.next_step_at, t0 + 6500ms + 5s);
}

TEST(FetcherPacingTest, TheBudgetHoldsAtMostOneSecondAfterAnIdleSpell) {
  FetcherHarness h;
  add_sized_record(*h.fake, 10 * kMiB);
  auto f = h.make(StartPosition::trim_horizon());
  std::vector<kcl::Record> out;
  h.run(*f, out, 3);  // iterator, 10 MiB, the first empty answer
  ASSERT_EQ(out.size(), 1u);
  // Caught up: empty answers every idle_time_between_calls (1 s) for 20 s.
  FetchStep s;
  for (int i = 0; i < 20; ++i) {
    h.advance_to(s);
    s = f->fetch_step();
    if (s.outcome == FetchOutcome::kNotDue) continue;
    ASSERT_EQ(s.outcome, FetchOutcome::kNoRecords);
    EXPECT_EQ(s.next_step_at, h.clock.now() + 1s) << "caught up: idle_time_between_calls";
  }
  add_sized_record(*h.fake, 10 * kMiB);
  h.advance_to(s);
  s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(s.next_step_at, h.clock.now() + 4s) << "one second of credit, not twenty";
}

TEST(FetcherPacingTest, ACaughtUpShardIdlesAfterItsBudgetIsPaid) {
  FetcherHarness h;
  add_sized_record(*h.fake, 10 * kMiB);
  auto f = h.make(StartPosition::trim_horizon());
  ASSERT_EQ(f->fetch_step().outcome, FetchOutcome::kGotIterator);
  const auto t0 = h.clock.now();
  FetchStep s = f->fetch_step();  // the last record: MillisBehindLatest 0, but records came
  ASSERT_EQ(s.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(f->millis_behind_latest(), 0);
  EXPECT_EQ(s.next_step_at, t0 + 5s);
  drop_batches(*f);
  h.advance_to(s);
  s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kNoRecords);
  EXPECT_EQ(s.next_step_at, t0 + 5s + 1s) << "idle_time_between_calls from the empty answer";
  h.advance_to(s);
  s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kNoRecords);
  EXPECT_EQ(s.next_step_at, t0 + 7s);
}

TEST(FetcherPacingTest, ZeroBytesASecondTurnsTheBudgetOff) {
  FetcherHarness h;
  add_sized_record(*h.fake, 10 * kMiB);
  h.fake->add_records(1);
  RetrievalConfig cfg;
  cfg.max_read_bytes_per_second = 0;
  auto f = one_record_a_call(h, cfg);
  const auto t0 = h.clock.now();
  FetchStep s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kRecords);
  EXPECT_EQ(s.next_step_at, t0 + kMinCall);
}

TEST(FetcherPacingTest, AThrottleAfterAPacedCallBacksOffAndTheBudgetStillHolds) {
  // Another reader of the shard spent its budget: the paced call is throttled all the same.
  FetcherHarness h;
  add_sized_record(*h.fake, 10 * kMiB);
  add_sized_record(*h.fake, 10 * kMiB);
  auto f = one_record_a_call(h);
  const auto t0 = h.clock.now();
  FetchStep s = f->fetch_step();
  ASSERT_EQ(s.next_step_at, t0 + 5s);
  drop_batches(*f);
  h.advance_to(s);
  h.fake->fail_next("GetRecords", FakeKinesis::throttled(), 2);
  s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kRetrying);
  EXPECT_GE(s.next_step_at, t0 + 5s + kMinCall) << "never sooner than min_call_interval";
  h.advance_to(s);
  s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kRetrying);
  h.advance_to(s);
  ASSERT_LT(h.clock.now(), t0 + 6s);
  s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kRecords);
  // The refused calls read nothing: the budget refilled from t0 + 5 s while they backed off.
  EXPECT_EQ(s.next_step_at, t0 + 10s) << "the next 10 MiB paid for at the same rate";
  EXPECT_EQ(f->throttles_seen(), 2u);
}

}  // namespace
}  // namespace kcl::retrieval
