// kcl/clock.h: the source of time for kcl-cpp.
//
// Lease expiry is judged only on the monotonic clock (`now()`) of the worker that judges it;
// wall time (`wall_now()`) is used for timestamps shown to people and AT_TIMESTAMP reads,
// never to compare hosts. Everything that waits takes a Clock so that unit tests drive it
// with a ManualClock.
//
// Thread safety: all Clock implementations here are safe to call from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace kcl {

class Clock {
 public:
  using MonoTime = std::chrono::steady_clock::time_point;
  using WallTime = std::chrono::system_clock::time_point;
  virtual ~Clock() = default;
  virtual MonoTime now() const = 0;
  virtual WallTime wall_now() const = 0;
};

// The real clocks of this process.
class SystemClock final : public Clock {
 public:
  MonoTime now() const override { return std::chrono::steady_clock::now(); }
  WallTime wall_now() const override { return std::chrono::system_clock::now(); }
  // A process-wide instance for convenience (stateless; not a singleton with state).
  static const SystemClock& instance() {
    static const SystemClock clock;
    return clock;
  }
};

// A clock that moves only when told; for deterministic tests and simulations.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(WallTime wall_start = WallTime{} + std::chrono::hours(24 * 365 * 50))
      : wall_offset_(wall_start - WallTime{}) {}
  MonoTime now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return MonoTime{} + elapsed_;
  }
  WallTime wall_now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return WallTime{} + std::chrono::duration_cast<WallTime::duration>(wall_offset_ + elapsed_);
  }
  void advance(std::chrono::nanoseconds d) {
    std::lock_guard<std::mutex> lock(mu_);
    elapsed_ += d;
  }
  // Moves only the wall clock (simulates a host whose wall clock is skewed or jumps).
  void skew_wall(std::chrono::nanoseconds d) {
    std::lock_guard<std::mutex> lock(mu_);
    wall_offset_ += d;
  }

 private:
  mutable std::mutex mu_;
  std::chrono::nanoseconds elapsed_{0};
  std::chrono::nanoseconds wall_offset_{0};
};

}  // namespace kcl
