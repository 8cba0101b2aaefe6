// Backoff arithmetic, jitter bounds and determinism, and which error types are retried.
#include "aws/retry.h"

#include <gtest/gtest.h>

#include <set>

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

}  // namespace
}  // namespace kcl::aws
