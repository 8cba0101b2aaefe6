#include "kcl/logging.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>

namespace kcl {
namespace {

std::string_view level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO ";
    case LogLevel::kWarn:
      return "WARN ";
    case LogLevel::kError:
      return "ERROR";
    case LogLevel::kOff:
      break;
  }
  return "OFF  ";
}

class StderrLogger final : public Logger {
 public:
  explicit StderrLogger(LogLevel threshold) : threshold_(threshold) {}
  bool enabled(LogLevel level) const override {
    return level != LogLevel::kOff && level >= threshold_;
  }
  void log(LogLevel level, std::string_view component, std::string_view message) override {
    if (!enabled(level)) return;
    auto now = std::chrono::system_clock::now();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
    std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char stamp[64];
    std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(ms % 1000));
    std::string line;
    line.reserve(64 + component.size() + message.size());
    line += stamp;
    line += ' ';
    line += level_name(level);
    line += " [";
    line += component;
    line += "] ";
    line += message;
    line += '\n';
    // One write per line so that lines of concurrent threads do not interleave.
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t off = 0;
    while (off < line.size()) {
      ssize_t n = ::write(2, line.data() + off, line.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
  }

 private:
  LogLevel threshold_;
  std::mutex mu_;
};

}  // namespace

std::shared_ptr<Logger> make_stderr_logger(LogLevel threshold) {
  return std::make_shared<StderrLogger>(threshold);
}

std::shared_ptr<Logger> make_default_logger() {
  LogLevel level = LogLevel::kInfo;
  if (const char* env = std::getenv("KCL_LOG_LEVEL")) {
    std::string v(env);
    if (v == "debug")
      level = LogLevel::kDebug;
    else if (v == "info")
      level = LogLevel::kInfo;
    else if (v == "warn" || v == "warning")
      level = LogLevel::kWarn;
    else if (v == "error")
      level = LogLevel::kError;
    else if (v == "off" || v == "none")
      level = LogLevel::kOff;
  }
  return make_stderr_logger(level);
}

}  // namespace kcl
