// TaskPool: tasks run at the time they ask for, never concurrently with themselves, a
// schedule() while running makes the task run again afterwards, an earlier schedule wins
// over a later one, and stop() works from outside and from inside a task.
#include "lifecycle/task_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "support/eventually.h"
#include "support/thread_names.h"

namespace kcl::lifecycle {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

// A task whose run() calls a function; counts runs and notes overlapping runs.
class FnTask final : public Task {
 public:
  explicit FnTask(std::function<std::optional<SteadyTime>(int run)> fn) : fn_(std::move(fn)) {}

  std::optional<SteadyTime> run() override {
    if (active_.fetch_add(1) != 0) overlapped_.store(true);
    const int n = runs_.fetch_add(1) + 1;
    auto next = fn_(n);
    active_.fetch_sub(1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_runs_ = n;
    }
    cv_.notify_all();
    return next;
  }

  bool wait_runs(int n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return finished_runs_ >= n; });
  }
  int runs() const { return runs_.load(); }
  bool overlapped() const { return overlapped_.load(); }

 private:
  std::function<std::optional<SteadyTime>(int)> fn_;
  std::atomic<int> runs_{0};
  std::atomic<int> active_{0};
  std::atomic<bool> overlapped_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  int finished_runs_ = 0;
};

TEST(TaskPoolTest, RunsATaskOnceWhenItAsksForNothingMore) {
  TaskPool pool(2);
  auto task = std::make_shared<FnTask>([](int) { return std::nullopt; });
  pool.schedule_now(task);
  ASSERT_TRUE(task->wait_runs(1, 5s));
  // Nothing runs it again unless scheduled.
  pool.schedule(task, SteadyClock::now() + 10ms);
  ASSERT_TRUE(task->wait_runs(2, 5s));
  pool.stop();
  EXPECT_EQ(task->runs(), 2);
}

TEST(TaskPoolTest, RunsAgainAtTheTimeTheTaskReturns) {
  TaskPool pool(1);
  std::vector<SteadyTime> starts;
  std::mutex mu;
  auto task = std::make_shared<FnTask>([&](int n) -> std::optional<SteadyTime> {
    std::lock_guard<std::mutex> lock(mu);
    starts.push_back(SteadyClock::now());
    if (n >= 3) return std::nullopt;
    return SteadyClock::now() + 30ms;
  });
  pool.schedule_now(task);
  ASSERT_TRUE(task->wait_runs(3, 5s));
  pool.stop();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(starts.size(), 3u);
  EXPECT_GE(starts[1] - starts[0], 30ms);
  EXPECT_GE(starts[2] - starts[1], 30ms);
}

TEST(TaskPoolTest, ATaskNeverRunsConcurrentlyWithItselfAndScheduleWhileRunningRunsItAgain) {
  TaskPool pool(4);
  std::atomic<bool> in_first{false};
  std::atomic<bool> release{false};
  auto task = std::make_shared<FnTask>([&](int n) -> std::optional<SteadyTime> {
    if (n == 1) {
      in_first.store(true);
      while (!release.load()) std::this_thread::sleep_for(1ms);
    }
    return std::nullopt;
  });
  pool.schedule_now(task);
  while (!in_first.load()) std::this_thread::sleep_for(1ms);
  // Scheduled many times from many threads while its first run is in progress: it runs
  // exactly once more, after the first run, and never alongside it.
  std::vector<std::thread> schedulers;
  for (int i = 0; i < 4; ++i) {
    schedulers.emplace_back([&] {
      for (int j = 0; j < 50; ++j) pool.schedule_now(task);
    });
  }
  for (auto& t : schedulers) t.join();
  EXPECT_EQ(task->runs(), 1);
  release.store(true);
  ASSERT_TRUE(task->wait_runs(2, 5s));
  pool.stop();
  EXPECT_EQ(task->runs(), 2);
  EXPECT_FALSE(task->overlapped());
}

TEST(TaskPoolTest, AnEarlierScheduleWinsOverALaterOne) {
  TaskPool pool(1);
  auto task = std::make_shared<FnTask>([](int) { return std::nullopt; });
  const auto start = SteadyClock::now();
  pool.schedule(task, start + 10s);
  pool.schedule(task, start + 10ms);
  ASSERT_TRUE(task->wait_runs(1, 5s));
  EXPECT_LT(SteadyClock::now() - start, 5s);
  // The superseded entry (10 s) does not run it a second time; nor does a later schedule
  // while an earlier one is queued.
  pool.schedule(task, SteadyClock::now() + 20ms);
  pool.schedule(task, SteadyClock::now() + 10s);
  ASSERT_TRUE(task->wait_runs(2, 5s));
  pool.stop();
  EXPECT_EQ(task->runs(), 2);
}

TEST(TaskPoolTest, ManyTasksShareFewThreads) {
  TaskPool pool(2);
  std::vector<std::shared_ptr<FnTask>> tasks;
  for (int i = 0; i < 100; ++i) {
    tasks.push_back(std::make_shared<FnTask>([](int n) -> std::optional<SteadyTime> {
      if (n >= 5) return std::nullopt;
      return SteadyClock::now() + 1ms;
    }));
    pool.schedule_now(tasks.back());
  }
  for (auto& t : tasks) ASSERT_TRUE(t->wait_runs(5, 10s));
  pool.stop();
  for (auto& t : tasks) {
    EXPECT_EQ(t->runs(), 5);
    EXPECT_FALSE(t->overlapped());
  }
}

TEST(TaskPoolTest, StopDropsQueuedTasksAndLaterSchedulesAreIgnored) {
  auto task = std::make_shared<FnTask>([](int) { return std::nullopt; });
  {
    TaskPool pool(2);
    pool.schedule(task, SteadyClock::now() + 1h);
    pool.stop();
    EXPECT_EQ(task.use_count(), 1) << "the pool keeps no reference after stop";
    pool.schedule_now(task);
    EXPECT_EQ(task.use_count(), 1) << "a schedule after stop is ignored";
  }
  EXPECT_EQ(task->runs(), 0);
}

TEST(TaskPoolTest, StopFromInsideATaskDoesNotCrashOrDeadlock) {
  // Documented: stop() may be called from inside Task::run().
  auto pool = std::make_unique<TaskPool>(2);
  std::atomic<bool> stopped{false};
  TaskPool* raw = pool.get();
  auto task = std::make_shared<FnTask>([&](int) -> std::optional<SteadyTime> {
    raw->stop();
    stopped.store(true);
    return SteadyClock::now();  // ignored: the pool is stopping
  });
  pool->schedule_now(task);
  ASSERT_TRUE(task->wait_runs(1, 5s));
  EXPECT_TRUE(stopped.load());
  pool.reset();  // joins the thread that ran the task
  EXPECT_EQ(task->runs(), 1);
}

// A task whose run() waits until it is let go and whose destructor takes `outer` (as a shard
// consumer's does: its pull processor finishes its shard under the pull hub's lock).
class LockingDestructorTask final : public Task {
 public:
  explicit LockingDestructorTask(std::mutex& outer) : outer_(outer) {}
  ~LockingDestructorTask() override {
    dying.store(true);  // static: read after the task is gone
    std::lock_guard<std::mutex> lock(outer_);
  }
  std::optional<SteadyTime> run() override {
    running.store(true);
    while (!go.load()) std::this_thread::yield();
    return std::nullopt;
  }

  std::atomic<bool> running{false};
  std::atomic<bool> go{false};
  inline static std::atomic<bool> dying{false};

 private:
  std::mutex& outer_;
};

// Whether schedule() returns while a task whose last reference the pool drops (after its run,
// on the thread `runner` starts) waits in its destructor for a lock held by the caller of
// schedule(). A pull consumer's ack wakes its shard's consumer that way while the consumer's
// destructor finishes the shard: the pool must drop the task without its own lock.
bool schedule_goes_on_while_a_task_dies(TaskPool& pool, const std::function<void()>& runner) {
  std::mutex outer;
  std::unique_lock<std::mutex> held(outer);
  LockingDestructorTask::dying.store(false);
  auto task = std::make_shared<LockingDestructorTask>(outer);
  LockingDestructorTask* raw = task.get();
  pool.schedule_now(task);
  auto run = std::async(std::launch::async, runner);
  EXPECT_TRUE(kcl::testing::eventually([&] { return raw->running.load(); }));
  task.reset();  // the pool's reference is the last
  raw->go.store(true);
  EXPECT_TRUE(kcl::testing::eventually([] { return LockingDestructorTask::dying.load(); }));
  auto other = std::make_shared<FnTask>([](int) { return std::nullopt; });
  auto scheduled =
      std::async(std::launch::async, [&] { pool.schedule(other, SteadyClock::now() + 1h); });
  const bool went_on = scheduled.wait_for(10s) == std::future_status::ready;
  held.unlock();  // lets a deadlocked pool go on, so the test ends either way
  scheduled.wait();
  run.wait();
  return went_on;
}

TEST(TaskPoolTest, ItsThreadsDropATaskWithoutThePoolsLock) {
  TaskPool pool(1);
  EXPECT_TRUE(schedule_goes_on_while_a_task_dies(pool, [] {}))
      << "schedule() waited for the pool's lock, held while the task was destroyed";
}

TEST(TaskPoolTest, RunDueDropsATaskWithoutThePoolsLock) {
  TaskPool pool(0);
  EXPECT_TRUE(schedule_goes_on_while_a_task_dies(pool, [&pool] { pool.run_due(1); }))
      << "schedule() waited for the pool's lock, held while the task was destroyed";
}

TEST(TaskPoolTest, ScheduleFromInsideATaskOfAnotherTask) {
  TaskPool pool(2);
  auto second = std::make_shared<FnTask>([](int) { return std::nullopt; });
  auto first = std::make_shared<FnTask>([&](int) -> std::optional<SteadyTime> {
    pool.schedule_now(second);
    return std::nullopt;
  });
  pool.schedule_now(first);
  ASSERT_TRUE(second->wait_runs(1, 5s));
  pool.stop();
}

// The system clock, counting the timed waits the pool makes on it.
class CountingClock final : public Clock {
 public:
  MonoTime now() const override { return SystemClock::instance().now(); }
  WallTime wall_now() const override { return SystemClock::instance().wall_now(); }
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  MonoTime deadline, const std::function<bool()>& done) const override {
    timed_waits.fetch_add(1);
    return SystemClock::instance().wait_until(lock, cv, deadline, done);
  }
  mutable std::atomic<int> timed_waits{0};
};

// Idle threads do not all watch the clock: at each deadline one thread wakes, not the whole
// pool (on a virtual machine every wake-up is a context switch that costs tens of µs).
TEST(TaskPoolTest, OneIdleThreadWaitsForTheNextDeadlineNotEveryThread) {
  CountingClock clock;
  constexpr int kThreads = 8;
  constexpr int kRuns = 40;
  TaskPool pool(kThreads, clock);
  auto task = std::make_shared<FnTask>([&](int n) -> std::optional<SteadyTime> {
    if (n >= kRuns) return std::nullopt;
    return clock.now() + 2ms;
  });
  pool.schedule_now(task);
  ASSERT_TRUE(task->wait_runs(kRuns, 10s));
  pool.stop();
  EXPECT_FALSE(task->overlapped());
  // About one timed wait per run (a spurious or early wake-up may add a few); with every
  // idle thread waiting for the deadline it was about kThreads per run.
  EXPECT_LT(clock.timed_waits.load(), 2 * kRuns) << "timed waits for " << kRuns << " runs";
}

TEST(TaskPoolTest, ItsThreadsCarryTheGivenName) {
  TaskPool pool(2, SystemClock::instance(), "kcl-test-pool");
  EXPECT_TRUE(kcl::testing::eventually([] {
    return kcl::testing::thread_names()["kcl-test-pool"] == 2;
  })) << kcl::testing::thread_names()["kcl-test-pool"];
  pool.stop();
  EXPECT_EQ(kcl::testing::thread_names().count("kcl-test-pool"), 0u);
}

}  // namespace
}  // namespace kcl::lifecycle
