// CallTask: a step of leader-based assignment written as a coroutine whose DynamoDB calls are
// awaited (`co_await call(runner, lane, fn)`), so that the coordination state it reads and
// writes between calls is touched by one thread only: the coordinator (coordinator.h), which
// starts each step and resumes it when a call's answer arrives. A call runs on an I/O lane
// and touches nothing but its request (captured values) and a thread-safe store.
//
// With no CallRunner (tests, the simulation, and the last steps after the coordinator stopped)
// every call runs inline where it is awaited and a task runs to its end in run_inline(): the
// same code, the same order of calls, on the caller's thread.
//
// Thread safety: a task and its calls' results belong to the thread that resumes it.
//
// Write `const bool x = co_await task(); if (x && ...)`, never `co_await` inside an operand of
// `&&` or `||`: GCC 12 frees the frame wrongly there (seen as "free(): invalid pointer").
#pragma once

#include <cassert>
#include <coroutine>
#include <exception>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

namespace kcl::assignment {

// The lanes calls run on: each one call at a time, in order, so a slow lease-table scan (the
// leader's pass) never delays a heartbeat.
enum class Lane { kRenew = 0, kPoll = 1, kPass = 2 };
inline constexpr int kLanes = 3;

class CallRunner {
 public:
  virtual ~CallRunner() = default;
  // Runs `call` on `lane`, then resumes `waiting` on the coordinator's thread.
  virtual void run(Lane lane, std::function<void()> call, std::coroutine_handle<> waiting) = 0;
};

template <class T>
class CallTask;

namespace detail {

template <class T>
struct TaskPromiseBase {
  std::coroutine_handle<> continuation;
  std::suspend_always initial_suspend() noexcept { return {}; }
  struct Final {
    bool await_ready() noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> done) noexcept {
      auto next = done.promise().continuation;
      return next ? next : std::noop_coroutine();
    }
    void await_resume() noexcept {}
  };
  Final final_suspend() noexcept { return {}; }
  // Steps report failures as Status values; an exception here is a defect.
  void unhandled_exception() noexcept { std::terminate(); }
};

}  // namespace detail

// A lazily started coroutine producing a T (the awaiting coroutine resumes when it ends).
template <class T>
class [[nodiscard]] CallTask {
 public:
  struct promise_type : detail::TaskPromiseBase<T> {
    std::optional<T> value;
    CallTask get_return_object() {
      return CallTask(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    template <class U>
    void return_value(U&& v) {
      value.emplace(std::forward<U>(v));
    }
  };
  using Handle = std::coroutine_handle<promise_type>;

  CallTask(CallTask&& other) noexcept : h_(std::exchange(other.h_, {})) {}
  CallTask& operator=(CallTask&& other) noexcept {
    if (this != &other) {
      if (h_) h_.destroy();
      h_ = std::exchange(other.h_, {});
    }
    return *this;
  }
  CallTask(const CallTask&) = delete;
  CallTask& operator=(const CallTask&) = delete;
  ~CallTask() {
    if (h_) h_.destroy();
  }

  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> waiting) noexcept {
    h_.promise().continuation = waiting;
    return h_;
  }
  T await_resume() { return std::move(*h_.promise().value); }

  // Starts the task (the coordinator: it runs until its first call).
  void start() { h_.resume(); }
  bool done() const { return h_.done(); }
  T result() { return std::move(*h_.promise().value); }
  // Runs the task to its end on this thread; every call it awaits must run inline (no
  // CallRunner).
  T run_inline() {
    h_.resume();
    assert(h_.done());
    return result();
  }

 private:
  explicit CallTask(Handle h) : h_(h) {}
  Handle h_;
};

struct Done {};

// Awaits `fn()` run on `lane` of `runner`, or inline when `runner` is null.
template <class Fn>
class CallAwaiter {
 public:
  using Result = std::invoke_result_t<Fn&>;
  CallAwaiter(CallRunner* runner, Lane lane, Fn fn)
      : runner_(runner), lane_(lane), fn_(std::move(fn)) {}
  bool await_ready() const noexcept { return runner_ == nullptr; }
  void await_suspend(std::coroutine_handle<> waiting) {
    runner_->run(
        lane_, [this] { result_.emplace(fn_()); }, waiting);
  }
  Result await_resume() {
    if (!result_) result_.emplace(fn_());
    return std::move(*result_);
  }

 private:
  CallRunner* runner_;
  Lane lane_;
  Fn fn_;
  std::optional<Result> result_;
};

template <class Fn>
CallAwaiter<Fn> call(CallRunner* runner, Lane lane, Fn fn) {
  return CallAwaiter<Fn>(runner, lane, std::move(fn));
}

}  // namespace kcl::assignment
