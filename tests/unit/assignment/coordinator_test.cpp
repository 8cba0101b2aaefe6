// Coordinator: the one thread that runs the assignment steps (coroutines) and resumes them when
// the calls they await answer on the I/O lanes. What the strategies rely on: a call blocked on
// one lane delays no step whose calls run on another; every step body runs on the coordinator's
// thread and every call on its lane's; wake() runs a step at once; run_and_wait() runs a task
// beside the steps (inline when the coordinator is not running); stop() lets a step in
// progress end.
#include "assignment/coordinator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "support/eventually.h"

namespace kcl::assignment {
namespace {

using kcl::testing::eventually;
using namespace std::chrono_literals;

// A gate a call waits at until the test opens it.
class Gate {
 public:
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    waiting_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  bool waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool waiting_ = false;
  bool open_ = false;
};

struct Seen {
  std::mutex mu;
  std::set<std::thread::id> step_threads;
  std::set<std::thread::id> renew_lane;
  std::set<std::thread::id> pass_lane;
  void note(std::set<std::thread::id>& where) {
    std::lock_guard<std::mutex> lock(mu);
    where.insert(std::this_thread::get_id());
  }
};

TEST(StepCoordinatorTest, ACallBlockedOnOneLaneDelaysNoStepOfAnother) {
  Gate scan;
  Seen seen;
  std::atomic<int> heartbeats{0};
  std::atomic<int> passes{0};
  Coordinator* self = nullptr;
  auto heartbeat = [&]() -> CallTask<Clock::MonoTime> {
    seen.note(seen.step_threads);
    (void)co_await call(self, Lane::kRenew, [&] {
      seen.note(seen.renew_lane);
      return Done{};
    });
    seen.note(seen.step_threads);
    ++heartbeats;
    co_return SystemClock::instance().now() + 5ms;
  };
  auto pass = [&]() -> CallTask<Clock::MonoTime> {
    seen.note(seen.step_threads);
    (void)co_await call(self, Lane::kPass, [&] {
      seen.note(seen.pass_lane);
      scan.wait();  // a lease-table scan that takes its time
      return Done{};
    });
    seen.note(seen.step_threads);
    ++passes;
    co_return SystemClock::instance().now() + 1h;
  };
  Coordinator coordinator(SystemClock::instance(), {heartbeat, pass});
  self = &coordinator;
  coordinator.start();
  ASSERT_TRUE(eventually([&] { return scan.waiting(); }));
  const int before = heartbeats.load();
  EXPECT_TRUE(eventually([&] { return heartbeats.load() >= before + 20; }))
      << "heartbeats waited for the scan";
  EXPECT_EQ(passes.load(), 0);
  scan.open();
  EXPECT_TRUE(eventually([&] { return passes.load() == 1; }));
  coordinator.stop();

  std::lock_guard<std::mutex> lock(seen.mu);
  EXPECT_EQ(seen.step_threads.size(), 1u) << "step bodies ran on more than one thread";
  EXPECT_EQ(seen.renew_lane.size(), 1u);
  EXPECT_EQ(seen.pass_lane.size(), 1u);
  EXPECT_FALSE(seen.step_threads.count(*seen.renew_lane.begin())) << "a call ran on the owner";
  EXPECT_NE(*seen.renew_lane.begin(), *seen.pass_lane.begin());
}

TEST(StepCoordinatorTest, WakeRunsAStepAtOnceAndStopLetsAStepInProgressEnd) {
  Gate slow;
  std::atomic<int> runs{0};
  std::atomic<bool> ended{false};
  Coordinator* self = nullptr;
  auto step = [&]() -> CallTask<Clock::MonoTime> {
    const int n = ++runs;
    if (n == 2) {
      (void)co_await call(self, Lane::kPoll, [&] {
        slow.wait();
        return Done{};
      });
      ended = true;
    }
    co_return SystemClock::instance().now() + 1h;
  };
  Coordinator coordinator(SystemClock::instance(), {step});
  self = &coordinator;
  coordinator.start();
  ASSERT_TRUE(eventually([&] { return runs.load() == 1; }));
  coordinator.wake(0);  // it asked for an hour
  ASSERT_TRUE(eventually([&] { return slow.waiting(); }));
  // A coordinator that stopped without waiting would never resume the step: `ended` would
  // stay false when stop() returns.
  bool ended_when_stopped = false;
  std::thread stopper([&] {
    coordinator.stop();
    ended_when_stopped = ended.load();
  });
  slow.open();
  stopper.join();
  EXPECT_TRUE(ended_when_stopped) << "stop() returned before the step in progress ended";
  EXPECT_FALSE(coordinator.running());
}

TEST(StepCoordinatorTest, RunAndWaitRunsATaskBesideTheStepsOrInlineWhenStopped) {
  std::thread::id step_thread;
  std::thread::id task_thread;
  std::atomic<bool> stepped{false};
  Coordinator* self = nullptr;
  auto step = [&]() -> CallTask<Clock::MonoTime> {
    step_thread = std::this_thread::get_id();
    stepped = true;
    co_return SystemClock::instance().now() + 1h;
  };
  auto task = [&]() -> CallTask<Done> {
    const int answer = co_await call(self, Lane::kRenew, [] { return 42; });
    EXPECT_EQ(answer, 42);
    task_thread = std::this_thread::get_id();
    co_return Done{};
  };
  Coordinator coordinator(SystemClock::instance(), {step});
  self = &coordinator;
  coordinator.start();
  ASSERT_TRUE(eventually([&] { return stepped.load(); }));
  coordinator.run_and_wait(task);
  EXPECT_EQ(task_thread, step_thread) << "the task did not run on the coordinator's thread";
  coordinator.stop();

  self = nullptr;  // stopped: calls run inline
  coordinator.run_and_wait(task);
  EXPECT_EQ(task_thread, std::this_thread::get_id());
}

}  // namespace
}  // namespace kcl::assignment
