#include "lifecycle/task_pool.h"

#include "base/thread_name.h"

namespace kcl::lifecycle {

namespace {
thread_local const TaskPool* current_pool = nullptr;

// Drops a reference to a task without the pool's lock: it may be the last, and the task's
// destructor may take a lock whose holder calls schedule() (a shard consumer's pull processor
// finishes its shard under the pull hub's lock, and the hub wakes consumers), so the two
// would wait for each other.
void release_unlocked(std::unique_lock<std::mutex>& lock, std::shared_ptr<Task>& task) {
  lock.unlock();
  task.reset();
  lock.lock();
}
}  // namespace

bool TaskPool::on_pool_thread() const { return current_pool == this; }

TaskPool::TaskPool(int threads, const Clock& clock, std::string thread_name) : clock_(clock) {
  if (threads < 0) threads = 0;
  threads_.reserve(static_cast<std::size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    threads_.push_back(base::named_thread(thread_name, [this] { loop(); }));
  }
}

TaskPool::~TaskPool() { stop(); }

void TaskPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  timer_cv_.notify_all();
  // Called from inside Task::run(), the calling pool thread cannot join itself; it is kept
  // (destroying a joinable std::thread would terminate the process) and joined by a later
  // stop() from another thread, e.g. the destructor's. It exits once its run returns.
  std::vector<std::thread> self;
  for (auto& t : threads_) {
    if (t.get_id() == std::this_thread::get_id()) {
      self.push_back(std::move(t));
    } else if (t.joinable()) {
      t.join();
    }
  }
  decltype(queue_) dropped;  // destroyed after the lock is released (see release_unlocked)
  std::lock_guard<std::mutex> lock(mu_);
  threads_ = std::move(self);
  std::swap(dropped, queue_);
}

bool TaskPool::stop_within(SteadyTime deadline) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
    timer_cv_.notify_all();
    const int own = on_pool_thread() ? 1 : 0;  // the caller's own run ends after this
    if (!clock_.wait_until(lock, run_ended_, deadline, [&] { return in_run_ <= own; })) {
      return false;
    }
  }
  stop();
  return true;
}

void TaskPool::push_locked(const std::shared_ptr<Task>& task, SteadyTime at) {
  if (task->queued_at_ && *task->queued_at_ <= at) return;  // already due no later
  task->queued_at_ = at;
  ++task->generation_;
  queue_.push(Entry{at, order_++, task->generation_, task});
  // The thread watching the clock looks at the new earliest entry; with none watching, one
  // idle thread wakes to take it.
  // (It needs no wake-up for an entry due after the one it waits for.)
  if (timer_held_) {
    if (at < timer_deadline_) timer_cv_.notify_one();
  } else {
    cv_.notify_one();
  }
}

void TaskPool::schedule(const std::shared_ptr<Task>& task, SteadyTime at) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  if (task->running_) {
    if (!task->requested_ || at < *task->requested_) task->requested_ = at;
    return;
  }
  push_locked(task, at);
}

std::shared_ptr<Task> TaskPool::pop_locked() {
  std::shared_ptr<Task> task = queue_.top().task;
  queue_.pop();
  return task;
}

bool TaskPool::top_superseded_locked() const {
  const Entry& top = queue_.top();
  return top.generation != top.task->generation_ || !top.task->queued_at_;
}

std::shared_ptr<Task> TaskPool::take_due_locked(SteadyTime now,
                                                std::vector<std::shared_ptr<Task>>& dropped) {
  while (!queue_.empty()) {
    if (top_superseded_locked()) {
      dropped.push_back(pop_locked());
      continue;
    }
    if (queue_.top().at > now) return nullptr;
    std::shared_ptr<Task> task = pop_locked();
    task->queued_at_.reset();
    task->running_ = true;
    return task;
  }
  return nullptr;
}

void TaskPool::finish_run_locked(const std::shared_ptr<Task>& task,
                                 std::optional<SteadyTime> next) {
  task->running_ = false;
  if (task->requested_ && (!next || *task->requested_ < *next)) next = task->requested_;
  task->requested_.reset();
  if (next && !stopping_) push_locked(task, *next);
}

int TaskPool::run_due(int max_runs) {
  int runs = 0;
  std::vector<std::shared_ptr<Task>> dropped;  // released without the lock
  std::unique_lock<std::mutex> lock(mu_);
  while (runs < max_runs && !stopping_) {
    std::shared_ptr<Task> task = take_due_locked(clock_.now(), dropped);
    if (!task) break;
    lock.unlock();
    dropped.clear();
    std::optional<SteadyTime> next = task->run();
    lock.lock();
    finish_run_locked(task, next);
    release_unlocked(lock, task);
    ++runs;
  }
  lock.unlock();
  dropped.clear();
  return runs;
}

std::optional<SteadyTime> TaskPool::scheduled_at(const Task& task) {
  std::lock_guard<std::mutex> lock(mu_);
  return task.queued_at_;
}

void TaskPool::loop() {
  current_pool = this;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (queue_.empty()) {
      cv_.wait(lock);
      continue;
    }
    if (top_superseded_locked()) {
      std::shared_ptr<Task> stale = pop_locked();
      release_unlocked(lock, stale);
      continue;
    }
    const Entry& top = queue_.top();
    if (top.at > clock_.now()) {
      if (timer_held_) {
        // Another thread watches the clock for the earliest entry; this one sleeps until it
        // is handed work (a timed wait here would wake every idle thread at each deadline).
        cv_.wait(lock);
        continue;
      }
      // A copy: a push may move the queue's storage (a reference into it would dangle).
      // Wake at the entry's time, or when a push or stop() changes the queue.
      timer_held_ = true;
      timer_deadline_ = top.at;
      const SteadyTime at = top.at;
      const std::uint64_t order_seen = order_;
      clock_.wait_until(lock, timer_cv_, at, [&] { return stopping_ || order_ != order_seen; });
      timer_held_ = false;
      continue;
    }
    std::vector<std::shared_ptr<Task>> dropped;  // none: the top entry is current
    std::shared_ptr<Task> task = take_due_locked(top.at, dropped);
    // While this thread runs the task, another watches the clock (or takes the next task).
    if (!queue_.empty()) cv_.notify_one();
    ++in_run_;
    lock.unlock();
    std::optional<SteadyTime> next = task->run();
    lock.lock();
    --in_run_;
    if (stopping_) run_ended_.notify_all();
    finish_run_locked(task, next);
    release_unlocked(lock, task);
  }
}

}  // namespace kcl::lifecycle
