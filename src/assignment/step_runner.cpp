#include "assignment/step_runner.h"

namespace kcl::assignment {

StepRunner::StepRunner(const Clock& clock, std::vector<Step> steps)
    : clock_(clock), steps_(std::move(steps)) {}

StepRunner::~StepRunner() { stop(); }

void StepRunner::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  stopping_ = false;
  for (const Step& step : steps_) threads_.emplace_back([this, &step] { loop(step); });
}

void StepRunner::stop() {
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

void StepRunner::loop(const Step& step) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    const Clock::MonoTime next = step();
    std::unique_lock<std::mutex> lock(mu_);
    if (clock_.wait_until(lock, cv_, next, [&] { return stopping_; })) return;
  }
}

}  // namespace kcl::assignment
