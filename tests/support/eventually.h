// eventually(): waits for a condition that has no notification to wait on (the lease table, a
// worker's stats, a child process's output), polling it every few milliseconds until it
// holds or the limit passes. Tests wait for conditions, never for fixed times.
#pragma once

#include <chrono>
#include <thread>

namespace kcl::testing {

// Polls `f` every 5 ms until it holds or `limit` passed; its last value.
template <typename F>
inline bool eventually(F f, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return f();
}

}  // namespace kcl::testing
