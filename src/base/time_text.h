// base/time_text.h: wall times as text for people and wire formats.
//
// Thread safety: pure functions.
#pragma once

#include <chrono>
#include <ctime>
#include <string>

namespace kcl::base {

// "2026-11-25T03:00:00Z" (UTC, whole seconds).
inline std::string iso8601_seconds(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace kcl::base
