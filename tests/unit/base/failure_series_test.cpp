// FailureSeries: a failing call is reported at its 1st, 3rd and each power-of-ten failure in
// a row, with its count and duration, and once when it recovers.
#include "base/failure_series.h"

#include <gtest/gtest.h>

namespace kcl::base {
namespace {

using namespace std::chrono_literals;

TEST(FailureSeriesTest, ReportsTheStartCountsAndTheEndOfASeries) {
  FailureSeries s("heartbeat");
  const Clock::MonoTime t0{};
  const Status down(StatusCode::kUnavailable, "timed out");
  EXPECT_FALSE(s.succeeded(t0)) << "no series: nothing to say";
  auto first = s.failed(down, t0);
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, "heartbeat failed: " + down.to_string());
  EXPECT_FALSE(s.failed(down, t0 + 1s));
  auto third = s.failed(down, t0 + 2s);
  ASSERT_TRUE(third);
  EXPECT_EQ(*third, "heartbeat failed 3 times in a row over 2.0 s: " + down.to_string());
  int reported = 0;
  for (int n = 4; n <= 100; ++n) reported += s.failed(down, t0 + std::chrono::seconds(n)) ? 1 : 0;
  EXPECT_EQ(reported, 2) << "the 10th and the 100th";
  EXPECT_EQ(s.consecutive(), 100u);
  ASSERT_TRUE(s.since());
  EXPECT_EQ(*s.since(), t0);
  auto end = s.succeeded(t0 + 101s);
  ASSERT_TRUE(end);
  EXPECT_EQ(*end, "heartbeat recovered after 100 failures in 101.0 s");
  EXPECT_EQ(s.consecutive(), 0u);
  EXPECT_FALSE(s.since());
  EXPECT_FALSE(s.succeeded(t0 + 102s));
  auto again = s.failed(down, t0 + 103s);
  ASSERT_TRUE(again) << "a new series starts over";
  EXPECT_EQ(*again, "heartbeat failed: " + down.to_string());
}

}  // namespace
}  // namespace kcl::base
