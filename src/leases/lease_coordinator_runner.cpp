#include "leases/lease_coordinator_runner.h"

#include <algorithm>

namespace kcl::leases {

using std::chrono::milliseconds;

LeaseCoordinatorRunner::LeaseCoordinatorRunner(LeaseCoordinator& coordinator, std::uint64_t seed)
    : coordinator_(coordinator), rng_(seed) {}

LeaseCoordinatorRunner::~LeaseCoordinatorRunner() { stop(); }

milliseconds LeaseCoordinatorRunner::jittered(milliseconds base) {
  const double j = coordinator_.config().interval_jitter;
  std::uniform_real_distribution<double> d(1.0 - j, 1.0 + j);
  std::lock_guard<std::mutex> lock(mu_);
  return milliseconds(
      std::max<long long>(1, static_cast<long long>(static_cast<double>(base.count()) * d(rng_))));
}

void LeaseCoordinatorRunner::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  stopping_ = false;
  renewer_ = std::thread([this] { renew_loop(); });
  taker_ = std::thread([this] { take_loop(); });
}

void LeaseCoordinatorRunner::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  if (taker_.joinable()) taker_.join();
  std::lock_guard<std::mutex> lock(mu_);
  started_ = false;
}

void LeaseCoordinatorRunner::renew_loop() {
  const milliseconds interval = coordinator_.config().effective_renew_interval();
  for (;;) {
    const Clock& clock = coordinator_.clock();
    const auto started = clock.now();
    (void)coordinator_.run_renew_pass();
    auto next = started + jittered(interval);
    if (auto deadline = coordinator_.next_deadline()) {
      // Wake at the deadline (a pass then gives up what could not be renewed) -- not in a
      // busy loop if it is past.
      next = std::min(next, std::max(*deadline, clock.now() + milliseconds(10)));
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (clock.wait_until(lock, cv_, next, [&] { return stopping_; })) return;
  }
}

void LeaseCoordinatorRunner::take_loop() {
  const milliseconds interval = coordinator_.config().effective_take_interval();
  for (;;) {
    const Clock& clock = coordinator_.clock();
    TakePassResult r = coordinator_.run_take_pass();
    // Not sooner after a pass cut short by the ramp: see TakePassResult::limited_by_ramp.
    auto next = clock.now() + jittered(interval);
    if (r.next_expiry) {
      // A lease looks abandoned: look again the moment it expires.
      next = std::min(next, *r.next_expiry + milliseconds(1));
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (clock.wait_until(lock, cv_, next, [&] { return stopping_; })) return;
  }
}

}  // namespace kcl::leases
