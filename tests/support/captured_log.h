// A Logger that keeps the messages of the lines at or above a level, for tests that check
// what was logged (and how often).
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/logging.h"

namespace kcl::testing {

class CapturedLog final : public Logger {
 public:
  explicit CapturedLog(LogLevel threshold = LogLevel::kDebug) : threshold_(threshold) {}
  bool enabled(LogLevel level) const override { return level >= threshold_; }
  void log(LogLevel level, std::string_view, std::string_view message) override {
    if (!enabled(level)) return;
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(message);
  }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  const LogLevel threshold_;
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

}  // namespace kcl::testing
