#include "assignment/step_runner.h"

#include "base/thread_name.h"

namespace kcl::assignment {

StepRunner::StepRunner(const Clock& clock, std::vector<Step> steps)
    : clock_(clock), steps_(std::move(steps)), woken_(steps_.size(), false) {}

StepRunner::~StepRunner() { stop(); }

void StepRunner::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  stopping_ = false;
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    threads_.push_back(base::named_thread(steps_[i].thread_name, [this, i] { loop(i); }));
  }
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

void StepRunner::wake(std::size_t index) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (index >= woken_.size()) return;
    woken_[index] = true;
  }
  cv_.notify_all();
}

void StepRunner::loop(std::size_t index) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      woken_[index] = false;
    }
    const Clock::MonoTime next = steps_[index].run();
    std::unique_lock<std::mutex> lock(mu_);
    if (clock_.wait_until(lock, cv_, next, [&] { return stopping_ || woken_[index]; }) &&
        stopping_) {
      return;
    }
  }
}

}  // namespace kcl::assignment
