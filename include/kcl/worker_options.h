// kcl/worker_options.h: one description of each option of kcl::WorkerConfig (name, type,
// default, range, one doc line, and the names the surfaces give it), from which the surfaces
// are made or checked:
//  - the Python package (python/src/options.cpp) builds its keyword table from it: the
//    keyword is the option's name;
//  - the `kcl consume` command line sets any option with `--option NAME=VALUE` (text values,
//    set_worker_option below) and names its dedicated flags here (`cli`);
//  - the MultiLangDaemon properties take the Java keys named here (`property`) and any
//    option by its name (kcl-cpp's own keys);
//  - WorkerConfig::validate() and the validate() of the nested structs keep their checks in
//    code (the relative rules need it); tests/unit/worker/worker_options_test.cpp checks
//    every absolute bound of this table against them, and
//    tests/unit/cli/option_surfaces_test.cpp checks that no surface lacks an option another
//    has.
// The default is not written here: it is the field's initializer in include/kcl, read from a
// default WorkerConfig (option_default_text).
//
// An application can use it too, e.g. to read a configuration file of NAME=VALUE lines into a
// WorkerConfig with set_worker_option() and list the options with worker_options().
//
// Thread safety: the table is constant; the functions are pure.
#pragma once

#include <chrono>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "kcl/status.h"
#include "kcl/worker.h"

namespace kcl {

enum class OptionKind {
  kDuration,  // std::chrono::milliseconds; as text: a number with ms, s, min, h or d
  kInteger,   // int, long long or std::size_t
  kNumber,    // double
  kBool,      // as text: true or false
  kText,      // std::string
  kChoice,    // an enum; as text: one of `choices`
  kSpecial,   // set by each surface's own code (a list, a time, credentials, a sink)
};

// The field an option sets, by its C++ type (std::monostate for kSpecial).
using OptionField =
    std::variant<std::monostate, std::chrono::milliseconds*, int*, long long*, std::size_t*,
                 double*, bool*, std::string*, LeaseAssignment*, BillingMode*, RetrievalMode*,
                 ProcessorErrorPolicy*, CloudWatchMetricsMode*, MetricsLevel*, KinesisWire*>;

inline constexpr double kUnbounded = std::numeric_limits<double>::infinity();

struct WorkerOption {
  std::string_view name;   // the Python keyword, --option NAME, the properties key
  std::string_view field;  // the WorkerConfig field: "leases.failover_time"
  OptionField (*field_of)(WorkerConfig&) = nullptr;
  OptionKind kind = OptionKind::kSpecial;
  // The range, in milliseconds for durations. A bound with a note depends on another option
  // (the note says how, e.g. "failover_time / 2"); -kUnbounded / kUnbounded: none.
  double lo = -kUnbounded;
  double hi = kUnbounded;
  std::string_view lo_note = {};
  std::string_view hi_note = {};
  bool zero_allowed = false;      // 0 is accepted besides [lo, hi] (a default or "off")
  std::string_view choices = {};  // kChoice: the names, in the enum's order, '|' between
  std::string_view doc = {};
  std::string_view cli = {};       // the dedicated `kcl consume` flag(s), if any
  std::string_view property = {};  // the MultiLangDaemon's Java key, if any
};

// Every option, in the order of the structs' fields.
std::span<const WorkerOption> worker_options();
// The option named `name`, or null.
const WorkerOption* find_worker_option(std::string_view name);

// The option's value in `config` as text (durations in ms, s, min or h; choices by name).
std::string option_value_text(const WorkerOption& option, const WorkerConfig& config);
// Its default: the value in a default WorkerConfig.
std::string option_default_text(const WorkerOption& option);
// "10 ms .. failover_time / 2, or 0", "leader | worker_takes", "" for none.
std::string option_range_text(const WorkerOption& option);
// "duration", "int", "number", "bool", "text", "choice", "special".
std::string_view option_kind_name(OptionKind kind);

// Sets option `name` from text: a duration needs a unit (500ms, 3s, 1.5min, 1h, 7d; 0 alone
// is 0), a choice is one of its names (any case, '-' for '_'), a bool true or false. Only
// the type is checked here (and what the field can hold); the rules are validate()'s.
// Errors: kInvalidArgument naming the option (unknown, special, or a malformed value).
Status set_worker_option(WorkerConfig& config, std::string_view name, std::string_view value);
// "NAME=VALUE" as above.
Status set_worker_option(WorkerConfig& config, std::string_view name_equals_value);

}  // namespace kcl
