// AssignmentRunner: runs an AssignmentAgent's steps on real time, each on a thread of its own
// so that a slow lease-table scan of the leader never delays the heartbeat that holds this
// worker's leases, nor the poll that picks up leases assigned to it. Each step runs again when
// it asked to (AssignmentAgent), on the agent's clock. stop() ends the threads (waiting for a
// step in progress); it neither releases leases nor leaves: for a graceful shutdown, hand the
// leases back (LeaseCoordinator::release_all), stop() the runner, then agent.leave().
//
// Thread safety: start() and stop() from one controlling thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "leases/assignment_agent.h"

namespace kcl::leases {

class AssignmentRunner {
 public:
  explicit AssignmentRunner(AssignmentAgent& agent);
  AssignmentRunner(const AssignmentRunner&) = delete;
  AssignmentRunner& operator=(const AssignmentRunner&) = delete;
  ~AssignmentRunner();

  void start();
  void stop();

 private:
  void loop(const std::function<Clock::MonoTime()>& step);

  AssignmentAgent& agent_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool started_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace kcl::leases
