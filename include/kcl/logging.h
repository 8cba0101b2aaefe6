// kcl/logging.h: where kcl-cpp writes what it has to say. Implement Logger to forward to the
// application's logging; the default writes lines to stderr at kInfo and above (override the
// threshold with the KCL_LOG_LEVEL environment variable: debug, info, warn, error, off).
//
// kcl-cpp never logs secrets (keys, session tokens, signatures).
//
// Thread safety: kcl-cpp calls a Logger from several threads at once; implementations must
// be thread-safe.
#pragma once

#include <memory>
#include <string_view>

namespace kcl {

enum class LogLevel { kDebug, kInfo, kWarn, kError, kOff };

class Logger {
 public:
  virtual ~Logger() = default;
  virtual bool enabled(LogLevel level) const = 0;
  // `component` is e.g. "worker", "lease", "consumer shardId-000000000001".
  virtual void log(LogLevel level, std::string_view component, std::string_view message) = 0;
};

// kText: "2026-11-22T10:00:00.123Z WARN  [consumer shardId-1] message";
// kJson: one JSON object per line for log pipelines:
//   {"time":"2026-11-22T10:00:00.123Z","level":"WARN","component":"consumer shardId-1",
//    "message":"..."}
enum class LogFormat { kText, kJson };
// On stderr, one write per line (lines of concurrent threads never interleave).
std::shared_ptr<Logger> make_stderr_logger(LogLevel threshold, LogFormat format = LogFormat::kText);
// The threshold from KCL_LOG_LEVEL (debug, info, warn, error, off), else kInfo; the format
// from KCL_LOG_FORMAT (text, json), else text.
std::shared_ptr<Logger> make_default_logger();

}  // namespace kcl
