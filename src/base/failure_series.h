// base/failure_series.h: one kind of call that may fail many times in a row (a heartbeat, a
// poll, a leader pass), and what is worth saying about it. The first failure of a series is
// reported, then the 3rd and each power of ten with the count (base/repeat_report.h), and the
// first success after a series says how long it lasted: a failure that repeats every second
// fills no log, and an operator sees when it began and when it ended.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>

#include "base/repeat_report.h"
#include "kcl/clock.h"
#include "kcl/status.h"

namespace kcl::base {

class FailureSeries {
 public:
  // `what` names the call in the messages, e.g. "heartbeat" or "own-entry poll".
  explicit FailureSeries(std::string what) : what_(std::move(what)) {}

  // A failure. Returns the line to log when this one is worth reporting.
  std::optional<std::string> failed(const Status& why, Clock::MonoTime now) {
    std::lock_guard<std::mutex> lock(mu_);
    if (count_ == 0) since_ = now;
    ++count_;
    last_ = why;
    if (!worth_reporting(count_)) return std::nullopt;
    if (count_ == 1) return what_ + " failed: " + why.to_string();
    return what_ + " failed " + std::to_string(count_) + " times in a row over " +
           seconds_text(now - since_) + ": " + why.to_string();
  }

  // A success. Returns the line to log when it ends a series.
  std::optional<std::string> succeeded(Clock::MonoTime now) {
    std::lock_guard<std::mutex> lock(mu_);
    if (count_ == 0) return std::nullopt;
    std::string line = what_ + " recovered after " + std::to_string(count_) +
                       (count_ == 1 ? " failure" : " failures") + " in " +
                       seconds_text(now - since_);
    count_ = 0;
    return line;
  }

  // Failures in a row so far (0 when the last call succeeded).
  std::uint64_t consecutive() const {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }
  // When the current series began; empty when none is running.
  std::optional<Clock::MonoTime> since() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (count_ == 0) return std::nullopt;
    return since_;
  }
  Status last_failure() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }
  const std::string& what() const { return what_; }

 private:
  static std::string seconds_text(Clock::MonoTime::duration d) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
    char text[32];
    std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms) / 1000.0);
    return text;
  }

  const std::string what_;
  mutable std::mutex mu_;
  std::uint64_t count_ = 0;
  Clock::MonoTime since_{};
  Status last_;
};

}  // namespace kcl::base
