// Backoff arithmetic, jitter bounds and determinism, which error types and status codes are
// retried in each scope, the retry quota's costs (a timeout by its flag, not its text), and
// the series rules of the records sources and the worker's start.
#include "aws/retry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

namespace kcl::aws {
namespace {

using std::chrono::milliseconds;

RetryConfig config(int base_ms, int cap_ms) {
  RetryConfig c;
  c.base_delay = milliseconds(base_ms);
  c.max_backoff = milliseconds(cap_ms);
  return c;
}

TEST(BackoffTest, CeilingDoublesUpToTheCap) {
  RetryConfig c = config(50, 5000);
  EXPECT_EQ(backoff_ceiling(c, 0), milliseconds(50));
  EXPECT_EQ(backoff_ceiling(c, 1), milliseconds(100));
  EXPECT_EQ(backoff_ceiling(c, 2), milliseconds(200));
  EXPECT_EQ(backoff_ceiling(c, 6), milliseconds(3200));
  EXPECT_EQ(backoff_ceiling(c, 7), milliseconds(5000));
  EXPECT_EQ(backoff_ceiling(c, 60), milliseconds(5000));
  EXPECT_EQ(backoff_ceiling(c, 1000), milliseconds(5000));  // no overflow
  EXPECT_EQ(backoff_ceiling(c, -3), milliseconds(50));
}

TEST(BackoffTest, FullJitterStaysWithinZeroAndTheCeiling) {
  RetryConfig c = config(50, 5000);
  JitterSource rng(42);
  for (int retry = 0; retry < 12; ++retry) {
    milliseconds lo = milliseconds::max();
    milliseconds hi = milliseconds::min();
    for (int i = 0; i < 2000; ++i) {
      milliseconds d = full_jitter_backoff(c, retry, rng.next());
      ASSERT_GE(d, milliseconds(0));
      ASSERT_LE(d, backoff_ceiling(c, retry));
      lo = std::min(lo, d);
      hi = std::max(hi, d);
    }
    // Full jitter spreads over the whole range, not just near the ceiling.
    EXPECT_LE(lo, backoff_ceiling(c, retry) / 10) << retry;
    EXPECT_GE(hi, backoff_ceiling(c, retry) * 9 / 10) << retry;
  }
}

TEST(BackoffTest, EdgesOfTheRandomRangeMapToTheEdgesOfTheDelay) {
  RetryConfig c = config(100, 1000);
  EXPECT_EQ(full_jitter_backoff(c, 0, 0), milliseconds(0));
  EXPECT_EQ(full_jitter_backoff(c, 0, 100), milliseconds(100));
  EXPECT_EQ(full_jitter_backoff(c, 0, 101), milliseconds(0));
  EXPECT_LE(full_jitter_backoff(c, 3, ~0ULL), milliseconds(800));
  EXPECT_EQ(full_jitter_backoff(config(0, 0), 5, 12345), milliseconds(0));
}

TEST(BackoffTest, SeededJitterIsDeterministic) {
  JitterSource a(7);
  JitterSource b(7);
  JitterSource other(8);
  std::vector<std::uint64_t> va, vb, vo;
  for (int i = 0; i < 10; ++i) {
    va.push_back(a.next());
    vb.push_back(b.next());
    vo.push_back(other.next());
  }
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vo);
  JitterSource unseeded;
  std::set<std::uint64_t> distinct;
  for (int i = 0; i < 10; ++i) distinct.insert(unseeded.next());
  EXPECT_GT(distinct.size(), 5u);
}

TEST(RetryableTest, ThrottlingTypes) {
  for (const char* t :
       {"ThrottlingException", "ProvisionedThroughputExceededException", "LimitExceededException",
        "RequestLimitExceeded", "TooManyRequestsException", "Throttling", "RequestThrottled",
        "SlowDown", "TransactionInProgressException", "RequestThrottledException",
        "BandwidthLimitExceeded", "PriorRequestNotComplete"}) {
    EXPECT_TRUE(is_throttling_error(t)) << t;
  }
  for (const char* t : {"ValidationException", "ResourceNotFoundException", "", "throttling"}) {
    EXPECT_FALSE(is_throttling_error(t)) << t;
  }
  EXPECT_TRUE(is_transient_error("InternalFailure"));
  EXPECT_TRUE(is_transient_error("ServiceUnavailable"));
  EXPECT_FALSE(is_transient_error("ValidationException"));
}

TEST(RetryableTest, OnlyUnavailableIsRetried) {
  EXPECT_TRUE(is_retryable(StatusCode::kUnavailable));
  for (StatusCode c :
       {StatusCode::kInvalidArgument, StatusCode::kConditionFailed, StatusCode::kNotFound,
        StatusCode::kPermissionDenied, StatusCode::kExpiredIterator, StatusCode::kInternal,
        StatusCode::kDeadlineExceeded}) {
    EXPECT_FALSE(is_retryable(c)) << to_string(c);
  }
}

constexpr StatusCode kEveryFailure[] = {
    StatusCode::kUnavailable,      StatusCode::kConditionFailed,  StatusCode::kLeaseLost,
    StatusCode::kNotFound,         StatusCode::kAlreadyExists,    StatusCode::kExpiredIterator,
    StatusCode::kInvalidArgument,  StatusCode::kPermissionDenied, StatusCode::kFailedPrecondition,
    StatusCode::kDeadlineExceeded, StatusCode::kCancelled,        StatusCode::kInternal};

TEST(RetryableTest, EachScopeRetriesItsCodesAndNoOther) {
  for (StatusCode c : kEveryFailure) {
    EXPECT_EQ(retryable(c, RetryScope::kCall), c == StatusCode::kUnavailable) << to_string(c);
    // Status::retryable() is the same rule as a call's.
    EXPECT_EQ(Status(c, "x").retryable(), retryable(c, RetryScope::kCall)) << to_string(c);
    const bool series = c == StatusCode::kUnavailable || c == StatusCode::kDeadlineExceeded ||
                        c == StatusCode::kInternal;
    EXPECT_EQ(retryable(c, RetryScope::kSeries), series) << to_string(c);
  }
}

TEST(RetryQuotaTest, ATimeoutCostsMoreByItsFlagNotItsText) {
  RetryQuota q(100);
  int taken = 0;
  ASSERT_TRUE(q.acquire(Status(StatusCode::kUnavailable, "HTTP 503"), &taken));
  EXPECT_EQ(taken, RetryQuota::kRetryCost);
  // The words alone do not make a timeout any more: only the transport's mark does.
  ASSERT_TRUE(q.acquire(Status(StatusCode::kUnavailable, "the request timed out"), &taken));
  EXPECT_EQ(taken, 2 * RetryQuota::kRetryCost);
  ASSERT_TRUE(q.acquire(Status(StatusCode::kUnavailable, "no answer").as_timeout(), &taken));
  EXPECT_EQ(taken, 2 * RetryQuota::kRetryCost + RetryQuota::kTimeoutCost);
  ASSERT_TRUE(q.acquire(Status(StatusCode::kDeadlineExceeded, "deadline"), &taken));
  EXPECT_EQ(taken, 2 * RetryQuota::kRetryCost + 2 * RetryQuota::kTimeoutCost);
  EXPECT_EQ(q.available(), 100 - taken);
}

TEST(RetryQuotaTest, TheTimeoutMarkSurvivesContext) {
  const Status t = Status(StatusCode::kUnavailable, "no answer").as_timeout();
  EXPECT_TRUE(t.timed_out());
  EXPECT_TRUE(t.with_context("GetRecords: ").timed_out());
  EXPECT_FALSE(Status(StatusCode::kUnavailable, "timed out").timed_out());
}

TEST(RetryPolicyTest, ACallRetriesOnlyUnavailable) {
  RetryPolicy policy(config(50, 5000), 1);
  int taken = 0;
  EXPECT_TRUE(policy.next_delay(Status(StatusCode::kUnavailable, "503"), 0, &taken));
  for (StatusCode c : {StatusCode::kInternal, StatusCode::kDeadlineExceeded,
                       StatusCode::kInvalidArgument, StatusCode::kNotFound}) {
    EXPECT_FALSE(policy.next_delay(Status(c, "x"), 0, &taken)) << to_string(c);
  }
  EXPECT_EQ(taken, RetryQuota::kRetryCost) << "a failure not retried takes nothing";
}

// The delays of `n` failures of `code` in a row, until the series gives up (then shorter).
std::vector<milliseconds> delays(RetrySeries& s, StatusCode code, int n) {
  std::vector<milliseconds> out;
  for (int i = 0; i < n; ++i) {
    auto d = s.next_delay(Status(code, "x"));
    if (!d) break;
    out.push_back(*d);
  }
  return out;
}

TEST(RetrySeriesTest, ARecordsSourceRetriesTransientFailuresForEverWithinItsBackoff) {
  RetrySeries s(SeriesRule::records_source(milliseconds(10), milliseconds(400)), 7);
  const auto d = delays(s, StatusCode::kUnavailable, 200);
  ASSERT_EQ(d.size(), 200u);
  for (std::size_t i = 0; i < d.size(); ++i) {
    EXPECT_LE(d[i], milliseconds(std::min<std::int64_t>(400, 10LL << std::min<std::size_t>(i, 20))))
        << i;
  }
  EXPECT_EQ(delays(s, StatusCode::kDeadlineExceeded, 50).size(), 50u);
  EXPECT_EQ(s.failures_in_a_row(), 250);
  s.on_success();
  EXPECT_EQ(s.failures_in_a_row(), 0);
}

TEST(RetrySeriesTest, ARecordsSourceGivesUpOnTheSixthMalformedAnswerSinceItsLastSuccess) {
  RetrySeries s(SeriesRule::records_source(milliseconds(10), milliseconds(400)), 7);
  EXPECT_EQ(delays(s, StatusCode::kInternal, 10).size(), 5u);
  RetrySeries t(SeriesRule::records_source(milliseconds(10), milliseconds(400)), 7);
  EXPECT_EQ(delays(t, StatusCode::kInternal, 3).size(), 3u);
  EXPECT_EQ(delays(t, StatusCode::kUnavailable, 8).size(), 8u) << "throttles do not count";
  EXPECT_EQ(delays(t, StatusCode::kInternal, 10).size(), 2u) << "nor do they reset the count";
  RetrySeries u(SeriesRule::records_source(milliseconds(10), milliseconds(400)), 7);
  EXPECT_EQ(delays(u, StatusCode::kInternal, 5).size(), 5u);
  u.on_success();
  EXPECT_EQ(delays(u, StatusCode::kInternal, 10).size(), 5u) << "a success resets it";
}

TEST(RetrySeriesTest, FinalCodesEndEverySeries) {
  for (SeriesRule rule :
       {SeriesRule::records_source(milliseconds(10), milliseconds(400)),
        SeriesRule::fan_out(milliseconds(10), milliseconds(400)), SeriesRule::start_up()}) {
    for (StatusCode c : kEveryFailure) {
      if (retryable(c, RetryScope::kSeries)) continue;
      RetrySeries s(rule, 3);
      EXPECT_FALSE(s.next_delay(Status(c, "x"))) << to_string(c);
    }
  }
}

TEST(RetrySeriesTest, AFanOutSubscriptionDoesNotRetryAMalformedRequest) {
  RetrySeries s(SeriesRule::fan_out(milliseconds(10), milliseconds(400)), 7);
  EXPECT_FALSE(s.next_delay(Status(StatusCode::kInternal, "cannot sign")));
  RetrySeries t(SeriesRule::fan_out(milliseconds(10), milliseconds(400)), 7);
  EXPECT_EQ(delays(t, StatusCode::kUnavailable, 100).size(), 100u);
  EXPECT_EQ(delays(t, StatusCode::kDeadlineExceeded, 10).size(), 10u);
}

TEST(RetrySeriesTest, TheStartRetriesEightAttemptsInAllWithinItsBackoff) {
  for (StatusCode c :
       {StatusCode::kUnavailable, StatusCode::kDeadlineExceeded, StatusCode::kInternal}) {
    RetrySeries s(SeriesRule::start_up(), 11);
    const auto d = delays(s, c, 20);
    EXPECT_EQ(d.size(), 7u) << to_string(c) << ": 7 retries, 8 attempts";
    for (std::size_t i = 0; i < d.size(); ++i) {
      EXPECT_LE(d[i], milliseconds(std::min<std::int64_t>(6400, 100LL << i))) << i;
    }
  }
}

}  // namespace
}  // namespace kcl::aws
