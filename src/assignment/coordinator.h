// Coordinator: the one thread that owns a worker's coordination state in leader-based
// assignment (its membership and incarnation, the leader lock and its basis, the poll's
// schedule, the leader's view between passes). It runs the agent's steps (heartbeat, poll,
// leader pass: CallTask coroutines, call_task.h) one event at a time from one queue: a step's
// time came, a step was woken, a call's answer arrived, a drain was asked for. Each step runs
// until it awaits a DynamoDB call; the call runs on its I/O lane (renew, poll, pass: one
// thread each, one call at a time) with only its request and a thread-safe store, and its
// answer resumes the step here. So a slow scan on the pass lane never delays a heartbeat, and
// nothing the steps share needs a lock. A step not running is started again at the time its
// last run returned, or at once when woken.
//
// Thread safety: start(), stop() and run_and_wait() from one controlling thread; wake() and
// run() from any thread.
#pragma once

#include <condition_variable>
#include <coroutine>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "assignment/call_task.h"
#include "kcl/clock.h"

namespace kcl::assignment {

class Coordinator final : public CallRunner {
 public:
  using Step = std::function<CallTask<Clock::MonoTime>()>;
  // `clock` must outlive the coordinator.
  Coordinator(const Clock& clock, std::vector<Step> steps);
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;
  ~Coordinator() override;  // stop()

  void start();
  // Starts no step any more, lets the steps in progress end (their calls answer or time
  // out), then ends the threads.
  void stop();
  bool running() const;
  // Step `index` runs again as soon as it is not running, whatever time it asked for.
  void wake(std::size_t index);
  // Runs `task` on the coordinator's thread beside the steps and waits for its end; inline
  // on this thread when the coordinator is not running.
  void run_and_wait(const std::function<CallTask<Done>()>& task);

  void run(Lane lane, std::function<void()> call, std::coroutine_handle<> waiting) override;

 private:
  struct Job {
    std::function<void()> call;
    std::coroutine_handle<> waiting;
  };
  struct Asked {
    std::function<CallTask<Done>()> make;
    bool* finished;
  };
  void loop();
  // The steps of loop() (mu_ held on entry and return, released while a step runs): resume a
  // step whose call answered; start a task asked for (run_and_wait); start the first step
  // due, else lower `earliest` to when the next one is. Each returns whether it ran one.
  bool resume_answered(std::unique_lock<std::mutex>& lock);
  bool start_asked(std::unique_lock<std::mutex>& lock);
  bool start_due_step(std::unique_lock<std::mutex>& lock, Clock::MonoTime& earliest);
  void lane_loop(int lane);
  // After a resume: steps that ended get their next time; asked tasks that ended are
  // reported. Requires mu_.
  void collect_ended();

  const Clock& clock_;
  const std::vector<Step> steps_;
  mutable std::mutex mu_;
  std::condition_variable cv_;                    // the coordinator waits on it
  std::condition_variable lanes_cv_;              // the lanes wait on it
  std::condition_variable asked_cv_;              // run_and_wait() waits on it
  bool started_ = false;                          // guarded by mu_
  bool stopping_ = false;                         // guarded by mu_
  bool lanes_stopping_ = false;                   // guarded by mu_
  std::deque<std::coroutine_handle<>> answered_;  // guarded by mu_
  std::deque<Asked> asked_;                       // guarded by mu_
  std::vector<std::deque<Job>> jobs_;             // guarded by mu_: per lane
  std::vector<bool> woken_;                       // guarded by mu_: per step
  // Coordinator thread only: the steps in progress and when each runs next; the asked
  // tasks in progress.
  std::vector<std::optional<CallTask<Clock::MonoTime>>> in_progress_;
  std::vector<Clock::MonoTime> next_;
  // (A task's maker is kept while it runs: a coroutine lambda's captures live in it.)
  struct AskedRunning {
    Asked asked;
    std::optional<CallTask<Done>> task;
  };
  std::list<AskedRunning> asked_in_progress_;
  std::thread thread_;
  std::vector<std::thread> lanes_;
};

}  // namespace kcl::assignment
