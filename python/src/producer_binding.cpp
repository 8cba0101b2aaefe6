// kcl._kcl.Producer: kcl::Producer for Python. put() returns a concurrent.futures.Future
// resolved on a producer thread (which takes the GIL only to resolve it); flush() and
// shutdown() wait without the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "errors.h"
#include "gil.h"
#include "kcl/producer.h"
#include "options.h"
#include "py_logger.h"

namespace kclpy {

namespace {

std::string bytes_of(py::handle data) {
  if (py::isinstance<py::str>(data)) return data.cast<std::string>();  // UTF-8
  Py_buffer view;
  if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_SIMPLE) != 0) {
    PyErr_Clear();
    throw py::type_error("data must be bytes-like (bytes, bytearray, memoryview) or str");
  }
  std::string out(static_cast<const char*>(view.buf), static_cast<std::size_t>(view.len));
  PyBuffer_Release(&view);
  return out;
}

// Resolves one concurrent.futures.Future from a producer thread.
void resolve(py::handle future, const kcl::Result<kcl::PutResult>& result) {
  try {
    if (future.attr("set_running_or_notify_cancel")().cast<bool>()) {
      if (result.ok()) {
        future.attr("set_result")(py::cast(*result));
      } else {
        future.attr("set_exception")(exception_for(result.status()));
      }
    }
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("kcl.Producer resolving a put() future");
  }
}

py::dict stats_of(const kcl::ProducerStats& s) {
  py::dict d;
  d["records_put"] = s.records_put;
  d["records_succeeded"] = s.records_succeeded;
  d["records_failed"] = s.records_failed;
  d["records_retried"] = s.records_retried;
  d["put_records_calls"] = s.put_records_calls;
  d["kinesis_records_sent"] = s.kinesis_records_sent;
  d["throttled"] = s.throttled;
  d["shard_map_refreshes"] = s.shard_map_refreshes;
  d["buffered_records"] = s.buffered_records;
  d["buffered_bytes"] = s.buffered_bytes;
  d["in_flight_calls"] = s.in_flight_calls;
  return d;
}

class PyProducer {
 public:
  explicit PyProducer(const py::dict& options) {
    kcl::ProducerConfig config = producer_config_from(options);
    kcl::Dependencies deps;
    deps.logger = make_python_logger();
    std::optional<kcl::Result<std::unique_ptr<kcl::Producer>>> made;
    {
      py::gil_scoped_release released;
      made.emplace(kcl::Producer::create(std::move(config), deps));
    }
    check(made->status());
    producer_ = std::move(*made).value();
    future_class_ = py::module_::import("concurrent.futures").attr("Future");
  }
  ~PyProducer() {
    py::gil_scoped_release released;  // callbacks still to run take the GIL
    producer_.reset();
  }
  PyProducer(const PyProducer&) = delete;
  PyProducer& operator=(const PyProducer&) = delete;

  py::object put(py::handle partition_key, py::handle data, std::string explicit_hash_key) {
    if (!py::isinstance<py::str>(partition_key)) {
      throw py::type_error("partition_key must be a str");
    }
    std::string key = partition_key.cast<std::string>();
    std::string bytes = bytes_of(data);
    py::object future = future_class_();
    auto holder = std::make_shared<SharedObject>(future);
    {
      py::gil_scoped_release released;
      producer_->put(std::move(key), std::move(bytes), std::move(explicit_hash_key),
                     [holder](kcl::Result<kcl::PutResult> r) {
                       if (!python_alive()) return;
                       CallbackGil gil;  // the thread keeps its state between records
                       resolve(holder->get(), r);
                     });
    }
    return future;
  }

  // Waits up to `timeout` seconds (None: an hour) for every record put so far to resolve;
  // raises DeadlineExceededError naming how many are left.
  void flush(std::optional<double> timeout) {
    const auto deadline =
        std::chrono::steady_clock::now() +
        std::chrono::milliseconds(static_cast<long long>(timeout.value_or(3600) * 1000));
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      kcl::Status s = without_gil([&] {
        return producer_->flush(std::clamp(left, std::chrono::milliseconds(0), kSignalSlice));
      });
      if (s.ok() || left <= kSignalSlice) return check(s);
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  }
  void shutdown() {
    check(without_gil([&] { return producer_->shutdown(); }));
  }
  py::dict stats() const {
    return stats_of(without_gil([&] { return producer_->stats(); }));
  }

 private:
  std::unique_ptr<kcl::Producer> producer_;
  py::object future_class_;
};

}  // namespace

void bind_producer(py::module_& m) {
  py::class_<kcl::PutResult>(m, "PutResult", "Where a record was written.")
      .def_readonly("shard_id", &kcl::PutResult::shard_id)
      .def_readonly("sequence_number", &kcl::PutResult::sequence_number)
      .def_readonly("sub_sequence_number", &kcl::PutResult::sub_sequence_number)
      .def_readonly("aggregated", &kcl::PutResult::aggregated)
      .def_readonly("attempts", &kcl::PutResult::attempts)
      .def("__repr__", [](const kcl::PutResult& r) {
        return "kcl.PutResult(shard_id='" + r.shard_id + "', sequence_number='" +
               r.sequence_number +
               "', sub_sequence_number=" + std::to_string(r.sub_sequence_number) + ")";
      });
  py::class_<PyProducer>(m, "_Producer")
      .def(py::init<const py::dict&>())
      .def("put", &PyProducer::put, py::arg("partition_key"), py::arg("data"),
           py::arg("explicit_hash_key") = std::string())
      .def("flush", &PyProducer::flush, py::arg("timeout") = py::none())
      .def("shutdown", &PyProducer::shutdown)
      .def("stats", &PyProducer::stats);
  m.def("producer_option_names", &producer_option_names);
}

}  // namespace kclpy
