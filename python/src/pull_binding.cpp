// kcl._kcl.PullConsumer and PulledRecord: kcl::PullConsumer for Python. next() waits without
// the GIL (in slices, so Ctrl-C is seen); ack() may be called from any Python thread, in any
// order, and also runs without the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "errors.h"
#include "gil.h"
#include "kcl/pull_consumer.h"
#include "options.h"
#include "py_logger.h"
#include "records.h"

namespace kclpy {

namespace {

// A record taken from the consumer: the record's fields (kcl.Record) and its ack. Dropped
// without the GIL (the record's shard may take a lock a core thread holds while it logs).
struct PyPulledRecord : PyRecord {
  explicit PyPulledRecord(kcl::PulledRecord r) : PyRecord{r.record()}, pulled(std::move(r)) {}
  ~PyPulledRecord() {
    py::gil_scoped_release released;
    pulled.reset();
  }
  PyPulledRecord(const PyPulledRecord&) = delete;
  PyPulledRecord& operator=(const PyPulledRecord&) = delete;
  std::mutex mu;  // one ack at a time, whatever thread calls it
  std::optional<kcl::PulledRecord> pulled;
};

void ack(PyPulledRecord& self) {
  kcl::Status s;
  {
    py::gil_scoped_release released;
    std::lock_guard lock(self.mu);
    s = self.pulled->ack();
  }
  check_ack(s);
}

void nack(PyPulledRecord& self, const std::string& reason) {
  kcl::Status s;
  {
    py::gil_scoped_release released;
    std::lock_guard lock(self.mu);
    s = self.pulled->nack(reason);
  }
  check_ack(s);
}

py::dict stats_of(const kcl::PullStats& s) {
  py::dict d;
  d["shards"] = s.shards;
  d["buffered"] = s.buffered;
  d["unacked"] = s.unacked;
  d["acked"] = s.acked;
  d["stuck_records"] = s.stuck_records;
  d["checkpoints"] = s.checkpoints;
  return d;
}

class PyPullConsumer {
 public:
  explicit PyPullConsumer(const py::dict& options) {
    kcl::Dependencies deps;
    logger_ = std::make_shared<PyLogger>();
    deps.logger = logger_;
    consumer_ = std::make_unique<kcl::PullConsumer>(pull_config_from(options), deps);
  }
  ~PyPullConsumer() {
    py::gil_scoped_release released;
    consumer_.reset();
  }
  PyPullConsumer(const PyPullConsumer&) = delete;
  PyPullConsumer& operator=(const PyPullConsumer&) = delete;

  void start() {
    logger_->refresh();  // the levels as configured by now
    check(without_gil([&] { return consumer_->start(); }));
  }

  // The next record within `timeout` seconds (None: wait until one comes or the consumer
  // stops); None on timeout and once stopping.
  py::object next(std::optional<double> timeout) {
    const auto deadline = std::chrono::steady_clock::now() + ms_of(timeout.value_or(1e9));
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      auto r = without_gil([&] {
        return consumer_->next(std::clamp(left, std::chrono::milliseconds(0), kSignalSlice));
      });
      if (r) return py::cast(std::make_unique<PyPulledRecord>(std::move(*r)));
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (left <= kSignalSlice || stopping()) return py::none();
    }
  }

  py::list next_batch(std::size_t max, double timeout) {
    std::vector<kcl::PulledRecord> batch =
        without_gil([&] { return consumer_->next_batch(max, ms_of(timeout)); });
    py::list out;
    for (kcl::PulledRecord& r : batch)
      out.append(py::cast(std::make_unique<PyPulledRecord>(std::move(r))));
    return out;
  }

  // True once a stop began (shutdown, begin_shutdown, or the worker stopped by itself).
  bool stopping() {
    if (stopping_) return true;
    py::gil_scoped_release released;
    return consumer_->wait_for(std::chrono::milliseconds(0)).has_value();
  }

  void shutdown() {
    stopping_ = true;
    check(without_gil([&] { return consumer_->shutdown(); }));
  }
  void begin_shutdown() {
    stopping_ = true;
    py::gil_scoped_release released;
    consumer_->begin_shutdown();
  }
  // Blocks until the consumer stopped, Ctrl-C beginning a graceful stop.
  void wait() {
    check(wait_interruptibly([this](auto slice) { return consumer_->wait_for(slice); },
                             [this] { consumer_->begin_shutdown(); }));
  }
  py::dict stats() const {
    return stats_of(without_gil([&] { return consumer_->stats(); }));
  }
  std::string worker_id() const { return consumer_->worker_id(); }
  std::string http_url() const { return consumer_->http_url(); }

 private:
  std::shared_ptr<PyLogger> logger_;
  std::unique_ptr<kcl::PullConsumer> consumer_;
  bool stopping_ = false;  // GIL held
};

}  // namespace

void bind_pull(py::module_& m) {
  py::class_<PyPulledRecord, PyRecord>(m, "PulledRecord",
                                       "A record taken from a kcl.PullConsumer; ack() it once "
                                       "it is done, from any thread, in any order.")
      .def("ack", &ack,
           "Acknowledges the record. Raises LeaseLostError when the shard's lease was lost "
           "since (the next owner delivers it again), FailedPreconditionError when already "
           "acknowledged, CancelledError after the consumer shut down.")
      .def("nack", &nack, py::arg("reason"),
           "Gives up on the record: it goes to the dead-letter file (option dead_letter_file) "
           "with `reason`, and counts as acknowledged once written there (blocks while the "
           "sink refuses). Raises as ack(), and FailedPreconditionError without a sink.")
      .def_property_readonly("stream_name",
                             [](const PyPulledRecord& r) { return r.pulled->stream_name(); });
  py::class_<PyPullConsumer>(m, "_PullConsumer")
      .def(py::init<const py::dict&>())
      .def("start", &PyPullConsumer::start)
      .def("next", &PyPullConsumer::next, py::arg("timeout") = py::none())
      .def("next_batch", &PyPullConsumer::next_batch, py::arg("max_records"), py::arg("timeout"))
      .def("stopping", &PyPullConsumer::stopping)
      .def("shutdown", &PyPullConsumer::shutdown)
      .def("begin_shutdown", &PyPullConsumer::begin_shutdown)
      .def("wait", &PyPullConsumer::wait)
      .def("stats", &PyPullConsumer::stats)
      .def_property_readonly("worker_id", &PyPullConsumer::worker_id)
      .def_property_readonly("http_url", &PyPullConsumer::http_url);
  m.def("pull_option_names", &pull_option_names);
}

}  // namespace kclpy
