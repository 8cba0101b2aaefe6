// base/repeat_report.h: when a failure that repeats is worth a log line. The first of a
// series is reported, then the 3rd and each power of ten (10th, 100th, ...), each with its
// count, so a failure that repeats every second fills no log.
#pragma once

#include <cstdint>

namespace kcl::base {

inline bool worth_reporting(std::uint64_t nth) noexcept {
  if (nth == 1 || nth == 3) return true;
  if (nth < 10) return false;
  while (nth % 10 == 0) nth /= 10;
  return nth == 1;
}

}  // namespace kcl::base
