// lifecycle/stall_detector.h: which shards are stalled, and what to say about it.
//
// Each shard consumer says what is in its way right now (a StallSignal: a cause, a detail in
// words and when it began), or nothing when it is making progress or idle at the tip of the
// stream. The detector, looked at by the worker's scheduler about once a second, flags a
// shard stalled once its signal has lasted `threshold`, and reports:
//   - kStarted once when a stall begins (the log line, the gauge set to 1),
//   - kContinues while it lasts, at the 3rd look and each power of ten (base/repeat_report.h),
//   - kEnded when it ends (the signal went away, changed cause, or the shard left the worker;
//     the gauge back to 0).
// A signal that changes cause is a new stall (its own gauge series); one that only changes
// its detail (a count going up) is the same stall.
//
// Thread safety: none; one thread (the scheduler) looks. stalled() copies for other threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kcl/clock.h"

namespace kcl::lifecycle {

// Causes, as they appear in the gauge's `cause` label and in /status.json.
inline constexpr const char* kStallProcessorCallback = "processor_callback";
inline constexpr const char* kStallThrottled = "throttled";
inline constexpr const char* kStallFanOutFailing = "fanout_failing";
inline constexpr const char* kStallWaitingForParent = "waiting_for_parent";
inline constexpr const char* kStallCheckpointRejected = "checkpoint_rejected";
inline constexpr const char* kStallNoProgress = "no_progress";
inline constexpr const char* kStallNoLiveOwner = "no_live_owner";
inline constexpr const char* kStallConsumerFailing = "consumer_failing";

struct StallSignal {
  std::string cause;
  std::string detail;
  Clock::MonoTime since{};  // when whatever is in the way began
};

struct ShardStall {
  std::string shard;  // the lease key
  std::string cause;
  std::string detail;
  Clock::MonoTime since{};
  std::uint64_t looks = 0;  // looks that found it stalled, this one included
};

struct StallEvent {
  enum class Kind { kStarted, kContinues, kEnded };
  Kind kind = Kind::kStarted;
  ShardStall stall;
};

class StallDetector {
 public:
  // `threshold` > 0.
  explicit StallDetector(std::chrono::milliseconds threshold) : threshold_(threshold) {}

  // One look at every shard this worker reads (lease key -> its signal, or nothing in the
  // way). Shards missing from `signals` are no longer read here: their stalls end.
  std::vector<StallEvent> look(Clock::MonoTime now,
                               const std::map<std::string, std::optional<StallSignal>>& signals);

  // The stalls in progress, by shard.
  std::vector<ShardStall> stalled() const;

 private:
  std::chrono::milliseconds threshold_;
  std::map<std::string, ShardStall> stalled_;
};

// "3.2 s" / "75 s": a duration in words for the details and logs.
std::string seconds_text(Clock::MonoTime::duration d);

}  // namespace kcl::lifecycle
