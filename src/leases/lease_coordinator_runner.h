// LeaseCoordinatorRunner: runs a LeaseCoordinator's passes on real time, on two threads of
// its own (renewals must not wait behind a slow table scan):
//  - renewer: run_renew_pass() every renew_interval (jittered), and sooner when a held
//    lease's deadline (LeaseCoordinator::next_deadline) would come first, so a lease that
//    cannot be renewed is given up on time;
//  - taker: run_take_pass() every take_interval (jittered), and at
//    TakePassResult::next_expiry when a lease looks abandoned (so a crashed worker's leases go
//    within failover + take interval of the crash).
// Both start at once. stop() ends both (waiting for a pass in progress); it does not release
// leases: for a graceful shutdown call coordinator.stop_taking(), finish the shards'
// final checkpoints, then coordinator.release_all(), then stop().
//
// Thread safety: start() and stop() from one controlling thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <random>
#include <thread>

#include "leases/lease_coordinator.h"

namespace kcl::leases {

class LeaseCoordinatorRunner {
 public:
  // `coordinator` must outlive the runner. Times and waits are on the coordinator's clock.
  explicit LeaseCoordinatorRunner(LeaseCoordinator& coordinator,
                                  std::uint64_t seed = std::random_device{}());
  LeaseCoordinatorRunner(const LeaseCoordinatorRunner&) = delete;
  LeaseCoordinatorRunner& operator=(const LeaseCoordinatorRunner&) = delete;
  ~LeaseCoordinatorRunner();

  void start();
  void stop();

 private:
  std::chrono::milliseconds jittered(std::chrono::milliseconds base);
  void renew_loop();
  void take_loop();

  LeaseCoordinator& coordinator_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool started_ = false;
  std::mt19937_64 rng_;  // guarded by mu_
  std::thread renewer_;
  std::thread taker_;
};

}  // namespace kcl::leases
