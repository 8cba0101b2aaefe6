// base/background_once.h: runs one call on a thread of its own, the first time it is asked;
// every caller gets the same future of its Status. The begin_shutdown() of the public
// classes: a stop that blocks, started without blocking the caller.
//
// Thread safety: run() and join() may be called from any thread; join() not from the call
// itself.
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "base/thread_name.h"
#include "kcl/status.h"

namespace kcl::base {

class BackgroundOnce {
 public:
  BackgroundOnce() = default;
  BackgroundOnce(const BackgroundOnce&) = delete;
  BackgroundOnce& operator=(const BackgroundOnce&) = delete;
  ~BackgroundOnce() { join(); }

  // Starts `call` on its own thread unless a call was started before; the future of the
  // first call's result either way.
  std::shared_future<Status> run(const std::function<Status()>& call) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) {
      auto task = std::make_shared<std::packaged_task<Status()>>(call);
      result_ = task->get_future().share();
      thread_ = named_thread("kcl-shutdown", [task] { (*task)(); });
    }
    return result_;
  }

  // Waits for a call started by run() to return (nothing when none was).
  void join() {
    std::lock_guard<std::mutex> lock(mu_);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;
  std::thread thread_;
  std::shared_future<Status> result_;
};

}  // namespace kcl::base
