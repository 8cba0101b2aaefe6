// The one description of the worker's options (kcl/worker_options.h) against the code it
// describes: every field the table names has the table's type; every default lies in the
// table's range; and every bound of the table that holds whatever the other options are is
// the bound validate() enforces (a value at the bound passes, one step past it is refused
// with a problem naming the option). Setting options from text (kcl consume --option, the
// properties' own keys) is checked here too.
#include "kcl/worker_options.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace kcl {
namespace {

using std::chrono::milliseconds;

// A valid configuration in which every range check of validate() applies: several streams
// (the multi-stream intervals are checked) and provisioned billing (the capacities are).
WorkerConfig base_config() {
  WorkerConfig c;
  c.streams = {StreamConfig{"orders", {}}, StreamConfig{"audit", {}}};
  c.leases.application_name = "options-test";
  c.leases.billing_mode = BillingMode::kProvisioned;
  return c;
}

std::string joined_problems(const std::vector<std::string>& problems) {
  std::string out;
  for (const std::string& p : problems) out += p + "\n";
  return out;
}

// True when `problem` is about `o`: it starts with the field's path, its last two parts or
// its last part, then " is" ("processing.thread_pool_size is 0", "retry.max_attempts is",
// "failover_time is").
bool names_option(const std::string& problem, const WorkerOption& o) {
  const std::string field(o.field);
  std::vector<std::string> prefixes = {field};
  const std::size_t last = field.rfind('.');
  if (last != std::string::npos) {
    prefixes.push_back(field.substr(last + 1));
    const std::size_t before = field.rfind('.', last - 1);
    if (before != std::string::npos && before < last) prefixes.push_back(field.substr(before + 1));
  }
  for (const std::string& p : prefixes) {
    if (problem.rfind(p + " is", 0) == 0) return true;
  }
  return false;
}

bool any_names(const std::vector<std::string>& problems, const WorkerOption& o) {
  for (const std::string& p : problems) {
    if (names_option(p, o)) return true;
  }
  return false;
}

// Sets a numeric option's field to `v` (milliseconds for durations); false when the field
// cannot hold it (a negative size) or is not a number.
bool set_number(WorkerConfig& c, const WorkerOption& o, double v) {
  return std::visit(
      [v](auto p) -> bool {
        using P = decltype(p);
        if constexpr (std::is_same_v<P, std::monostate>) {
          return false;
        } else {
          using T = std::remove_pointer_t<P>;
          if constexpr (std::is_same_v<T, milliseconds>) {
            *p = milliseconds(static_cast<long long>(v));
            return true;
          } else if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
            if (v < static_cast<double>(std::numeric_limits<T>::lowest()) ||
                v > static_cast<double>(std::numeric_limits<T>::max())) {
              return false;
            }
            *p = static_cast<T>(v);
            return true;
          } else {
            return false;
          }
        }
      },
      o.field_of(c));
}

// True when the field's C++ type is the one the option's kind says.
bool has_kind_type(const WorkerOption& o, const OptionField& field) {
  return std::visit(
      [&](auto p) -> bool {
        using P = decltype(p);
        if constexpr (std::is_same_v<P, std::monostate>) {
          return o.kind == OptionKind::kSpecial;
        } else {
          using T = std::remove_pointer_t<P>;
          switch (o.kind) {
            case OptionKind::kDuration:
              return std::is_same_v<T, milliseconds>;
            case OptionKind::kInteger:
              return std::is_same_v<T, int> || std::is_same_v<T, long long> ||
                     std::is_same_v<T, std::size_t>;
            case OptionKind::kNumber:
              return std::is_same_v<T, double>;
            case OptionKind::kBool:
              return std::is_same_v<T, bool>;
            case OptionKind::kText:
              return std::is_same_v<T, std::string>;
            case OptionKind::kChoice:
              return std::is_enum_v<T>;
            case OptionKind::kSpecial:
              return false;
          }
          return false;
        }
      },
      field);
}

bool is_numeric(const WorkerOption& o) {
  return o.kind == OptionKind::kDuration || o.kind == OptionKind::kInteger ||
         o.kind == OptionKind::kNumber;
}

// One step in the option's unit: 1 ms, 1, or 0.01 for a number.
double step(const WorkerOption& o) { return o.kind == OptionKind::kNumber ? 0.01 : 1; }

TEST(WorkerOptions, NamesAreUniqueAndEachFieldHasTheTablesType) {
  std::set<std::string_view> names;
  for (const WorkerOption& o : worker_options()) {
    EXPECT_TRUE(names.insert(o.name).second) << "option " << o.name << " is listed twice";
    EXPECT_FALSE(o.doc.empty()) << o.name << " has no doc line";
    WorkerConfig c;
    EXPECT_TRUE(has_kind_type(o, o.field_of(c)))
        << o.name << " (" << o.field << ") is not of kind " << option_kind_name(o.kind);
  }
}

TEST(WorkerOptions, TheBaseConfigurationIsValid) {
  EXPECT_EQ(joined_problems(base_config().validate()), "");
}

// Every absolute bound of the table is validate()'s: the value at the bound passes, one step
// past it is refused, naming the option; 0 passes where the table allows it.
TEST(WorkerOptions, ValidateEnforcesEveryBoundOfTheTable) {
  int bounds = 0;
  for (const WorkerOption& o : worker_options()) {
    if (!is_numeric(o)) continue;
    auto check = [&](double v, bool valid) {
      WorkerConfig c = base_config();
      if (!set_number(c, o, v)) return;
      const auto problems = c.validate();
      EXPECT_EQ(any_names(problems, o), !valid)
          << o.name << " = " << v << (valid ? " should pass" : " should be refused")
          << "; problems:\n"
          << joined_problems(problems);
      ++bounds;
    };
    if (o.lo_note.empty() && o.lo > -kUnbounded) {
      check(o.lo, true);
      const double below = o.lo - step(o);
      check(below == 0 && o.zero_allowed ? -step(o) : below, false);
    }
    if (o.hi_note.empty() && o.hi < kUnbounded) {
      check(o.hi, true);
      check(o.hi + step(o), false);
    }
    if (o.zero_allowed) check(0, true);
  }
  EXPECT_GT(bounds, 150) << "the table's bounds were not checked";
}

// Every default (a default WorkerConfig's value) is shown as text that sets it again.
TEST(WorkerOptions, EveryDefaultIsShownAsTextThatSetsIt) {
  for (const WorkerOption& o : worker_options()) {
    if (!is_numeric(o)) continue;
    WorkerConfig c;
    const std::string text = option_value_text(o, c);
    ASSERT_FALSE(text.empty()) << o.name;
    WorkerConfig probe;
    ASSERT_TRUE(set_worker_option(probe, o.name, text).ok()) << o.name << " = " << text;
    EXPECT_EQ(option_value_text(o, probe), text) << o.name << ": the text does not round-trip";
  }
  EXPECT_EQ(option_default_text(*find_worker_option("failover_time")), "10 s");
  EXPECT_EQ(option_default_text(*find_worker_option("lease_assignment")), "leader");
  EXPECT_EQ(option_default_text(*find_worker_option("interval_jitter")), "0.1");
  EXPECT_EQ(option_range_text(*find_worker_option("renew_interval")),
            "10 ms .. failover_time / 2, or 0");
  EXPECT_EQ(option_range_text(*find_worker_option("retrieval_mode")), "polling | fan_out");
}

TEST(WorkerOptions, EveryChoiceNameSetsItsValue) {
  for (const WorkerOption& o : worker_options()) {
    if (o.kind != OptionKind::kChoice) continue;
    std::size_t start = 0;
    while (start <= o.choices.size()) {
      std::size_t end = o.choices.find('|', start);
      if (end == std::string_view::npos) end = o.choices.size();
      const std::string name(o.choices.substr(start, end - start));
      WorkerConfig c;
      ASSERT_TRUE(set_worker_option(c, o.name, name).ok()) << o.name << " = " << name;
      EXPECT_EQ(option_value_text(o, c), name);
      start = end + 1;
    }
    WorkerConfig c;
    EXPECT_FALSE(set_worker_option(c, o.name, "no-such-choice").ok()) << o.name;
  }
}

TEST(WorkerOptions, TextValuesAreTypedAndProblemsNameTheOption) {
  WorkerConfig c;
  ASSERT_TRUE(set_worker_option(c, "failover_time=3s").ok());
  EXPECT_EQ(c.leases.failover_time, milliseconds(3000));
  ASSERT_TRUE(set_worker_option(c, "renew_interval", "1.5 min").ok());
  EXPECT_EQ(c.leases.renew_interval, milliseconds(90000));
  ASSERT_TRUE(set_worker_option(c, "take_interval", "0").ok());
  ASSERT_TRUE(set_worker_option(c, "lease_assignment", "Worker-Takes").ok());
  EXPECT_EQ(c.leases.assignment, LeaseAssignment::kWorkerTakes);
  ASSERT_TRUE(set_worker_option(c, "verify_tls", "FALSE").ok());
  EXPECT_FALSE(c.aws.http.verify_tls);
  ASSERT_TRUE(set_worker_option(c, "max_prefetch_bytes", "1048576").ok());
  EXPECT_EQ(c.retrieval.max_prefetch_bytes, std::size_t{1} << 20);
  ASSERT_TRUE(set_worker_option(c, "take_ramp_floor", "-1").ok()) << "validate()'s to refuse";
  EXPECT_EQ(c.leases.take_ramp_floor, -1);

  EXPECT_EQ(set_worker_option(c, "failover_time", "3000").message(),
            "option 'failover_time' = '3000': expected a duration with a unit: ms, s, min, h or "
            "d (e.g. 3s)");
  EXPECT_EQ(set_worker_option(c, "failover_tiem=3s").message(), "unknown option 'failover_tiem'");
  EXPECT_EQ(set_worker_option(c, "max_prefetch_records", "-5").message(),
            "option 'max_prefetch_records' = '-5': must not be negative");
  EXPECT_EQ(set_worker_option(c, "thread_pool_size", "99999999999").message(),
            "option 'thread_pool_size' = '99999999999': out of what the field holds");
  EXPECT_EQ(set_worker_option(c, "billing_mode", "free").message(),
            "option 'billing_mode' = 'free': expected one of pay_per_request,provisioned");
  EXPECT_EQ(set_worker_option(c, "verify_tls", "1").message(),
            "option 'verify_tls' = '1': expected true or false");
  EXPECT_FALSE(set_worker_option(c, "streams", "a,b").ok()) << "a special option";
  EXPECT_EQ(set_worker_option(c, "no equals sign").message(),
            "'no equals sign': expected NAME=VALUE");
}

}  // namespace
}  // namespace kcl
