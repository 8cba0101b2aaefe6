// gil.h: holding Python objects on the core's threads, and waiting for the core without
// the GIL while Python's signal handlers still run.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <optional>
#include <utility>

#include "errors.h"
#include "kcl/status.h"
#include "py_logger.h"

namespace kclpy {

namespace py = pybind11;

// A reference to a Python object that may be dropped on any thread: the destructor takes
// the GIL (or, once the interpreter is finalizing, leaves the object to it).
class SharedObject {
 public:
  SharedObject() = default;
  explicit SharedObject(py::object o) : o_(o.release().ptr()) {}
  SharedObject(const SharedObject&) = delete;
  SharedObject& operator=(const SharedObject&) = delete;
  ~SharedObject() {
    if (o_ == nullptr || !python_alive()) return;
    py::gil_scoped_acquire gil;
    Py_DECREF(o_);
  }
  // With the GIL held.
  py::handle get() const { return o_; }

 private:
  PyObject* o_ = nullptr;
};

// The GIL for a call into Python from one of the core's threads (a processor's callback).
// pybind11's gil_scoped_acquire alone gives a thread Python does not know a new thread state
// for each call and deletes it after it, so threading.local values (and the thread's entry in
// `threading`) were lost from one callback to the next. Here such a thread keeps the state
// made at its first call until the thread ends; it is deleted then, with the GIL, unless
// Python is finalizing (left to the interpreter). The core's threads end without the GIL
// held by whoever waits for them (~PyWorker releases it).
class CallbackGil {
 public:
  CallbackGil() : unknown_(PyGILState_GetThisThreadState() == nullptr) {
    if (!unknown_) return;
    Keeper& k = keeper();
    if (!k.kept) {
      gil_.inc_ref();  // outlives this call: dropped by the keeper at the thread's end
      k.kept = true;
    }
  }
  CallbackGil(const CallbackGil&) = delete;
  CallbackGil& operator=(const CallbackGil&) = delete;

 private:
  struct Keeper {
    bool kept = false;
    ~Keeper() {
      if (!kept || !python_alive()) return;
      py::gil_scoped_acquire gil;
      gil.dec_ref();  // with gil's own, the state's count reaches 0: it is cleared and deleted
    }
  };
  static Keeper& keeper() {
    thread_local Keeper k;
    return k;
  }

  const bool unknown_;  // before gil_: whether the thread had no thread state of Python's
  py::gil_scoped_acquire gil_;
};

// f() without the GIL (held on entry and on return): for every call into the core that may
// wait or take a lock a core thread holds while it logs.
template <typename F>
auto without_gil(F&& f) {
  py::gil_scoped_release released;
  return f();
}

// How long each wait without the GIL lasts before Python's signal handlers get to run.
inline constexpr std::chrono::milliseconds kSignalSlice{100};

// Waits (GIL held on entry and exit, released while waiting) until wait_for(slice) returns
// a Status, or `timeout` passes (nullopt; no timeout: until it returns). Between slices
// Python's signal handlers run: a KeyboardInterrupt (Ctrl-C) calls begin_stop() and the wait
// goes on (until the stop is complete, or the timeout); any other exception a handler raises
// also calls begin_stop(), and is raised when the wait ends.
template <typename WaitFor, typename BeginStop>
std::optional<kcl::Status> wait_interruptibly_for(std::optional<std::chrono::milliseconds> timeout,
                                                  WaitFor&& wait_for, BeginStop&& begin_stop) {
  const auto deadline = timeout ? std::chrono::steady_clock::now() + *timeout
                                : std::chrono::steady_clock::time_point::max();
  std::optional<py::error_already_set> pending;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (timeout && left.count() <= 0) {
      if (pending) throw std::move(*pending);
      return std::nullopt;
    }
    std::optional<kcl::Status> done;
    {
      py::gil_scoped_release released;
      done = wait_for(timeout ? std::min(kSignalSlice, left) : kSignalSlice);
    }
    if (done) {
      if (pending) throw std::move(*pending);
      return done;
    }
    if (PyErr_CheckSignals() == 0) continue;
    py::error_already_set e;  // takes the exception out of the interpreter
    if (!e.matches(PyExc_KeyboardInterrupt) && !pending) pending.emplace(std::move(e));
    py::gil_scoped_release released;
    begin_stop();
  }
}

// wait_interruptibly_for() without a timeout.
template <typename WaitFor, typename BeginStop>
kcl::Status wait_interruptibly(WaitFor&& wait_for, BeginStop&& begin_stop) {
  return *wait_interruptibly_for(std::nullopt, std::forward<WaitFor>(wait_for),
                                 std::forward<BeginStop>(begin_stop));
}

// Seconds from Python as a duration: negative or NaN is 0, more than 10^9 s (inf) is 10^9 s
// (a cast of an out-of-range double is undefined).
inline std::chrono::milliseconds ms_of(double seconds) {
  if (!(seconds > 0)) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(static_cast<long long>(std::min(seconds, 1e9) * 1000));
}

}  // namespace kclpy
