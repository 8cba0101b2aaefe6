// TaskPool: a fixed set of threads that runs many Tasks, each at the time it asks for.
//
// A Task is run by at most one thread at a time: scheduling a task that is running only
// records the earliest requested time, and it runs again after the current run returns.
// This is what lets hundreds of shard consumers share a few threads while calls for one
// shard are never concurrent.
//
// A pool made with no threads runs nothing by itself: the caller runs what is due with
// run_due() (tests drive shard consumers this way, on a ManualClock, through the same
// scheduling as a pool with threads).
//
// Thread safety: schedule() and stop() may be called from any thread, including from
// inside Task::run(); run_due() from one thread of a pool without threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "kcl/clock.h"

namespace kcl::lifecycle {

using SteadyTime = Clock::MonoTime;

class Task {
 public:
  virtual ~Task() = default;
  // Does one step. Returns when to run again; nullopt = not until scheduled again.
  virtual std::optional<SteadyTime> run() = 0;

 private:
  friend class TaskPool;
  // Guarded by the pool's mutex.
  bool running_ = false;
  std::optional<SteadyTime> queued_at_;  // earliest queued entry, when queued
  std::optional<SteadyTime> requested_;  // asked for while running
  std::uint64_t generation_ = 0;         // entries with an older generation are stale
};

class TaskPool {
 public:
  // Times are read from, and waits run on, `clock` (which must outlive the pool). `threads`
  // 0: no threads (run_due()).
  // Its threads show `thread_name` in top -H (15 bytes at most).
  explicit TaskPool(int threads, const Clock& clock = SystemClock::instance(),
                    std::string thread_name = "kcl-task");
  ~TaskPool();  // stop()
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  // Runs `task` at `at` (or earlier if it was already due earlier). The pool keeps the task
  // alive while it is queued or running.
  void schedule(const std::shared_ptr<Task>& task, SteadyTime at);
  void schedule_now(const std::shared_ptr<Task>& task) { schedule(task, clock_.now()); }
  // Stops the threads after their current runs; queued tasks are dropped.
  void stop();
  // Stops as stop() does, waiting for the current runs only until `deadline`: true when every
  // thread ended; false when one is still inside a task's run (a processor's callback that
  // never returns), which stop() or the destructor then waits for.
  bool stop_within(SteadyTime deadline);

  // Without threads: runs every task due by clock.now(), one after another on the calling
  // thread, until none is (a task that asks to run again at once runs again, up to
  // `max_runs` runs in all). Returns how many ran.
  int run_due(int max_runs = 10000);
  // When `task` is queued to run next; empty when it is not queued.
  std::optional<SteadyTime> scheduled_at(const Task& task);
  // True on one of this pool's threads (inside a task's run), e.g. to refuse a call that
  // would wait for the pool to stop.
  bool on_pool_thread() const;

 private:
  struct Entry {
    SteadyTime at;
    std::uint64_t order;
    std::uint64_t generation;
    std::shared_ptr<Task> task;
    bool operator>(const Entry& o) const { return at != o.at ? at > o.at : order > o.order; }
  };
  void push_locked(const std::shared_ptr<Task>& task, SteadyTime at);
  // Pops the earliest entry; its task, for the caller to drop without the lock (a task's
  // destructor may take locks whose holders call schedule()).
  std::shared_ptr<Task> pop_locked();
  // The earliest entry was superseded by an earlier one of the same task.
  bool top_superseded_locked() const;
  // The next task due by `now`, taken off the queue and marked running; null when none is.
  // Superseded entries popped on the way go to `dropped`.
  std::shared_ptr<Task> take_due_locked(SteadyTime now,
                                        std::vector<std::shared_ptr<Task>>& dropped);
  // After a run: queues the task again when it (or a schedule() meanwhile) asked to.
  void finish_run_locked(const std::shared_ptr<Task>& task, std::optional<SteadyTime> next);
  void loop();

  const Clock& clock_;
  std::mutex mu_;
  // One idle thread at a time waits for the earliest entry's time on timer_cv_ (timer_held_);
  // the others wait on cv_ until work is handed to them.
  std::condition_variable cv_;
  std::condition_variable timer_cv_;
  bool timer_held_ = false;
  SteadyTime timer_deadline_{};  // what the thread on timer_cv_ waits for, while timer_held_
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
  std::uint64_t order_ = 0;
  bool stopping_ = false;
  int in_run_ = 0;                     // threads inside a task's run
  std::condition_variable run_ended_;  // a run ended while stopping_
  std::vector<std::thread> threads_;
};

}  // namespace kcl::lifecycle
