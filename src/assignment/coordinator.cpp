#include "assignment/coordinator.h"

#include <algorithm>
#include <string>

#include "base/thread_name.h"

namespace kcl::assignment {

Coordinator::Coordinator(const Clock& clock, std::vector<Step> steps)
    : clock_(clock),
      steps_(std::move(steps)),
      jobs_(kLanes),
      woken_(steps_.size(), false),
      in_progress_(steps_.size()),
      next_(steps_.size(), Clock::MonoTime::min()) {}

Coordinator::~Coordinator() { stop(); }

bool Coordinator::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_;
}

void Coordinator::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  stopping_ = false;
  lanes_stopping_ = false;
  std::fill(next_.begin(), next_.end(), Clock::MonoTime::min());
  static const char* const kLaneNames[kLanes] = {"kcl-io-renew", "kcl-io-poll", "kcl-io-pass"};
  for (int lane = 0; lane < kLanes; ++lane) {
    lanes_.push_back(base::named_thread(kLaneNames[lane], [this, lane] { lane_loop(lane); }));
  }
  thread_ = base::named_thread("kcl-coordinate", [this] { loop(); });
}

void Coordinator::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  // The coordinator ends once its steps did (their calls still run on the lanes meanwhile).
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    lanes_stopping_ = true;
  }
  lanes_cv_.notify_all();
  for (auto& t : lanes_) {
    if (t.joinable()) t.join();
  }
  std::lock_guard<std::mutex> lock(mu_);
  lanes_.clear();
  for (auto& jobs : jobs_) jobs.clear();
  answered_.clear();
  started_ = false;
}

void Coordinator::wake(std::size_t index) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (index >= woken_.size()) return;
    woken_[index] = true;
  }
  cv_.notify_all();
}

void Coordinator::run(Lane lane, std::function<void()> call, std::coroutine_handle<> waiting) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[static_cast<int>(lane)].push_back({std::move(call), waiting});
  }
  lanes_cv_.notify_all();
}

void Coordinator::run_and_wait(const std::function<CallTask<Done>()>& task) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!started_) {
    lock.unlock();
    (void)task().run_inline();
    return;
  }
  bool finished = false;
  asked_.push_back({task, &finished});
  cv_.notify_all();
  asked_cv_.wait(lock, [&] { return finished; });
}

void Coordinator::lane_loop(int lane) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    lanes_cv_.wait(lock, [&] { return lanes_stopping_ || !jobs_[lane].empty(); });
    if (jobs_[lane].empty()) return;  // stopping, and nothing waits for an answer
    Job job = std::move(jobs_[lane].front());
    jobs_[lane].pop_front();
    lock.unlock();
    job.call();
    lock.lock();
    answered_.push_back(job.waiting);
    cv_.notify_all();
  }
}

void Coordinator::collect_ended() {
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    if (in_progress_[i] && in_progress_[i]->done()) {
      next_[i] = in_progress_[i]->result();
      in_progress_[i].reset();
    }
  }
  bool reported = false;
  for (auto it = asked_in_progress_.begin(); it != asked_in_progress_.end();) {
    if (!it->task->done()) {
      ++it;
      continue;
    }
    *it->asked.finished = true;
    reported = true;
    it = asked_in_progress_.erase(it);
  }
  if (reported) asked_cv_.notify_all();
}

void Coordinator::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // Answers first: a step waiting on one holds on to what it read.
    if (resume_answered(lock) || start_asked(lock)) continue;
    const bool busy = std::any_of(in_progress_.begin(), in_progress_.end(),
                                  [](const auto& t) { return t.has_value(); }) ||
                      !asked_in_progress_.empty();
    if (stopping_ && !busy) return;
    Clock::MonoTime earliest = Clock::MonoTime::max();
    if (start_due_step(lock, earliest)) continue;
    if (stopping_) {
      // Only the answers of the steps in progress, or a drain asked for, are waited for.
      cv_.wait(lock, [&] { return !answered_.empty() || !asked_.empty(); });
      continue;
    }
    (void)clock_.wait_until(lock, cv_, earliest, [&] {
      if (!answered_.empty() || !asked_.empty() || stopping_) return true;
      for (std::size_t i = 0; i < steps_.size(); ++i) {
        if (woken_[i] && !in_progress_[i]) return true;
      }
      return false;
    });
  }
}

bool Coordinator::resume_answered(std::unique_lock<std::mutex>& lock) {
  if (answered_.empty()) return false;
  std::coroutine_handle<> h = answered_.front();
  answered_.pop_front();
  lock.unlock();
  h.resume();
  lock.lock();
  collect_ended();
  return true;
}

bool Coordinator::start_asked(std::unique_lock<std::mutex>& lock) {
  if (asked_.empty()) return false;
  asked_in_progress_.push_back({std::move(asked_.front()), std::nullopt});
  asked_.pop_front();
  lock.unlock();
  AskedRunning& running = asked_in_progress_.back();
  running.task.emplace(running.asked.make());
  running.task->start();
  lock.lock();
  collect_ended();
  return true;
}

bool Coordinator::start_due_step(std::unique_lock<std::mutex>& lock, Clock::MonoTime& earliest) {
  const auto now = clock_.now();
  std::optional<std::size_t> due;
  for (std::size_t i = 0; i < steps_.size() && !stopping_; ++i) {
    if (in_progress_[i]) continue;
    if (woken_[i] || now >= next_[i]) {
      due = i;
      break;
    }
    earliest = std::min(earliest, next_[i]);
  }
  if (!due) return false;
  woken_[*due] = false;
  lock.unlock();
  in_progress_[*due].emplace(steps_[*due]());
  in_progress_[*due]->start();
  lock.lock();
  collect_ended();
  return true;
}

}  // namespace kcl::assignment
