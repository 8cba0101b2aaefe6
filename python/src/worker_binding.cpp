// kcl._kcl.Worker: a kcl::Worker whose record processors are Python objects.
//
// Each shard's processor is a Python adapter (kcl._processor.ProcessorAdapter) around the
// application's kcl.RecordProcessor. The adapter catches what the application raises, logs
// the traceback once per series of failures, and returns a one-line description, which is
// thrown here as a C++ exception: the core then applies its processing policy (by default
// the same batch again after a backoff) exactly as for a C++ processor.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "checkpointer.h"
#include "errors.h"
#include "gil.h"
#include "kcl/multilang.h"
#include "kcl/worker.h"
#include "options.h"
#include "py_logger.h"
#include "records.h"

namespace kclpy {

namespace {

// Raises in the core what an adapter call returned (None: it went well).
void throw_if_failed(const std::optional<std::string>& failure) {
  if (failure) throw std::runtime_error(*failure);
}

// Calls adapter.<method>(args...) with the GIL; a failure (returned text, or an exception
// the adapter itself raised) comes back as text.
template <typename... Args>
std::optional<std::string> call_adapter(py::handle adapter, const char* method, Args&&... args) {
  try {
    py::object r = adapter.attr(method)(std::forward<Args>(args)...);
    if (r.is_none()) return std::nullopt;
    return r.cast<std::string>();
  } catch (py::error_already_set& e) {
    return std::string("the kcl processor adapter failed: ") + e.what();
  }
}

py::object records_of(std::span<const kcl::Record> records) {
  PyRecordBatch batch;
  batch.records.reserve(records.size());
  for (const kcl::Record& r : records) batch.records.push_back(PyRecord{r});
  return py::cast(std::move(batch));
}

class PyProcessor final : public kcl::RecordProcessor {
 public:
  explicit PyProcessor(py::object adapter) : adapter_(std::move(adapter)) {}

  void initialize(const kcl::InitializationInput& in) override {
    cp_ = std::make_shared<PyCheckpointer>(in.shard_id);
    CallbackGil gil;
    py::object pending = py::none();
    if (in.pending_checkpoint) {
      pending = py::make_tuple(in.pending_checkpoint->sequence_number(),
                               in.pending_checkpoint->sub_sequence_number());
    }
    throw_if_failed(call_adapter(adapter_.get(), "initialize", in.shard_id, in.stream_name,
                                 in.starting_position.sequence_number(),
                                 in.starting_position.sub_sequence_number(), pending,
                                 in.pending_checkpoint_state));
  }

  void process_records(const kcl::ProcessRecordsInput& in) override {
    Attached attached(*cp_, in.checkpointer);
    std::optional<std::string> failure;
    {
      CallbackGil gil;
      failure = call_adapter(adapter_.get(), "process_records", records_of(in.records),
                             py::cast(cp_), in.millis_behind_latest);
    }
    throw_if_failed(failure);
  }

  void lease_lost() override {
    CallbackGil gil;
    throw_if_failed(call_adapter(adapter_.get(), "lease_lost"));
  }

  void shard_ended(kcl::Checkpointer& checkpointer) override {
    final_call("shard_ended", checkpointer);
  }
  void shutdown_requested(kcl::Checkpointer& checkpointer) override {
    final_call("shutdown_requested", checkpointer);
  }

 private:
  void final_call(const char* method, kcl::Checkpointer& checkpointer) {
    Attached attached(*cp_, checkpointer);
    std::optional<std::string> failure;
    {
      CallbackGil gil;
      failure = call_adapter(adapter_.get(), method, py::cast(cp_));
    }
    throw_if_failed(failure);
  }

  SharedObject adapter_;
  std::shared_ptr<PyCheckpointer> cp_;
};

class PyFactory final : public kcl::RecordProcessorFactory {
 public:
  explicit PyFactory(py::object make_adapter) : make_adapter_(std::move(make_adapter)) {}
  std::unique_ptr<kcl::RecordProcessor> create(std::string_view shard_id) override {
    CallbackGil gil;
    try {
      return std::make_unique<PyProcessor>(make_adapter_.get()(std::string(shard_id)));
    } catch (py::error_already_set& e) {
      throw std::runtime_error(std::string("the processor factory raised: ") + e.what());
    }
  }

 private:
  SharedObject make_adapter_;
};

py::dict stats_of(const kcl::WorkerStats& s) {
  py::dict d;
  d["leases_held"] = s.leases_held;
  d["consumers"] = s.consumers;
  d["records_delivered"] = s.records_delivered;
  d["processor_failures"] = s.processor_failures;
  d["corrupt_aggregates"] = s.corrupt_aggregates;
  d["records_dead_lettered"] = s.records_dead_lettered;
  py::list failing;
  for (const kcl::FailingShard& f : s.failing_shards) {
    py::dict x;
    x["shard_id"] = f.shard_id;
    x["cause"] = f.cause.to_string();
    x["consecutive_failures"] = f.consecutive_failures;
    x["records_delivered"] = f.records_delivered;
    failing.append(x);
  }
  d["failing_shards"] = failing;
  return d;
}

class PyWorker {
 public:
  PyWorker(py::object make_adapter, const py::dict& options)
      : PyWorker(std::move(make_adapter), worker_config_from(options)) {}
  PyWorker(py::object make_adapter, kcl::WorkerConfig config) {
    kcl::Dependencies deps;
    logger_ = std::make_shared<PyLogger>();
    deps.logger = logger_;
    worker_ = std::make_unique<kcl::Worker>(
        std::move(config), std::make_shared<PyFactory>(std::move(make_adapter)), deps);
  }
  ~PyWorker() {
    py::gil_scoped_release released;  // the core's threads may log or call processors
    worker_.reset();
  }
  PyWorker(const PyWorker&) = delete;
  PyWorker& operator=(const PyWorker&) = delete;

  void start() {
    logger_->refresh();  // the levels as configured by now
    check(without_gil([&] { return worker_->start(); }));
  }
  void wait() {
    check(wait_interruptibly([this](auto slice) { return worker_->wait_for(slice); },
                             [this] { worker_->begin_shutdown(); }));
  }
  // Inside a processor callback the core only begins the stop and says so
  // (FailedPreconditionError); use begin_shutdown() there.
  void shutdown() {
    check(without_gil([&] { return worker_->shutdown(); }));
  }
  void begin_shutdown() {
    py::gil_scoped_release released;
    worker_->begin_shutdown();
  }
  // True once stopped (raising why, when it was an error); False after `seconds`.
  // Ctrl-C begins the graceful stop and the wait goes on (as wait()).
  bool wait_for(double seconds) {
    auto s = wait_interruptibly_for(
        ms_of(seconds), [this](auto slice) { return worker_->wait_for(slice); },
        [this] { worker_->begin_shutdown(); });
    if (s) check(*s);
    return s.has_value();
  }
  py::dict stats() const {
    return stats_of(without_gil([&] { return worker_->stats(); }));
  }
  std::string worker_id() const { return worker_->worker_id(); }
  std::string http_url() const { return worker_->http_url(); }

 private:
  std::shared_ptr<PyLogger> logger_;
  std::unique_ptr<kcl::Worker> worker_;
};

// The MultiLangDaemon properties file `text` (read from `origin`), as `kcl multilang` reads
// it (kcl/multilang.h). Raises kcl.ConfigError listing every problem.
kcl::MultiLangProperties settings_of(const std::string& text, const std::string& origin) {
  auto settings = kcl::read_multilang_properties(text, origin);
  if (!settings.ok()) raise_config_error({settings.status().message()});
  return std::move(settings).value();
}

// What the in-process runner (kcl.kclpy) needs besides the worker configuration.
py::dict multilang_properties(const std::string& text, const std::string& origin) {
  kcl::MultiLangProperties s = settings_of(text, origin);
  py::dict d;
  d["command"] = s.command;
  d["response_timeout"] = std::chrono::duration<double>(s.response_timeout).count();
  d["dead_letter_file"] = s.dead_letter_file;
  d["dead_letter_stream"] = s.dead_letter_stream;
  d["ignored_keys"] = s.ignored_keys;
  d["warnings"] = s.warnings;
  d["stream_name"] = s.worker.stream_name;
  d["application_name"] = s.worker.leases.application_name;
  py::list streams;
  for (const kcl::StreamConfig& sc : s.worker.streams) streams.append(sc.name);
  d["streams"] = streams;
  return d;
}

// A worker configured by a properties file, then by `options` (kcl.Worker's keywords).
std::unique_ptr<PyWorker> worker_from_properties(py::object make_adapter, const std::string& text,
                                                 const std::string& origin,
                                                 const py::dict& options) {
  kcl::WorkerConfig config = worker_config_from(options, settings_of(text, origin).worker);
  return std::make_unique<PyWorker>(std::move(make_adapter), std::move(config));
}

}  // namespace

void bind_worker(py::module_& m) {
  py::class_<PyWorker>(m, "_Worker")
      .def(py::init<py::object, const py::dict&>())
      .def_static("from_properties", &worker_from_properties)
      .def("start", &PyWorker::start)
      .def("wait", &PyWorker::wait)
      .def("shutdown", &PyWorker::shutdown)
      .def("begin_shutdown", &PyWorker::begin_shutdown)
      .def("wait_for", &PyWorker::wait_for)
      .def("stats", &PyWorker::stats)
      .def_property_readonly("worker_id", &PyWorker::worker_id)
      .def_property_readonly("http_url", &PyWorker::http_url);
  m.def("worker_option_names", &worker_option_names);
  m.def("multilang_properties", &multilang_properties);
}

}  // namespace kclpy
