// py_logger.h: a kcl::Logger that forwards kcl-cpp's log lines to Python's `logging`, under
// the logger "kcl.<first word of the component>" (kcl.worker, kcl.consumer, kcl.lease, ...),
// each message prefixed with "[component] ".
//
// Threads: the core calls log() from its own threads; each call takes the GIL for the length
// of the logging call only. The binding never holds the GIL while it waits for a core thread
// (every blocking call into the core releases it), so a core thread logging while the
// application stops the worker cannot deadlock. Once the interpreter is finalizing, lines go
// to stderr instead (a thread must not take the GIL then).
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <memory>
#include <string_view>

#include "kcl/logging.h"

namespace kclpy {

namespace py = pybind11;

// True while Python code may run on this thread after taking the GIL.
bool python_alive();

class PyLogger final : public kcl::Logger {
 public:
  // Reads the effective level of logging.getLogger("kcl") now (GIL held); refresh() reads
  // it again (the worker and the pull consumer do at start()). A lower level set after that
  // is not seen; a higher one still filters in Python.
  PyLogger();
  ~PyLogger() override;
  void refresh();  // GIL held
  bool enabled(kcl::LogLevel level) const override;
  void log(kcl::LogLevel level, std::string_view component, std::string_view message) override;

 private:
  PyObject* forward_ = nullptr;     // kcl._logging.forward(level, component, message), owned
  std::atomic<int> threshold_{20};  // logging.INFO
};

std::shared_ptr<kcl::Logger> make_python_logger();

}  // namespace kclpy
