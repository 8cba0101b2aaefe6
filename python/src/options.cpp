#include "options.h"

#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "errors.h"
#include "kcl/worker_options.h"

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

// Sets the field of one option of the table (include/kcl/worker_options.h) from a Python
// value of the option's type.
struct FieldSetter {
  const kcl::WorkerOption& option;
  py::handle value;

  void operator()(std::monostate) const { throw BadValue("is set by code of its own"); }
  void operator()(milliseconds* f) const { *f = to_duration(value); }
  void operator()(double* f) const { *f = to_number(value); }
  void operator()(bool* f) const { *f = to_bool(value); }
  void operator()(std::string* f) const { *f = to_text(value); }
  template <typename T>
  void operator()(T* f) const {
    if constexpr (std::is_enum_v<T>) {
      *f = static_cast<T>(to_choice(value, choices_of(option)));
    } else {
      *f = to_int_of<T>(value);
    }
  }
  // The names of a choice (in the enum's order) -> their index.
  static std::map<std::string, int> choices_of(const kcl::WorkerOption& o) {
    std::map<std::string, int> names;
    std::size_t start = 0;
    for (int i = 0; start <= o.choices.size(); ++i) {
      std::size_t end = o.choices.find('|', start);
      if (end == std::string_view::npos) end = o.choices.size();
      names.emplace(std::string(o.choices.substr(start, end - start)), i);
      start = end + 1;
    }
    return names;
  }
};

// The options the table describes whose field starts with `prefix` ("" for all), as options
// of a WorkerConfig. The special ones are added by hand below.
Table<kcl::WorkerConfig> options_of_table(std::string_view prefix) {
  Table<kcl::WorkerConfig> t;
  for (const kcl::WorkerOption& o : kcl::worker_options()) {
    if (o.kind == kcl::OptionKind::kSpecial || o.field.substr(0, prefix.size()) != prefix) {
      continue;
    }
    t[std::string(o.name)] = [&o](kcl::WorkerConfig& c, py::handle v) {
      std::visit(FieldSetter{o, v}, o.field_of(c));
    };
  }
  return t;
}

// Static credentials (special in the table: they fill an optional).
Table<kcl::AwsConfig> credentials_table() {
  Table<kcl::AwsConfig> t;
  t["access_key_id"] = [](auto& c, py::handle v) { credentials(c).access_key_id = to_text(v); };
  t["secret_access_key"] = [](auto& c, py::handle v) {
    credentials(c).secret_access_key = to_text(v);
  };
  t["session_token"] = [](auto& c, py::handle v) { credentials(c).session_token = to_text(v); };
  return t;
}

// The AWS options (the table's aws.* ones and the credentials), for the producer.
Table<kcl::AwsConfig> aws_table() {
  Table<kcl::AwsConfig> t = credentials_table();
  for (auto& [name, set] : options_of_table("aws.")) {
    t[name] = [set = set](kcl::AwsConfig& a, py::handle v) {
      kcl::WorkerConfig holder;
      holder.aws = std::move(a);
      set(holder, v);
      a = std::move(holder.aws);
    };
  }
  return t;
}

// Every option of the table; the special ones (dead_letter_stream is not offered: python.md)
// set here.
const Table<kcl::WorkerConfig>& worker_table() {
  static const Table<kcl::WorkerConfig> table = [] {
    Table<kcl::WorkerConfig> t = options_of_table("");
    t["streams"] = [](auto& c, py::handle v) { c.streams = to_streams(v); };
    t["initial_position"] = [](auto& c, py::handle v) {
      c.initial_position = to_initial_position(v);
    };
    lift(t, credentials_table(), &kcl::WorkerConfig::aws);
    // A JSON-lines file for poison records (on_processor_error="dead_letter", PulledRecord.nack).
    t["dead_letter_file"] = [](auto& c, py::handle v) {
      auto sink = kcl::make_file_dead_letter_sink(to_text(v));
      if (!sink.ok()) throw BadValue(sink.status().message());
      c.processing.dead_letter_sink = *sink;
    };
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
