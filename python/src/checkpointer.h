// checkpointer.h: kcl.Checkpointer, the Python face of the kcl::Checkpointer a processor
// callback receives. Valid while the callback it was passed to runs, and usable from any
// Python thread meanwhile (say a pool the callback waits on): calls are serialized and run
// without the GIL. After the callback returned it raises FailedPreconditionError.
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <mutex>
#include <string>

#include "kcl/processor.h"

namespace kclpy {

namespace py = pybind11;

class PyCheckpointer {
 public:
  explicit PyCheckpointer(std::string shard_id) : shard_id_(std::move(shard_id)) {}
  // Makes `checkpointer` the one calls go to (nullptr: none). Without the GIL.
  void attach(kcl::Checkpointer* checkpointer);
  // Runs f on the attached checkpointer without the GIL (GIL held on entry); raises the
  // Status as a kcl error.
  void run(const std::function<kcl::Status(kcl::Checkpointer&)>& f);
  const std::string& shard_id() const { return shard_id_; }
  py::tuple last_checkpoint();

 private:
  std::mutex mu_;
  kcl::Checkpointer* checkpointer_ = nullptr;
  std::string shard_id_;
};

// Attaches a checkpointer for the length of a scope (made and left without the GIL).
class Attached {
 public:
  Attached(PyCheckpointer& p, kcl::Checkpointer& c) : p_(p) { p_.attach(&c); }
  ~Attached() { p_.attach(nullptr); }
  Attached(const Attached&) = delete;
  Attached& operator=(const Attached&) = delete;

 private:
  PyCheckpointer& p_;
};

void bind_checkpointer(py::module_& m);

}  // namespace kclpy
