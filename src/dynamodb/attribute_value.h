// AttributeValue: DynamoDB's typed value (S, N, B, SS, NS, BS, BOOL, NULL, M, L), and the
// JSON wire form of it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

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
  const std::string& s() const { return str_; }       // S, N (decimal text), B (raw bytes)
  const std::vector<std::string>& set() const { return set_; }  // SS, NS, BS
  bool boolean() const { return bool_; }
  const Item& m() const;
  const std::vector<AttributeValue>& l() const;

  bool operator==(const AttributeValue& o) const;

  nlohmann::json to_json() const;
  static Result<AttributeValue> from_json(const nlohmann::json& j);

 private:
  Type type_;
  std::string str_;
  std::vector<std::string> set_;
  bool bool_ = false;
  std::shared_ptr<Item> map_;
  std::shared_ptr<std::vector<AttributeValue>> list_;
};

nlohmann::json item_to_json(const Item& item);
Result<Item> item_from_json(const nlohmann::json& j);

}  // namespace kcl::dynamodb
