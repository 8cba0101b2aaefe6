#include "lifecycle/stall_detector.h"

#include <cstdio>

#include "base/repeat_report.h"

namespace kcl::lifecycle {

std::vector<StallEvent> StallDetector::look(
    Clock::MonoTime now, const std::map<std::string, std::optional<StallSignal>>& signals) {
  std::vector<StallEvent> events;
  // Stalls that ended: the shard left, its signal went away or changed cause.
  for (auto it = stalled_.begin(); it != stalled_.end();) {
    auto s = signals.find(it->first);
    const bool still = s != signals.end() && s->second && s->second->cause == it->second.cause &&
                       now - s->second->since >= threshold_;
    if (still) {
      ++it;
      continue;
    }
    events.push_back({StallEvent::Kind::kEnded, it->second});
    it = stalled_.erase(it);
  }
  for (const auto& [shard, signal] : signals) {
    if (!signal || now - signal->since < threshold_) continue;
    auto [it, started] = stalled_.try_emplace(shard);
    ShardStall& stall = it->second;
    stall.detail = signal->detail;
    ++stall.looks;
    if (started) {
      stall.shard = shard;
      stall.cause = signal->cause;
      stall.since = signal->since;
      events.push_back({StallEvent::Kind::kStarted, stall});
    } else if (base::worth_reporting(stall.looks)) {
      events.push_back({StallEvent::Kind::kContinues, stall});
    }
  }
  return events;
}

std::vector<ShardStall> StallDetector::stalled() const {
  std::vector<ShardStall> out;
  for (const auto& [shard, stall] : stalled_) out.push_back(stall);
  return out;
}

std::string seconds_text(Clock::MonoTime::duration d) {
  const double secs = std::chrono::duration<double>(d).count();
  char text[32];
  if (secs < 10) {
    std::snprintf(text, sizeof text, "%.1f s", secs);
  } else {
    std::snprintf(text, sizeof text, "%.0f s", secs);
  }
  return text;
}

}  // namespace kcl::lifecycle
