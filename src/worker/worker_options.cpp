// worker_options.h: looking options up, showing them, and setting them from text.
#include "kcl/worker_options.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>

namespace kcl {

namespace {

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "3 s", "1.5 min"... as the shortest exact unit shows it.
std::string duration_text(std::chrono::milliseconds d) {
  const long long ms = d.count();
  struct Unit {
    long long size;
    const char* name;
  };
  static constexpr Unit kUnits[] = {{86400000, "d"}, {3600000, "h"}, {60000, "min"}, {1000, "s"}};
  for (const Unit& u : kUnits) {
    if (ms != 0 && ms % u.size == 0) return std::to_string(ms / u.size) + " " + u.name;
  }
  return std::to_string(ms) + " ms";
}

std::string number_text(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  std::string s = std::to_string(v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  return s;
}

std::string bound_text(const WorkerOption& o, double v) {
  return o.kind == OptionKind::kDuration
             ? duration_text(std::chrono::milliseconds(static_cast<long long>(v)))
             : number_text(v);
}

// The index of `text` among the '|'-separated `choices`, or -1.
int choice_index(std::string_view choices, std::string_view text) {
  std::string wanted = lowercase(text);
  for (char& c : wanted) c = c == '-' ? '_' : c;
  int index = 0;
  std::size_t start = 0;
  while (start <= choices.size()) {
    std::size_t end = choices.find('|', start);
    if (end == std::string_view::npos) end = choices.size();
    if (choices.substr(start, end - start) == wanted) return index;
    ++index;
    start = end + 1;
  }
  return -1;
}

std::string_view choice_name(std::string_view choices, int index) {
  std::size_t start = 0;
  for (int i = 0; i < index; ++i) {
    start = choices.find('|', start);
    if (start == std::string_view::npos) return "?";
    ++start;
  }
  return choices.substr(start, choices.find('|', start) - start);
}

Status bad_value(const WorkerOption& o, std::string_view value, const std::string& why) {
  return Status(StatusCode::kInvalidArgument,
                "option '" + std::string(o.name) + "' = '" + std::string(value) + "': " + why);
}

// "500ms", "3s", "1.5min", "1h", "7d" (a space before the unit is fine), or "0".
bool parse_duration(std::string_view text, std::chrono::milliseconds& out) {
  const std::string s(text);
  char* end = nullptr;
  const double n = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(n)) return false;
  std::string unit = lowercase(std::string_view(end));
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  double scale = 0;
  if (unit == "ms")
    scale = 1;
  else if (unit == "s")
    scale = 1000;
  else if (unit == "min")
    scale = 60000;
  else if (unit == "h")
    scale = 3600000;
  else if (unit == "d")
    scale = 86400000;
  else if (unit.empty() && n == 0)
    scale = 1;
  else
    return false;
  const double ms = n * scale;
  if (std::fabs(ms) > 1e15) return false;
  out = std::chrono::milliseconds(std::llround(ms));
  return true;
}

template <typename T>
Status set_integer(const WorkerOption& o, std::string_view value, T* field) {
  long long n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size()) {
    return bad_value(o, value, "expected a whole number");
  }
  const bool fits = n < 0 ? n >= static_cast<long long>(std::numeric_limits<T>::min())
                          : static_cast<unsigned long long>(n) <= std::numeric_limits<T>::max();
  if (!fits) {
    return bad_value(o, value, "out of what the field holds");
  }
  *field = static_cast<T>(n);
  return Status::Ok();
}

template <typename E>
Status set_choice(const WorkerOption& o, std::string_view value, E* field) {
  const int i = choice_index(o.choices, value);
  if (i < 0) {
    std::string names(o.choices);
    for (char& c : names) c = c == '|' ? ',' : c;
    return bad_value(o, value, "expected one of " + names);
  }
  *field = static_cast<E>(i);
  return Status::Ok();
}

// Sets `field` from `value` (the visitor of set_worker_option).
struct TextSetter {
  const WorkerOption& o;
  std::string_view value;

  Status operator()(std::monostate) const {
    return Status(StatusCode::kInvalidArgument,
                  "option '" + std::string(o.name) +
                      "' cannot be given as NAME=VALUE here; use its own flag or key");
  }
  Status operator()(std::chrono::milliseconds* f) const {
    if (!parse_duration(value, *f)) {
      return bad_value(o, value, "expected a duration with a unit: ms, s, min, h or d (e.g. 3s)");
    }
    return Status::Ok();
  }
  Status operator()(int* f) const { return set_integer(o, value, f); }
  Status operator()(long long* f) const { return set_integer(o, value, f); }
  Status operator()(std::size_t* f) const {
    if (!value.empty() && value.front() == '-') return bad_value(o, value, "must not be negative");
    return set_integer(o, value, f);
  }
  Status operator()(double* f) const {
    const std::string s(value);
    char* end = nullptr;
    const double n = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(n))
      return bad_value(o, value, "expected a number");
    *f = n;
    return Status::Ok();
  }
  Status operator()(bool* f) const {
    const std::string v = lowercase(value);
    if (v != "true" && v != "false") return bad_value(o, value, "expected true or false");
    *f = v == "true";
    return Status::Ok();
  }
  Status operator()(std::string* f) const {
    *f = std::string(value);
    return Status::Ok();
  }
  template <typename E>
  Status operator()(E* f) const {
    static_assert(std::is_enum_v<E>);
    return set_choice(o, value, f);
  }
};

// The value of `field` as text (the visitor of option_value_text).
struct TextGetter {
  const WorkerOption& o;

  std::string operator()(std::monostate) const { return ""; }
  std::string operator()(std::chrono::milliseconds* f) const { return duration_text(*f); }
  std::string operator()(double* f) const { return number_text(*f); }
  std::string operator()(bool* f) const { return *f ? "true" : "false"; }
  std::string operator()(std::string* f) const { return *f; }
  template <typename T>
  std::string operator()(T* f) const {
    if constexpr (std::is_enum_v<T>) {
      return std::string(choice_name(o.choices, static_cast<int>(*f)));
    } else {
      return std::to_string(*f);
    }
  }
};

}  // namespace

const WorkerOption* find_worker_option(std::string_view name) {
  for (const WorkerOption& o : worker_options()) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

std::string option_value_text(const WorkerOption& option, const WorkerConfig& config) {
  WorkerConfig copy = config;  // field_of takes a mutable config; nothing is changed
  return std::visit(TextGetter{option}, option.field_of(copy));
}

std::string option_default_text(const WorkerOption& option) {
  return option_value_text(option, WorkerConfig{});
}

std::string option_range_text(const WorkerOption& o) {
  if (o.kind == OptionKind::kChoice) {
    std::string names(o.choices);
    std::string out;
    for (char c : names) out += c == '|' ? std::string(" | ") : std::string(1, c);
    return out;
  }
  std::string lo = !o.lo_note.empty()    ? std::string(o.lo_note)
                   : o.lo == -kUnbounded ? std::string()
                                         : bound_text(o, o.lo);
  std::string hi = !o.hi_note.empty()   ? std::string(o.hi_note)
                   : o.hi == kUnbounded ? std::string()
                                        : bound_text(o, o.hi);
  if (lo.empty() && hi.empty()) return "";
  std::string out = hi.empty() ? ">= " + lo : lo.empty() ? "<= " + hi : lo + " .. " + hi;
  if (o.zero_allowed) out += ", or 0";
  return out;
}

std::string_view option_kind_name(OptionKind kind) {
  switch (kind) {
    case OptionKind::kDuration:
      return "duration";
    case OptionKind::kInteger:
      return "int";
    case OptionKind::kNumber:
      return "number";
    case OptionKind::kBool:
      return "bool";
    case OptionKind::kText:
      return "text";
    case OptionKind::kChoice:
      return "choice";
    case OptionKind::kSpecial:
      return "special";
  }
  return "?";
}

Status set_worker_option(WorkerConfig& config, std::string_view name, std::string_view value) {
  const WorkerOption* o = find_worker_option(name);
  if (o == nullptr) {
    return Status(StatusCode::kInvalidArgument, "unknown option '" + std::string(name) + "'");
  }
  return std::visit(TextSetter{*o, value}, o->field_of(config));
}

Status set_worker_option(WorkerConfig& config, std::string_view name_equals_value) {
  const std::size_t eq = name_equals_value.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return Status(StatusCode::kInvalidArgument,
                  "'" + std::string(name_equals_value) + "': expected NAME=VALUE");
  }
  return set_worker_option(config, name_equals_value.substr(0, eq),
                           name_equals_value.substr(eq + 1));
}

}  // namespace kcl
