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

// `text` as the inside of a JSON string.
void append_json_escaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

class StderrLogger final : public Logger {
 public:
  StderrLogger(LogLevel threshold, LogFormat format) : threshold_(threshold), format_(format) {}
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
    line.reserve(96 + component.size() + message.size());
    if (format_ == LogFormat::kJson) {
      line += "{\"time\":\"";
      line += stamp;
      line += "\",\"level\":\"";
      line += trimmed(level_name(level));
      line += "\",\"component\":\"";
      append_json_escaped(line, component);
      line += "\",\"message\":\"";
      append_json_escaped(line, message);
      line += "\"}\n";
    } else {
      line += stamp;
      line += ' ';
      line += level_name(level);
      line += " [";
      line += component;
      line += "] ";
      line += message;
      line += '\n';
    }
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
  LogFormat format_;
  std::mutex mu_;
};

}  // namespace

std::shared_ptr<Logger> make_stderr_logger(LogLevel threshold, LogFormat format) {
  return std::make_shared<StderrLogger>(threshold, format);
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
  LogFormat format = LogFormat::kText;
  if (const char* env = std::getenv("KCL_LOG_FORMAT")) {
    if (std::string(env) == "json") format = LogFormat::kJson;
  }
  return make_stderr_logger(level, format);
}

}  // namespace kcl
