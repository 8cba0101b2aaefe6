// A clock for unit tests of calls that wait between looks (the wait for a stream consumer to
// become ACTIVE): a wait takes no real time and moves the clock to its deadline at once.
#pragma once

#include <mutex>

#include "kcl/clock.h"

namespace kcl::kinesis::fake {

class SteppingClock final : public Clock {
 public:
  MonoTime now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  WallTime wall_now() const override { return WallTime{} + (now() - MonoTime{}); }
  bool wait_until(std::unique_lock<std::mutex>&, std::condition_variable&, MonoTime deadline,
                  const std::function<bool()>& done) const override {
    if (done()) return true;
    std::lock_guard<std::mutex> lock(mu_);
    if (deadline > now_) now_ = deadline;
    ++waits;
    return false;
  }
  mutable int waits = 0;  // waits that moved the clock

 private:
  mutable std::mutex mu_;
  mutable MonoTime now_{};
};

}  // namespace kcl::kinesis::fake
