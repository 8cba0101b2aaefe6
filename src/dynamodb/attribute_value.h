// AttributeValue: DynamoDB's typed value (S, N, B, SS, NS, BS, BOOL, NULL, M, L), and the
// JSON wire form of it.
#pragma once

#include <iosfwd>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kcl/status.h"

namespace kcl::dynamodb {

class AttributeValue;
using Item = std::map<std::string, AttributeValue>;

class AttributeValue {
 public:
  enum class Type { kS, kN, kB, kSS, kNS, kBS, kBool, kNull, kM, kL };

  AttributeValue() : type_(Type::kNull) {}
  static AttributeValue S(std::string s);
  static AttributeValue N(std::string decimal);
  static AttributeValue N(long long v);
  static AttributeValue B(std::string bytes);  // raw bytes (base64 on the wire)
  static AttributeValue SS(std::vector<std::string> v);
  static AttributeValue NS(std::vector<std::string> v);
  static AttributeValue BS(std::vector<std::string> v);
  static AttributeValue Bool(bool b);
  static AttributeValue Null();
  static AttributeValue M(Item m);
  static AttributeValue L(std::vector<AttributeValue> l);

  Type type() const { return type_; }
  // Accessors; valid only for the matching type (else an empty value).
  const std::string& s() const { return str_; }  // S, N (decimal text), B (raw bytes)
  const std::vector<std::string>& set() const { return set_; }  // SS, NS, BS
  bool boolean() const { return bool_; }
  const Item& m() const;
  const std::vector<AttributeValue>& l() const;

  // Semantic equality: same type and same value. Numbers compare by value ("1.50" == "1.5",
  // "1e2" == "100"); SS, NS and BS compare as sets (order does not matter); L in order.
  bool operator==(const AttributeValue& o) const;

  // The wire form: {"S": "..."}, {"N": "12"}, {"B": "<base64>"}, {"NULL": true}, ...
  nlohmann::json to_json() const;
  // Strict: exactly one known type key, each value of the right JSON type, N/NS valid
  // decimal numbers, B/BS valid base64, NULL only `true`, nesting at most 32 levels.
  // Errors: kInvalidArgument, e.g. "attribute value: N value is not a number: \"x\"".
  static Result<AttributeValue> from_json(const nlohmann::json& j);

 private:
  // A value of a string type (S, N, B) or of a set type (SS, NS, BS).
  static AttributeValue of_text(Type type, std::string s);
  static AttributeValue of_set(Type type, std::vector<std::string> s);

  Type type_;
  std::string str_;
  std::vector<std::string> set_;
  bool bool_ = false;
  std::shared_ptr<Item> map_;
  std::shared_ptr<std::vector<AttributeValue>> list_;
};

// "S", "N", "B", "SS", "NS", "BS", "BOOL", "NULL", "M", "L" (the wire names).
std::string_view to_string(AttributeValue::Type type);

// The wire form as one line of JSON (for logs and test failures; bytes that are not UTF-8
// are shown as U+FFFD).
std::ostream& operator<<(std::ostream& os, const AttributeValue& v);

nlohmann::json item_to_json(const Item& item);
// Errors: kInvalidArgument naming the attribute path, e.g.
// "attribute 'leaseCounter': N value is not a number: \"abc\"" or "attribute 'm.a[2]': ...".
Result<Item> item_from_json(const nlohmann::json& j);

}  // namespace kcl::dynamodb
