// kinesis/epoch_seconds.h: Kinesis timestamps (seconds since the epoch, with a fraction, as
// JSON numbers) to time points, to the microsecond.
//
// Thread safety: a pure function.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace kcl::kinesis {

// Microseconds since the epoch as a time point. A time system_clock cannot hold (with
// libstdc++'s nanoseconds, before 1678 or after 2262) is clamped to the nearest one it can.
inline std::chrono::system_clock::time_point from_epoch_micros(std::int64_t micros) noexcept {
  using Clock = std::chrono::system_clock;
  constexpr std::int64_t kMax =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::duration::max()).count();
  constexpr std::int64_t kMin =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::duration::min()).count();
  micros = micros > kMax ? kMax : micros < kMin ? kMin : micros;
  return Clock::time_point(
      std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(micros)));
}

// Seconds as a time point, rounded to the microsecond half away from zero, as std::llround
// does, without its library call (one per record on the decoding path): the truncation and
// the fraction it leaves are exact for any double. Clamped as from_epoch_micros.
inline std::chrono::system_clock::time_point from_epoch_seconds(double secs) noexcept {
  constexpr double kLimit = 9.2e18;  // below 2^63, far beyond the clock's range
  const double x = secs * 1e6;
  std::int64_t micros = 0;
  if (x >= kLimit) {
    micros = static_cast<std::int64_t>(kLimit);
  } else if (x <= -kLimit) {
    micros = -static_cast<std::int64_t>(kLimit);
  } else if (x == x) {                      // NaN stays 0
    micros = static_cast<std::int64_t>(x);  // toward zero
    const double frac = x - static_cast<double>(micros);
    if (frac >= 0.5) ++micros;
    if (frac <= -0.5) --micros;
  }
  return from_epoch_micros(micros);
}

// The exact microseconds of a number of seconds written as Kinesis writes arrival times:
// "1717243200.123", or "1.717243200123E9" as the service itself does. Digits (no leading
// zero unless the only one before the point), optionally a point and digits, optionally an
// exponent, then nothing but JSON whitespace; at most 17 digits, a whole number of
// microseconds, at most 1e11 seconds. Returns false for anything else (a sign, a finer
// fraction, a larger value, a malformed number), which the caller reads as a double.
inline bool plain_epoch_micros(std::string_view text, std::int64_t& micros) noexcept {
  const std::size_t n = text.size();
  std::size_t i = 0;
  std::int64_t digits_value = 0;
  int digits = 0;
  auto take_digits = [&] {
    const std::size_t start = i;
    for (; i < n && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (++digits > 17) return std::size_t{0};
      digits_value = digits_value * 10 + (text[i] - '0');
    }
    return i - start;
  };
  const std::size_t whole = take_digits();
  if (whole == 0 || (text[0] == '0' && whole > 1)) return false;
  int scale = 6;  // the power of ten that turns digits_value into microseconds
  if (i < n && text[i] == '.') {
    ++i;
    const std::size_t fraction = take_digits();
    if (fraction == 0) return false;
    scale -= static_cast<int>(fraction);
  }
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool negative = false;
    if (i < n && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
    int exponent = 0;
    const std::size_t start = i;
    for (; i < n && text[i] >= '0' && text[i] <= '9' && i - start < 3; ++i) {
      exponent = exponent * 10 + (text[i] - '0');
    }
    if (i == start || (i < n && text[i] >= '0' && text[i] <= '9')) return false;
    scale += negative ? -exponent : exponent;
  }
  for (; i < n; ++i) {
    if (text[i] != ' ' && text[i] != '\n' && text[i] != '\r' && text[i] != '\t') return false;
  }
  // Zeros past the microsecond ("8.969643510000E+05") change nothing.
  while (scale < 0 && digits_value % 10 == 0 && digits_value != 0) {
    digits_value /= 10;
    ++scale;
  }
  if (digits_value == 0) scale = 0;
  if (scale < 0 || scale > 17) return false;
  constexpr std::int64_t kMaxMicros = 100'000'000'000'000'000;  // 1e11 seconds
  std::int64_t value = digits_value;
  for (int s = 0; s < scale; ++s) {
    if (value > kMaxMicros / 10) return false;
    value *= 10;
  }
  if (value > kMaxMicros) return false;
  micros = value;
  return true;
}

}  // namespace kcl::kinesis
