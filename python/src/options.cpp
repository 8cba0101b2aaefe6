#include "options.h"

#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "errors.h"

namespace kclpy {

namespace {

using std::chrono::milliseconds;

// A value of the wrong type or out of what the C++ field can hold; caught per option.
struct BadValue : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string type_name(py::handle v) { return py::str(py::type::handle_of(v).attr("__name__")); }

milliseconds to_duration(py::handle v) {
  py::module_ datetime = py::module_::import("datetime");
  double seconds = 0;
  if (py::isinstance(v, datetime.attr("timedelta"))) {
    seconds = v.attr("total_seconds")().cast<double>();
  } else if ((py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v)) &&
             !py::isinstance<py::bool_>(v)) {
    seconds = v.cast<double>();
  } else {
    throw BadValue("must be seconds (int or float) or a datetime.timedelta, not " + type_name(v));
  }
  if (!std::isfinite(seconds) || std::fabs(seconds) > 1e12) throw BadValue("is not a duration");
  return milliseconds(static_cast<long long>(std::llround(seconds * 1000)));
}

long long to_int(py::handle v, long long lo, long long hi) {
  if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v)) {
    throw BadValue("must be an int, not " + type_name(v));
  }
  long long x = 0;
  try {
    x = v.cast<long long>();
  } catch (const py::cast_error&) {
    throw BadValue("is too large");
  }
  if (x < lo || x > hi) {
    throw BadValue("is " + std::to_string(x) + "; it must be between " + std::to_string(lo) +
                   " and " + std::to_string(hi));
  }
  return x;
}

double to_number(py::handle v) {
  if ((!py::isinstance<py::int_>(v) && !py::isinstance<py::float_>(v)) ||
      py::isinstance<py::bool_>(v)) {
    throw BadValue("must be a number, not " + type_name(v));
  }
  return v.cast<double>();
}

bool to_bool(py::handle v) {
  if (!py::isinstance<py::bool_>(v)) throw BadValue("must be True or False, not " + type_name(v));
  return v.cast<bool>();
}

std::string to_text(py::handle v) {
  if (!py::isinstance<py::str>(v)) throw BadValue("must be a str, not " + type_name(v));
  return v.cast<std::string>();
}

template <typename E>
E to_choice(py::handle v, const std::map<std::string, E>& choices) {
  const std::string text = to_text(v);
  if (auto it = choices.find(text); it != choices.end()) return it->second;
  std::string names;
  for (const auto& [name, value] : choices) names += (names.empty() ? "" : ", ") + name;
  throw BadValue("is \"" + text + "\"; it must be one of " + names);
}

kcl::InitialPosition to_initial_position(py::handle v) {
  py::module_ datetime = py::module_::import("datetime");
  if (py::isinstance(v, datetime.attr("datetime"))) {
    if (v.attr("tzinfo").is_none()) {
      throw BadValue("a datetime must be timezone-aware (e.g. datetime.now(timezone.utc))");
    }
    const double seconds = v.attr("timestamp")().cast<double>();
    return kcl::InitialPosition::at_timestamp(std::chrono::system_clock::time_point(
        std::chrono::milliseconds(static_cast<long long>(seconds * 1000))));
  }
  using P = kcl::InitialPosition;
  const std::map<std::string, P> names = {{"TRIM_HORIZON", P::trim_horizon()},
                                          {"LATEST", P::latest()}};
  return to_choice(v, names);
}

std::vector<kcl::StreamConfig> to_streams(py::handle v) {
  if (py::isinstance<py::str>(v) || !py::isinstance<py::sequence>(v)) {
    throw BadValue("must be a list of stream names, not " + type_name(v));
  }
  std::vector<kcl::StreamConfig> streams;
  for (py::handle item : v) streams.push_back(kcl::StreamConfig{to_text(item), std::nullopt});
  return streams;
}

// name -> how to set it on a C.
template <typename C>
using Table = std::map<std::string, std::function<void(C&, py::handle)>>;

// The options of `inner` as options of an outer struct holding it at `member`.
template <typename Outer, typename Inner>
void lift(Table<Outer>& out, const Table<Inner>& inner, Inner Outer::*member) {
  for (const auto& [name, set] : inner) {
    out[name] = [set = set, member](Outer& o, py::handle v) { set(o.*member, v); };
  }
}

// An int for a field of type T (the field's own rules come from validate()).
template <typename T>
T to_int_of(py::handle v) {
  using Limits = std::numeric_limits<T>;
  constexpr unsigned long long kMaxLong = std::numeric_limits<long long>::max();
  constexpr unsigned long long max = static_cast<unsigned long long>(Limits::max());
  constexpr long long hi =
      max > kMaxLong ? static_cast<long long>(kMaxLong) : static_cast<long long>(max);
  constexpr long long lo = static_cast<long long>(Limits::min());
  return static_cast<T>(to_int(v, lo, hi));
}

#define KCL_PY_DURATION(table, name, field) \
  table[name] = [](auto& c, py::handle v) { c.field = to_duration(v); }
#define KCL_PY_INT(table, name, field, type) \
  table[name] = [](auto& c, py::handle v) { c.field = to_int_of<type>(v); }
#define KCL_PY_TEXT(table, name, field) \
  table[name] = [](auto& c, py::handle v) { c.field = to_text(v); }
#define KCL_PY_BOOL(table, name, field) \
  table[name] = [](auto& c, py::handle v) { c.field = to_bool(v); }
#define KCL_PY_NUMBER(table, name, field) \
  table[name] = [](auto& c, py::handle v) { c.field = to_number(v); }

kcl::StaticCredentials& credentials(kcl::AwsConfig& c) {
  if (!c.credentials) c.credentials.emplace();
  return *c.credentials;
}

Table<kcl::AwsConfig> aws_table() {
  Table<kcl::AwsConfig> t;
  KCL_PY_TEXT(t, "region", region);
  KCL_PY_TEXT(t, "profile", profile);
  KCL_PY_TEXT(t, "endpoint_url", endpoint_url);
  KCL_PY_TEXT(t, "kinesis_endpoint_url", kinesis_endpoint_url);
  KCL_PY_TEXT(t, "dynamodb_endpoint_url", dynamodb_endpoint_url);
  KCL_PY_TEXT(t, "cloudwatch_endpoint_url", cloudwatch_endpoint_url);
  t["access_key_id"] = [](auto& c, py::handle v) { credentials(c).access_key_id = to_text(v); };
  t["secret_access_key"] = [](auto& c, py::handle v) {
    credentials(c).secret_access_key = to_text(v);
  };
  t["session_token"] = [](auto& c, py::handle v) { credentials(c).session_token = to_text(v); };
  KCL_PY_INT(t, "aws_max_attempts", retry.max_attempts, int);
  KCL_PY_DURATION(t, "aws_base_delay", retry.base_delay);
  KCL_PY_DURATION(t, "aws_max_backoff", retry.max_backoff);
  KCL_PY_DURATION(t, "call_deadline", retry.call_deadline);
  KCL_PY_DURATION(t, "connect_timeout", http.connect_timeout);
  KCL_PY_DURATION(t, "request_timeout", http.request_timeout);
  KCL_PY_BOOL(t, "verify_tls", http.verify_tls);
  KCL_PY_TEXT(t, "ca_bundle", http.ca_bundle);
  KCL_PY_INT(t, "max_response_bytes", http.max_response_bytes, std::size_t);
  KCL_PY_INT(t, "receive_buffer_bytes", http.receive_buffer_bytes, std::size_t);
  return t;
}

Table<kcl::LeaseConfig> lease_table() {
  Table<kcl::LeaseConfig> t;
  KCL_PY_TEXT(t, "app", application_name);
  KCL_PY_TEXT(t, "table_name", table_name);
  KCL_PY_TEXT(t, "worker_id", worker_id);
  KCL_PY_DURATION(t, "failover_time", failover_time);
  t["lease_assignment"] = [](auto& c, py::handle v) {
    c.assignment =
        to_choice<kcl::LeaseAssignment>(v, {{"leader", kcl::LeaseAssignment::kLeader},
                                            {"worker_takes", kcl::LeaseAssignment::kWorkerTakes}});
  };
  KCL_PY_DURATION(t, "renew_interval", renew_interval);
  KCL_PY_DURATION(t, "poll_interval", poll_interval);
  KCL_PY_DURATION(t, "leader_poll_interval", leader_poll_interval);
  KCL_PY_DURATION(t, "settle_time", settle_time);
  KCL_PY_DURATION(t, "lease_scan_interval", lease_scan_interval);
  KCL_PY_DURATION(t, "handoff_timeout", handoff_timeout);
  KCL_PY_TEXT(t, "coordinator_table_name", coordinator_table_name);
  KCL_PY_INT(t, "renew_parallelism", renew_parallelism, int);
  KCL_PY_DURATION(t, "take_interval", take_interval);
  KCL_PY_INT(t, "max_leases_per_worker", max_leases_per_worker, int);
  KCL_PY_INT(t, "max_leases_to_steal_at_once", max_leases_to_steal_at_once, int);
  KCL_PY_INT(t, "take_ramp_floor", take_ramp_floor, int);
  KCL_PY_DURATION(t, "lost_lease_margin", lost_lease_margin);
  KCL_PY_NUMBER(t, "interval_jitter", interval_jitter);
  t["billing_mode"] = [](auto& c, py::handle v) {
    c.billing_mode =
        to_choice<kcl::BillingMode>(v, {{"pay_per_request", kcl::BillingMode::kPayPerRequest},
                                        {"provisioned", kcl::BillingMode::kProvisioned}});
  };
  KCL_PY_INT(t, "read_capacity_units", read_capacity_units, long long);
  KCL_PY_INT(t, "write_capacity_units", write_capacity_units, long long);
  KCL_PY_DURATION(t, "table_active_timeout", table_active_timeout);
  return t;
}

Table<kcl::RetrievalConfig> retrieval_table() {
  Table<kcl::RetrievalConfig> t;
  KCL_PY_INT(t, "max_records_per_call", max_records_per_call, int);
  KCL_PY_DURATION(t, "min_call_interval", min_call_interval);
  KCL_PY_DURATION(t, "idle_time_between_calls", idle_time_between_calls);
  KCL_PY_INT(t, "max_read_bytes_per_second", max_read_bytes_per_second, std::size_t);
  KCL_PY_INT(t, "max_prefetch_records", max_prefetch_records, std::size_t);
  KCL_PY_INT(t, "max_prefetch_bytes", max_prefetch_bytes, std::size_t);
  KCL_PY_DURATION(t, "throttle_backoff_base", throttle_backoff_base);
  KCL_PY_DURATION(t, "throttle_backoff_max", throttle_backoff_max);
  KCL_PY_DURATION(t, "get_records_timeout", get_records_timeout);
  KCL_PY_DURATION(t, "iterator_request_timeout", iterator_request_timeout);
  KCL_PY_INT(t, "call_max_attempts", call_max_attempts, int);
  t["retrieval_mode"] = [](auto& c, py::handle v) {
    c.mode = to_choice<kcl::RetrievalMode>(
        v, {{"polling", kcl::RetrievalMode::kPolling}, {"fan_out", kcl::RetrievalMode::kFanOut}});
  };
  KCL_PY_TEXT(t, "consumer_name", consumer_name);
  KCL_PY_DURATION(t, "fanout_idle_timeout", fanout_idle_timeout);
  KCL_PY_DURATION(t, "fanout_in_use_backoff", fanout_in_use_backoff);
  KCL_PY_DURATION(t, "fanout_resubscribe_jitter", fanout_resubscribe_jitter);
  return t;
}

Table<kcl::ProcessingConfig> processing_table() {
  Table<kcl::ProcessingConfig> t;
  KCL_PY_INT(t, "thread_pool_size", thread_pool_size, int);
  KCL_PY_DURATION(t, "parent_check_interval", parent_check_interval);
  KCL_PY_DURATION(t, "shard_sync_interval", shard_sync_interval);
  KCL_PY_DURATION(t, "failure_backoff_base", failure_backoff_base);
  KCL_PY_DURATION(t, "failure_backoff_max", failure_backoff_max);
  t["on_processor_error"] = [](auto& c, py::handle v) {
    c.on_processor_error = to_choice<kcl::ProcessorErrorPolicy>(
        v, {{"retry", kcl::ProcessorErrorPolicy::kRetry},
            {"skip", kcl::ProcessorErrorPolicy::kSkip},
            {"dead_letter", kcl::ProcessorErrorPolicy::kDeadLetter}});
  };
  KCL_PY_INT(t, "max_attempts_before_skip", max_attempts_before_skip, int);
  KCL_PY_INT(t, "max_attempts_before_dead_letter", max_attempts_before_dead_letter, int);
  // A JSON-lines file for poison records (on_processor_error="dead_letter", PulledRecord.nack).
  t["dead_letter_file"] = [](auto& c, py::handle v) {
    auto sink = kcl::make_file_dead_letter_sink(to_text(v));
    if (!sink.ok()) throw BadValue(sink.status().message());
    c.dead_letter_sink = *sink;
  };
  KCL_PY_DURATION(t, "hung_processor_warning", hung_processor_warning);
  KCL_PY_DURATION(t, "scheduler_interval", scheduler_interval);
  KCL_PY_DURATION(t, "shutdown_timeout", shutdown_timeout);
  KCL_PY_DURATION(t, "empty_batch_interval", empty_batch_interval);
  KCL_PY_DURATION(t, "stall_threshold", stall_threshold);
  return t;
}

Table<kcl::CloudWatchMetricsConfig> cloudwatch_table() {
  Table<kcl::CloudWatchMetricsConfig> t;
  t["cloudwatch_metrics"] = [](auto& c, py::handle v) {
    c.mode = to_choice<kcl::CloudWatchMetricsMode>(
        v, {{"off", kcl::CloudWatchMetricsMode::kOff},
            {"emf", kcl::CloudWatchMetricsMode::kEmf},
            {"put_metric_data", kcl::CloudWatchMetricsMode::kPutMetricData}});
  };
  KCL_PY_TEXT(t, "metrics_namespace", metrics_namespace);
  KCL_PY_TEXT(t, "emf_path", emf_path);
  KCL_PY_DURATION(t, "metrics_buffer_time", buffer_time);
  return t;
}

const Table<kcl::WorkerConfig>& worker_table() {
  static const Table<kcl::WorkerConfig> table = [] {
    Table<kcl::WorkerConfig> t;
    KCL_PY_TEXT(t, "stream", stream_name);
    t["streams"] = [](auto& c, py::handle v) { c.streams = to_streams(v); };
    KCL_PY_DURATION(t, "stream_poll_interval", stream_poll_interval);
    KCL_PY_DURATION(t, "former_stream_deletion_delay", former_stream_deletion_delay);
    t["initial_position"] = [](auto& c, py::handle v) {
      c.initial_position = to_initial_position(v);
    };
    KCL_PY_TEXT(t, "http_address", http_address);
    KCL_PY_TEXT(t, "http_advertise_address", http_advertise_address);
    lift(t, lease_table(), &kcl::WorkerConfig::leases);
    lift(t, retrieval_table(), &kcl::WorkerConfig::retrieval);
    lift(t, processing_table(), &kcl::WorkerConfig::processing);
    lift(t, aws_table(), &kcl::WorkerConfig::aws);
    lift(t, cloudwatch_table(), &kcl::WorkerConfig::cloudwatch);
    return t;
  }();
  return table;
}

const Table<kcl::PullConsumerConfig>& pull_table() {
  static const Table<kcl::PullConsumerConfig> table = [] {
    Table<kcl::PullConsumerConfig> t;
    lift(t, worker_table(), &kcl::PullConsumerConfig::worker);
    KCL_PY_INT(t, "max_unacked_per_shard", max_unacked_per_shard, std::size_t);
    KCL_PY_INT(t, "max_unacked_bytes_per_shard", max_unacked_bytes_per_shard, std::size_t);
    KCL_PY_DURATION(t, "checkpoint_interval", checkpoint_interval);
    KCL_PY_DURATION(t, "stuck_record_warning", stuck_record_warning);
    KCL_PY_DURATION(t, "shutdown_ack_timeout", shutdown_ack_timeout);
    return t;
  }();
  return table;
}

const Table<kcl::ProducerConfig>& producer_table() {
  static const Table<kcl::ProducerConfig> table = [] {
    Table<kcl::ProducerConfig> t;
    KCL_PY_TEXT(t, "stream", stream_name);
    lift(t, aws_table(), &kcl::ProducerConfig::aws);
    KCL_PY_DURATION(t, "linger", linger);
    KCL_PY_INT(t, "max_buffered_records", max_buffered_records, std::size_t);
    KCL_PY_INT(t, "max_buffered_bytes", max_buffered_bytes, std::size_t);
    KCL_PY_BOOL(t, "block_when_full", block_when_full);
    KCL_PY_BOOL(t, "aggregate", aggregate);
    KCL_PY_INT(t, "aggregation_max_bytes", aggregation_max_bytes, std::size_t);
    KCL_PY_INT(t, "max_attempts", max_attempts, int);
    KCL_PY_INT(t, "max_concurrent_requests", max_concurrent_requests, int);
    KCL_PY_INT(t, "max_in_flight_per_shard", max_in_flight_per_shard, int);
    KCL_PY_NUMBER(t, "shard_bytes_per_second", shard_bytes_per_second);
    KCL_PY_NUMBER(t, "shard_records_per_second", shard_records_per_second);
    KCL_PY_DURATION(t, "close_timeout", close_timeout);
    KCL_PY_BOOL(t, "report_positions", report_positions);
    return t;
  }();
  return table;
}

#undef KCL_PY_DURATION
#undef KCL_PY_INT
#undef KCL_PY_TEXT
#undef KCL_PY_BOOL
#undef KCL_PY_NUMBER

// Applies every option of `options`; raises ConfigError naming each bad or unknown one and
// then each rule config.validate() finds broken.
template <typename C>
C config_from(const py::dict& options, const Table<C>& table, C config = {}) {
  std::vector<std::string> problems;
  for (auto [key, value] : options) {
    const std::string name = py::str(key);
    auto it = table.find(name);
    if (it == table.end()) {
      problems.push_back("unknown option '" + name + "'");
      continue;
    }
    if (value.is_none()) continue;  // None: the default
    try {
      it->second(config, value);
    } catch (const BadValue& e) {
      problems.push_back("option '" + name + "' " + e.what());
    }
  }
  for (std::string& p : config.validate()) problems.push_back(std::move(p));
  if (!problems.empty()) raise_config_error(problems);
  return config;
}

template <typename C>
py::list names_of(const Table<C>& table) {
  py::list names;
  for (const auto& entry : table) names.append(entry.first);
  return names;
}

}  // namespace

kcl::WorkerConfig worker_config_from(const py::dict& options) {
  return config_from(options, worker_table());
}
kcl::WorkerConfig worker_config_from(const py::dict& options, kcl::WorkerConfig base) {
  return config_from(options, worker_table(), std::move(base));
}
kcl::PullConsumerConfig pull_config_from(const py::dict& options) {
  return config_from(options, pull_table());
}
kcl::ProducerConfig producer_config_from(const py::dict& options) {
  return config_from(options, producer_table());
}
py::list worker_option_names() { return names_of(worker_table()); }
py::list pull_option_names() { return names_of(pull_table()); }
py::list producer_option_names() { return names_of(producer_table()); }

}  // namespace kclpy
