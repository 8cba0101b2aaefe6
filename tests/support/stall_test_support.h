// What the stall tests share (worker_stall_test.cpp, fanout/fanout_stall_test.cpp): a logger
// that timestamps each line, a wait for a line, a gate that holds a processor callback, the
// worker's HTTP endpoint read as JSON and text.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kcl/logging.h"
#include "support/httplib_client.h"

namespace kcl::stall_test {

using namespace std::chrono_literals;
using Time = std::chrono::steady_clock::time_point;

// Every line at or above info, with when it was logged.
class TimedLog final : public Logger {
 public:
  struct Line {
    Time at;
    std::string text;
  };
  bool enabled(LogLevel level) const override { return level >= LogLevel::kInfo; }
  void log(LogLevel level, std::string_view, std::string_view message) override {
    if (!enabled(level)) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back({std::chrono::steady_clock::now(), std::string(message)});
    }
    cv_.notify_all();
  }
  // Waits up to `timeout` for a line containing every one of `parts`; the first such line.
  std::optional<Line> wait_for(const std::vector<std::string>& parts,
                               std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<Line> found;
    cv_.wait_for(lock, timeout, [&] { return (found = find_locked(parts)).has_value(); });
    return found;
  }
  std::optional<Line> find(const std::vector<std::string>& parts) const {
    std::lock_guard<std::mutex> lock(mu_);
    return find_locked(parts);
  }
  std::string dump() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const auto& l : lines_) out += l.text + "\n";
    return out;
  }

 private:
  std::optional<Line> find_locked(const std::vector<std::string>& parts) const {
    for (const Line& l : lines_) {
      bool all = true;
      for (const auto& p : parts) all = all && l.text.find(p) != std::string::npos;
      if (all) return l;
    }
    return std::nullopt;
  }
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Line> lines_;
};

// Holds the callbacks that enter it until released; remembers when the first entered.
class Gate {
 public:
  void enter() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!entered_) entered_ = std::chrono::steady_clock::now();
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  std::optional<Time> wait_entered(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return entered_.has_value(); });
    return entered_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  std::optional<Time> entered_;
};

// Releases a gate when it goes out of scope (declared after the worker, so a failed
// assertion does not leave the worker's shutdown waiting on a held callback).
struct ReleaseAtExit {
  std::shared_ptr<Gate> gate;
  ~ReleaseAtExit() { gate->release(); }
};

// GET `path` from the worker's endpoint (base URL "http://HOST:PORT"): status and body.
inline std::pair<int, std::string> http_get(const std::string& base, const std::string& path) {
  const std::string rest = base.substr(std::string("http://").size());
  const auto colon = rest.rfind(':');
  httplib::Client c(rest.substr(0, colon), std::stoi(rest.substr(colon + 1)));
  c.set_read_timeout(10, 0);
  auto r = c.Get(path.c_str());
  if (!r) return {0, ""};
  return {r->status, r->body};
}

// The `stalled` field of `shard` in /status.json (null when not stalled or not listed).
inline nlohmann::json shard_stalled(const std::string& base, const std::string& shard) {
  auto [code, body] = http_get(base, "/status.json");
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (code != 200 || !j.is_object() || !j.contains("shards")) return nullptr;
  for (const auto& s : j["shards"]) {
    if (s.value("shard_id", "") == shard) return s.value("stalled", nlohmann::json());
  }
  return nullptr;
}

// The value of the sample of `family` whose labels include every `label="value"` of
// `labels`, from /metrics; empty when there is none.
inline std::optional<double> metric_value(const std::string& base, const std::string& family,
                                          const std::vector<std::string>& labels) {
  auto [code, body] = http_get(base, "/metrics");
  std::size_t pos = 0;
  while (code == 200 && pos < body.size()) {
    std::size_t end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size();
    const std::string line = body.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind(family + "{", 0) != 0 && line.rfind(family + " ", 0) != 0) continue;
    bool all = true;
    for (const auto& l : labels) all = all && line.find(l) != std::string::npos;
    if (all) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return std::nullopt;
}

}  // namespace kcl::stall_test
