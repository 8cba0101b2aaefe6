// StepRunner: runs a strategy's steps on real time, each on a thread of its own (so a slow
// lease-table scan never delays the renewal that holds the leases). Each step does its work
// and returns when it wants to run again, on the given clock; stop() ends the threads after a
// step in progress. Both strategies run on it: worker-takes (take and renew passes) and
// leader-based (heartbeat, poll, leader pass).
//
// Thread safety: start() and stop() from one controlling thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kcl/clock.h"

namespace kcl::assignment {

class StepRunner {
 public:
  struct Step {
    std::string thread_name;  // the name its thread shows in top -H (15 bytes at most)
    std::function<Clock::MonoTime()> run;
  };
  // `clock` must outlive the runner.
  StepRunner(const Clock& clock, std::vector<Step> steps);
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;
  ~StepRunner();  // stop()

  void start();
  void stop();
  // Runs step `index` again as soon as its thread is free (a step running now finishes
  // first), whatever time it asked for. Safe from any thread, also from another step.
  void wake(std::size_t index);

 private:
  void loop(std::size_t index);

  const Clock& clock_;
  const std::vector<Step> steps_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool started_ = false;
  std::vector<bool> woken_;  // guarded by mu_: per step
  std::vector<std::thread> threads_;
};

}  // namespace kcl::assignment
