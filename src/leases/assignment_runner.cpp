#include "leases/assignment_runner.h"

namespace kcl::leases {

AssignmentRunner::AssignmentRunner(AssignmentAgent& agent) : agent_(agent) {}

AssignmentRunner::~AssignmentRunner() { stop(); }

void AssignmentRunner::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  stopping_ = false;
  threads_.emplace_back([this] { loop([this] { return agent_.heartbeat_step(); }); });
  threads_.emplace_back([this] { loop([this] { return agent_.poll_step(); }); });
  threads_.emplace_back([this] { loop([this] { return agent_.leader_step(); }); });
}

void AssignmentRunner::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  std::lock_guard<std::mutex> lock(mu_);
  threads_.clear();
  started_ = false;
}

void AssignmentRunner::loop(const std::function<Clock::MonoTime()>& step) {
  const Clock& clock = agent_.clock();
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    const Clock::MonoTime next = step();
    std::unique_lock<std::mutex> lock(mu_);
    if (clock.wait_until(lock, cv_, next, [&] { return stopping_; })) return;
  }
}

}  // namespace kcl::leases
