// from_epoch_seconds: the same microsecond as std::llround for every kind of timestamp Kinesis
// sends, halves included, and no overflow for values no timestamp has. plain_epoch_micros:
// the same microsecond as reading the text as a double, for the forms it takes, and false for
// every other form.
#include "kinesis/epoch_seconds.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

namespace kcl::kinesis {
namespace {

std::int64_t micros_of(double secs) {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             from_epoch_seconds(secs).time_since_epoch())
      .count();
}

TEST(EpochSecondsTest, RoundsAsLlroundForTimestampsAndHalves) {
  for (double secs : {0.0, 1.5, 1700000001.5, 1.700000000123e9, 1717243200.1234565, 0.0000005,
                      0.0000004999, 9e9, -0.0000005, -1.25, -1717243200.0000015}) {
    EXPECT_EQ(micros_of(secs), std::llround(secs * 1e6)) << secs;
  }
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> when(0, 2e9);
  for (int i = 0; i < 100000; ++i) {
    const double secs = when(rng);
    ASSERT_EQ(micros_of(secs), std::llround(secs * 1e6)) << secs;
    // Exact halves of a microsecond, where the two ways of rounding could part.
    const double half = (std::floor(secs * 1e3) + 0.0005) / 1e3;
    ASSERT_EQ(micros_of(half), std::llround(half * 1e6)) << half;
  }
}

TEST(EpochSecondsTest, TimesTheClockCannotHoldAreClampedAndNanIsTheEpoch) {
  using Clock = std::chrono::system_clock;
  EXPECT_EQ(micros_of(1e300), micros_of(1e20));
  // 1e11 seconds (the parser's bound, the year 5138) is past what the clock holds.
  EXPECT_EQ(micros_of(1e11), micros_of(1e300));
  EXPECT_GT(from_epoch_seconds(1e300), from_epoch_seconds(9e9));
  EXPECT_EQ(micros_of(-1e300), micros_of(-1e20));
  EXPECT_LT(from_epoch_seconds(-1e300), Clock::time_point());
  EXPECT_EQ(micros_of(std::numeric_limits<double>::infinity()), micros_of(1e300));
  EXPECT_EQ(micros_of(std::numeric_limits<double>::quiet_NaN()), 0);
}

// What the parser did before the fast path, for the forms the fast path takes.
std::int64_t via_double(const std::string& text) {
  return std::llround(std::strtod(text.c_str(), nullptr) * 1e6);
}

TEST(EpochSecondsTest, PlainTimestampsAreTheMicrosecondsTheDoubleGives) {
  std::mt19937_64 rng(9);
  std::uniform_int_distribution<std::int64_t> seconds(0, 2'000'000'000);
  std::uniform_int_distribution<int> places(0, 6);
  char buf[64];
  for (int i = 0; i < 100000; ++i) {
    const std::int64_t whole = seconds(rng);
    const int p = places(rng);
    std::int64_t frac = 0;
    std::int64_t ten = 1;
    for (int k = 0; k < p; ++k) ten *= 10;
    if (p > 0) frac = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(ten));
    if (p > 0) {
      std::snprintf(buf, sizeof buf, "%lld.%0*lld", static_cast<long long>(whole), p,
                    static_cast<long long>(frac));
    } else {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(whole));
    }
    std::int64_t micros = -1;
    ASSERT_TRUE(plain_epoch_micros(buf, micros)) << buf;
    ASSERT_EQ(micros, via_double(buf)) << buf;
    // The service's own form: one digit, a point, the rest, an exponent.
    std::snprintf(buf, sizeof buf, "%.12E", static_cast<double>(whole) + 0.001 * (i % 1000));
    ASSERT_TRUE(plain_epoch_micros(buf, micros)) << buf;
    ASSERT_EQ(micros, via_double(buf)) << buf;
  }
  std::int64_t micros = -1;
  for (const char* text : {"1.714478464195E9", "1.714478464195e+9", "17144784641950E-4", "0", "0.5",
                           "1717243200.123 \n", "1999999999.999999", "1E9"}) {
    ASSERT_TRUE(plain_epoch_micros(text, micros)) << text;
    EXPECT_EQ(micros, via_double(text)) << text;
  }
  // Up to the parser's bound of 1e11 seconds, exact where a double no longer is.
  ASSERT_TRUE(plain_epoch_micros("99999999999.999999", micros));
  EXPECT_EQ(micros, 99'999'999'999'999'999);
  ASSERT_TRUE(plain_epoch_micros("1E11", micros));
  EXPECT_EQ(micros, 100'000'000'000'000'000);
}

TEST(EpochSecondsTest, OtherNumberFormsAreLeftToTheDoubleParser) {
  std::int64_t micros = 42;
  for (const char* text : {"",
                           "-1",
                           "+1",
                           "1.",
                           ".5",
                           "01",
                           "00.5",
                           "1e",
                           "1E+",
                           "1.5x",
                           "1.0000001",
                           "1e-7",
                           "100000000001",
                           "1.5E12",
                           "1E1000",
                           "1E0001",
                           "123456789012345678",
                           "1 2",
                           "null",
                           "\"1\"",
                           "0x10",
                           "1.2.3",
                           "1e5e5",
                           "NaN",
                           "Infinity"}) {
    EXPECT_FALSE(plain_epoch_micros(text, micros)) << text;
  }
  EXPECT_EQ(micros, 42);
}

}  // namespace
}  // namespace kcl::kinesis
