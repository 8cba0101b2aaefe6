// kcl/clock.h: the source of time for kcl-cpp.
//
// Lease expiry is judged only on the monotonic clock (`now()`) of the worker that judges it;
// wall time (`wall_now()`) is used for timestamps shown to people and AT_TIMESTAMP reads,
// never to compare hosts. Everything that waits takes a Clock so that unit tests drive it
// with a ManualClock: timers read now(), and threads wait with wait_until(), which a
// ManualClock ends when advance() passes the deadline.
//
// Thread safety: all Clock implementations here are safe to call from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>

namespace kcl {

class Clock {
 public:
  using MonoTime = std::chrono::steady_clock::time_point;
  using WallTime = std::chrono::system_clock::time_point;
  virtual ~Clock() = default;
  virtual MonoTime now() const = 0;
  virtual WallTime wall_now() const = 0;

  // Waits on `cv` (with `lock` held on entry and on return) until `done()` holds or this
  // clock reaches `deadline`; returns done(). Spurious wake-ups are handled here. Whoever
  // changes what done() reads notifies `cv` as usual.
  virtual bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          MonoTime deadline, const std::function<bool()>& done) const = 0;
  bool wait_for(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                std::chrono::nanoseconds timeout, const std::function<bool()>& done) const {
    return wait_until(lock, cv, now() + timeout, done);
  }
  // Blocks the calling thread for `d` of this clock's time (nothing can end it early). For
  // threads that own nothing else to wait on; the library's pool threads never do this.
  void idle_for(std::chrono::nanoseconds d) const {
    std::mutex m;
    std::condition_variable cv;
    std::unique_lock<std::mutex> lock(m);
    wait_until(lock, cv, now() + d, [] { return false; });
  }
};

// The real clocks of this process.
class SystemClock final : public Clock {
 public:
  MonoTime now() const override { return std::chrono::steady_clock::now(); }
  WallTime wall_now() const override { return std::chrono::system_clock::now(); }
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  MonoTime deadline, const std::function<bool()>& done) const override {
    return cv.wait_until(lock, deadline, done);
  }
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
  // Moves time forward and wakes every thread waiting in wait_until() so that it looks at
  // the new time.
  void advance(std::chrono::nanoseconds d) {
    std::lock_guard<std::mutex> lock(mu_);
    elapsed_ += d;
    for (std::condition_variable* cv : waiters_) cv->notify_all();
  }
  // Moves only the wall clock (simulates a host whose wall clock is skewed or jumps).
  void skew_wall(std::chrono::nanoseconds d) {
    std::lock_guard<std::mutex> lock(mu_);
    wall_offset_ += d;
  }
  // Waits until done() or until advance() has moved this clock to `deadline`. Each wait is
  // also bounded by a short real timeout, so a wake-up that raced with advance() is never
  // lost; time itself moves only through advance().
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  MonoTime deadline, const std::function<bool()>& done) const override {
    {
      std::lock_guard<std::mutex> g(mu_);
      waiters_.insert(&cv);
    }
    bool result = false;
    for (;;) {
      if (done()) {
        result = true;
        break;
      }
      if (now() >= deadline) break;
      cv.wait_for(lock, std::chrono::milliseconds(1));
    }
    std::lock_guard<std::mutex> g(mu_);
    waiters_.erase(waiters_.find(&cv));  // this waiter's entry only
    return result;
  }
  // Threads currently inside wait_until() (tests use it to know the others are idle).
  std::size_t waiting() const {
    std::lock_guard<std::mutex> lock(mu_);
    return waiters_.size();
  }

 private:
  mutable std::mutex mu_;
  std::chrono::nanoseconds elapsed_{0};
  std::chrono::nanoseconds wall_offset_{0};
  mutable std::multiset<std::condition_variable*> waiters_;
};

}  // namespace kcl
