#include "dynamodb/attribute_value.h"

#include <algorithm>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <utility>

#include "aws/base64.h"

namespace kcl::dynamodb {
namespace {

using nlohmann::json;

// DynamoDB allows documents nested up to 32 levels.
constexpr int kMaxDepth = 32;
// How much of an offending value an error message quotes.
constexpr std::size_t kMaxQuoted = 40;

const Item& empty_item() {
  static const Item kEmpty;
  return kEmpty;
}

const std::vector<AttributeValue>& empty_list() {
  static const std::vector<AttributeValue> kEmpty;
  return kEmpty;
}

// A decimal number reduced to sign, significant digits (no leading or trailing zeros) and
// a power of ten: value = (-1)^negative * digits * 10^exponent. Zero has empty digits.
struct CanonicalNumber {
  bool negative = false;
  std::string digits;
  long long exponent = 0;

  std::string key() const {
    if (digits.empty()) return "0";
    return (negative ? "-" : "") + digits + "e" + std::to_string(exponent);
  }
};

enum class NumberError { kNone, kSyntax, kRange };

// Digits with at most one decimal point from s[i], moving `i` past them; `fraction_digits`
// counts those after the point.
void scan_mantissa(std::string_view s, std::size_t& i, std::string& digits,
                   std::size_t& fraction_digits) {
  bool seen_point = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c >= '0' && c <= '9') {
      digits.push_back(c);
      if (seen_point) ++fraction_digits;
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
}

// An exponent, (e|E) [+-] digits, at s[i] when there is one, moving `i` past it.
NumberError scan_exponent(std::string_view s, std::size_t& i, long long& exponent) {
  exponent = 0;
  if (i >= s.size() || (s[i] != 'e' && s[i] != 'E')) return NumberError::kNone;
  ++i;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    negative = s[i] == '-';
    ++i;
  }
  std::size_t start = i;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (exponent > 1'000'000) return NumberError::kRange;
    exponent = exponent * 10 + (s[i] - '0');
  }
  if (i == start) return NumberError::kSyntax;
  if (exponent > 1'000'000) return NumberError::kRange;
  if (negative) exponent = -exponent;
  return NumberError::kNone;
}

// Accepts what DynamoDB accepts: [+-] digits [. digits] [(e|E) [+-] digits], at least one
// digit in the mantissa, no spaces. Exponents beyond +-10^6 are rejected as out of range
// (DynamoDB's own range is about 1e-130 .. 1e126, which the service enforces).
std::optional<CanonicalNumber> parse_number(std::string_view s, NumberError* error) {
  *error = NumberError::kSyntax;
  CanonicalNumber n;
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    n.negative = s[i] == '-';
    ++i;
  }
  std::string digits;
  std::size_t fraction_digits = 0;
  scan_mantissa(s, i, digits, fraction_digits);
  if (digits.empty()) return std::nullopt;
  long long exponent = 0;
  if (NumberError e = scan_exponent(s, i, exponent); e != NumberError::kNone) {
    *error = e;
    return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;

  *error = NumberError::kNone;
  exponent -= static_cast<long long>(fraction_digits);
  std::size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return CanonicalNumber{};  // zero, whatever its sign or exponent
  std::size_t last = digits.find_last_not_of('0');
  n.digits = digits.substr(first, last - first + 1);
  n.exponent = exponent + static_cast<long long>(digits.size() - 1 - last);
  return n;
}

// The value used to compare numbers: canonical when it parses, else the text itself (an N
// built in code from text that is not a number still equals itself).
std::string number_key(const std::string& s) {
  NumberError error;
  auto n = parse_number(s, &error);
  return n ? n->key() : "?" + s;
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  if (s.size() > kMaxQuoted) {
    out.append(s.substr(0, kMaxQuoted));
    out += "...";
  } else {
    out.append(s);
  }
  out += "\"";
  return out;
}

std::string json_kind(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "a number";
    case json::value_t::binary:
      return "binary";
    case json::value_t::discarded:
      return "invalid JSON";
  }
  return "unknown";
}

Status parse_error(const std::string& path, const std::string& what) {
  std::string msg = path.empty() ? "attribute value: " : "attribute '" + path + "': ";
  return Status(StatusCode::kInvalidArgument, msg + what);
}

Result<AttributeValue> parse_value(const json& j, const std::string& path, int depth);

Result<Item> parse_item(const json& j, const std::string& path_prefix, int depth) {
  if (!j.is_object()) {
    return Status(StatusCode::kInvalidArgument,
                  (path_prefix.empty() ? std::string("item") : "attribute '" + path_prefix + "'") +
                      ": expected an object of attributes, got " + json_kind(j));
  }
  Item item;
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::string path = path_prefix.empty() ? it.key() : path_prefix + "." + it.key();
    auto v = parse_value(it.value(), path, depth);
    if (!v.ok()) return v.status();
    item.emplace(it.key(), std::move(v).value());
  }
  return item;
}

Result<std::string> parse_number_text(const json& j, const std::string& path,
                                      std::string_view type) {
  if (!j.is_string()) {
    return parse_error(path, std::string(type) + " value must be a string, got " + json_kind(j));
  }
  const auto& s = j.get_ref<const std::string&>();
  NumberError error;
  if (!parse_number(s, &error)) {
    return parse_error(path, std::string(type) +
                                 (error == NumberError::kRange ? " value is out of range: "
                                                               : " value is not a number: ") +
                                 quote(s));
  }
  return s;
}

Result<std::string> parse_binary_text(const json& j, const std::string& path,
                                      std::string_view type) {
  if (!j.is_string()) {
    return parse_error(path, std::string(type) + " value must be a string, got " + json_kind(j));
  }
  std::string bytes;
  if (!aws::base64_decode_append(j.get_ref<const std::string&>(), bytes)) {
    return parse_error(path, std::string(type) + " value is not valid base64: " +
                                 quote(j.get_ref<const std::string&>()));
  }
  return bytes;
}

Result<std::vector<std::string>> parse_set(const json& j, const std::string& path,
                                           std::string_view type) {
  if (!j.is_array()) {
    return parse_error(path, std::string(type) + " value must be an array, got " + json_kind(j));
  }
  std::vector<std::string> out;
  out.reserve(j.size());
  std::size_t index = 0;
  for (const auto& e : j) {
    const std::string elem_type = std::string(type) + " element " + std::to_string(index);
    if (type == "SS") {
      if (!e.is_string()) {
        return parse_error(path, elem_type + " must be a string, got " + json_kind(e));
      }
      out.push_back(e.get<std::string>());
    } else if (type == "NS") {
      auto n = parse_number_text(e, path, elem_type);
      if (!n.ok()) return n.status();
      out.push_back(std::move(n).value());
    } else {
      auto b = parse_binary_text(e, path, elem_type);
      if (!b.ok()) return b.status();
      out.push_back(std::move(b).value());
    }
    ++index;
  }
  return out;
}

// The path of a nested value, for messages.
std::string nested_path(const std::string& path) {
  return path.empty() ? std::string("<value>") : path;
}

Result<AttributeValue> parse_map(const json& v, const std::string& path, int depth) {
  if (!v.is_object()) return parse_error(path, "M value must be an object, got " + json_kind(v));
  auto m = parse_item(v, nested_path(path), depth + 1);
  if (!m.ok()) return m.status();
  return AttributeValue::M(std::move(m).value());
}

Result<AttributeValue> parse_list(const json& v, const std::string& path, int depth) {
  if (!v.is_array()) return parse_error(path, "L value must be an array, got " + json_kind(v));
  std::vector<AttributeValue> list;
  list.reserve(v.size());
  std::size_t index = 0;
  for (const auto& e : v) {
    auto p = parse_value(e, nested_path(path) + "[" + std::to_string(index) + "]", depth + 1);
    if (!p.ok()) return p.status();
    list.push_back(std::move(p).value());
    ++index;
  }
  return AttributeValue::L(std::move(list));
}

// The value `v` of the type key `type`.
Result<AttributeValue> parse_typed(const std::string& type, const json& v, const std::string& path,
                                   int depth) {
  if (type == "S") {
    if (!v.is_string()) return parse_error(path, "S value must be a string, got " + json_kind(v));
    return AttributeValue::S(v.get<std::string>());
  }
  if (type == "N") {
    auto n = parse_number_text(v, path, "N");
    if (!n.ok()) return n.status();
    return AttributeValue::N(std::move(n).value());
  }
  if (type == "B") {
    auto b = parse_binary_text(v, path, "B");
    if (!b.ok()) return b.status();
    return AttributeValue::B(std::move(b).value());
  }
  if (type == "SS" || type == "NS" || type == "BS") {
    auto s = parse_set(v, path, type);
    if (!s.ok()) return s.status();
    if (type == "SS") return AttributeValue::SS(std::move(s).value());
    if (type == "NS") return AttributeValue::NS(std::move(s).value());
    return AttributeValue::BS(std::move(s).value());
  }
  if (type == "BOOL") {
    if (!v.is_boolean()) {
      return parse_error(path, "BOOL value must be a boolean, got " + json_kind(v));
    }
    return AttributeValue::Bool(v.get<bool>());
  }
  if (type == "NULL") {
    if (!v.is_boolean()) {
      return parse_error(path, "NULL value must be true, got " + json_kind(v));
    }
    if (!v.get<bool>()) return parse_error(path, "NULL value must be true, got false");
    return AttributeValue::Null();
  }
  if (type == "M") return parse_map(v, path, depth);
  if (type == "L") return parse_list(v, path, depth);
  return parse_error(path, "unknown type key " + quote(type));
}

Result<AttributeValue> parse_value(const json& j, const std::string& path, int depth) {
  if (depth > kMaxDepth) {
    return parse_error(path, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  if (!j.is_object()) {
    return parse_error(path, "expected an object such as {\"S\": \"...\"}, got " + json_kind(j));
  }
  if (j.size() != 1) {
    return parse_error(path, "expected exactly one type key, got " + std::to_string(j.size()));
  }
  const auto it = j.begin();
  return parse_typed(it.key(), it.value(), path, depth);
}

json set_to_json(const std::vector<std::string>& set, bool binary) {
  json arr = json::array();
  for (const auto& s : set) arr.push_back(binary ? aws::base64_encode(s) : s);
  return arr;
}

}  // namespace

AttributeValue AttributeValue::of_text(Type type, std::string s) {
  AttributeValue v;
  v.type_ = type;
  v.str_ = std::move(s);
  return v;
}

AttributeValue AttributeValue::of_set(Type type, std::vector<std::string> s) {
  AttributeValue v;
  v.type_ = type;
  v.set_ = std::move(s);
  return v;
}

AttributeValue AttributeValue::S(std::string s) { return of_text(Type::kS, std::move(s)); }

AttributeValue AttributeValue::N(std::string decimal) {
  return of_text(Type::kN, std::move(decimal));
}

AttributeValue AttributeValue::N(long long n) { return N(std::to_string(n)); }

AttributeValue AttributeValue::B(std::string bytes) { return of_text(Type::kB, std::move(bytes)); }

AttributeValue AttributeValue::SS(std::vector<std::string> s) {
  return of_set(Type::kSS, std::move(s));
}

AttributeValue AttributeValue::NS(std::vector<std::string> s) {
  return of_set(Type::kNS, std::move(s));
}

AttributeValue AttributeValue::BS(std::vector<std::string> s) {
  return of_set(Type::kBS, std::move(s));
}

AttributeValue AttributeValue::Bool(bool b) {
  AttributeValue v;
  v.type_ = Type::kBool;
  v.bool_ = b;
  return v;
}

AttributeValue AttributeValue::Null() { return AttributeValue(); }

AttributeValue AttributeValue::M(Item m) {
  AttributeValue v;
  v.type_ = Type::kM;
  v.map_ = std::make_shared<Item>(std::move(m));
  return v;
}

AttributeValue AttributeValue::L(std::vector<AttributeValue> l) {
  AttributeValue v;
  v.type_ = Type::kL;
  v.list_ = std::make_shared<std::vector<AttributeValue>>(std::move(l));
  return v;
}

const Item& AttributeValue::m() const { return type_ == Type::kM && map_ ? *map_ : empty_item(); }

const std::vector<AttributeValue>& AttributeValue::l() const {
  return type_ == Type::kL && list_ ? *list_ : empty_list();
}

bool AttributeValue::operator==(const AttributeValue& o) const {
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::kS:
    case Type::kB:
      return str_ == o.str_;
    case Type::kN:
      return str_ == o.str_ || number_key(str_) == number_key(o.str_);
    case Type::kSS:
    case Type::kBS:
      return set_.size() == o.set_.size() && sorted(set_) == sorted(o.set_);
    case Type::kNS: {
      if (set_.size() != o.set_.size()) return false;
      std::vector<std::string> a, b;
      for (const auto& s : set_) a.push_back(number_key(s));
      for (const auto& s : o.set_) b.push_back(number_key(s));
      return sorted(std::move(a)) == sorted(std::move(b));
    }
    case Type::kBool:
      return bool_ == o.bool_;
    case Type::kNull:
      return true;
    case Type::kM:
      return m() == o.m();
    case Type::kL:
      return l() == o.l();
  }
  return false;
}

json AttributeValue::to_json() const {
  switch (type_) {
    case Type::kS:
      return json{{"S", str_}};
    case Type::kN:
      return json{{"N", str_}};
    case Type::kB:
      return json{{"B", aws::base64_encode(str_)}};
    case Type::kSS:
      return json{{"SS", set_to_json(set_, false)}};
    case Type::kNS:
      return json{{"NS", set_to_json(set_, false)}};
    case Type::kBS:
      return json{{"BS", set_to_json(set_, true)}};
    case Type::kBool:
      return json{{"BOOL", bool_}};
    case Type::kNull:
      return json{{"NULL", true}};
    case Type::kM:
      return json{{"M", item_to_json(m())}};
    case Type::kL: {
      json arr = json::array();
      for (const auto& e : l()) arr.push_back(e.to_json());
      return json{{"L", std::move(arr)}};
    }
  }
  return json{{"NULL", true}};
}

Result<AttributeValue> AttributeValue::from_json(const json& j) { return parse_value(j, "", 0); }

std::string_view to_string(AttributeValue::Type type) {
  using T = AttributeValue::Type;
  switch (type) {
    case T::kS:
      return "S";
    case T::kN:
      return "N";
    case T::kB:
      return "B";
    case T::kSS:
      return "SS";
    case T::kNS:
      return "NS";
    case T::kBS:
      return "BS";
    case T::kBool:
      return "BOOL";
    case T::kNull:
      return "NULL";
    case T::kM:
      return "M";
    case T::kL:
      return "L";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, const AttributeValue& v) {
  return os << v.to_json().dump(-1, ' ', false, json::error_handler_t::replace);
}

json item_to_json(const Item& item) {
  json obj = json::object();
  for (const auto& [name, value] : item) obj[name] = value.to_json();
  return obj;
}

Result<Item> item_from_json(const json& j) { return parse_item(j, "", 0); }

}  // namespace kcl::dynamodb
