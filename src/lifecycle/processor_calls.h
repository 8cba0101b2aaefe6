// ProcessorCalls: runs a shard's processor callbacks under guard, catching what they throw
// while noting which one runs since when (for the hung-processor warning, the stall signal).
// Thread safety: call() on the consumer's step, one at a time; the accessors from any thread
// (last_error() on the step only).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "kcl/clock.h"
#include "lifecycle/stall_detector.h"

namespace kcl::lifecycle {

using SteadyTime = Clock::MonoTime;

class ProcessorCalls {
 public:
  explicit ProcessorCalls(const Clock& clock) : clock_(clock) {}

  // Runs `f` as the callback `what`; false if it threw (then last_error() says what).
  bool call(const char* what, const std::function<void()>& f);
  const std::string& last_error() const { return last_error_; }

  // Steady-clock nanoseconds at which the running callback started; 0 when none.
  std::int64_t started_ns() const { return started_ns_.load(); }
  bool hung_reported() const { return hung_reported_.load(); }
  void mark_hung_reported() { hung_reported_.store(true); }
  // A callback running, as a stall signal for the shard `lease_key`.
  std::optional<StallSignal> signal(SteadyTime now, const std::string& lease_key) const;

 private:
  const Clock& clock_;
  std::atomic<std::int64_t> started_ns_{0};
  std::atomic<bool> hung_reported_{false};
  std::atomic<const char*> name_{""};  // the callback running, while one is
  std::string last_error_;
};

}  // namespace kcl::lifecycle
