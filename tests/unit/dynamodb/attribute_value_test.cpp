#include "dynamodb/attribute_value.h"

#include <gtest/gtest.h>

#include <climits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace kcl::dynamodb {
namespace {

using nlohmann::json;
using T = AttributeValue::Type;

std::string all_bytes() {
  std::string s;
  for (int i = 0; i < 256; ++i) s.push_back(static_cast<char>(i));
  return s;
}

// Round trip: to_json gives exactly `wire`, and parsing `wire` gives back an equal value.
void expect_round_trip(const AttributeValue& v, const json& wire) {
  EXPECT_EQ(v.to_json(), wire);
  auto parsed = AttributeValue::from_json(wire);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->type(), v.type());
  EXPECT_TRUE(*parsed == v) << wire.dump();
  // Through text, as on the wire.
  auto reparsed = AttributeValue::from_json(json::parse(v.to_json().dump()));
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  EXPECT_TRUE(*reparsed == v);
}

TEST(AttributeValueTest, StringRoundTrip) {
  expect_round_trip(AttributeValue::S("shardId-000000000001"), json{{"S", "shardId-000000000001"}});
  expect_round_trip(AttributeValue::S(""), json{{"S", ""}});
  expect_round_trip(AttributeValue::S("ünïcødé ✓ \"quoted\"\n"),
                    json{{"S", "ünïcødé ✓ \"quoted\"\n"}});
  EXPECT_EQ(AttributeValue::S("x").type(), T::kS);
  EXPECT_EQ(AttributeValue::S("x").s(), "x");
}

TEST(AttributeValueTest, NumberRoundTrip) {
  expect_round_trip(AttributeValue::N("12345678901234567890123456789012345678"),
                    json{{"N", "12345678901234567890123456789012345678"}});
  expect_round_trip(AttributeValue::N("-1.5e-10"), json{{"N", "-1.5e-10"}});
  expect_round_trip(AttributeValue::N(42), json{{"N", "42"}});
  EXPECT_EQ(AttributeValue::N(-7).s(), "-7");
  EXPECT_EQ(AttributeValue::N(LLONG_MIN).s(), "-9223372036854775808");
  EXPECT_EQ(AttributeValue::N(LLONG_MAX).s(), "9223372036854775807");
  for (const char* ok : {"0", "-0", "+3", "1.", ".5", "0.000", "1E5", "1e+5", "1e-05", "007"}) {
    EXPECT_TRUE(AttributeValue::from_json(json{{"N", ok}}).ok()) << ok;
  }
}

TEST(AttributeValueTest, BinaryRoundTrip) {
  expect_round_trip(AttributeValue::B("foobar"), json{{"B", "Zm9vYmFy"}});
  expect_round_trip(AttributeValue::B(""), json{{"B", ""}});
  auto bytes = all_bytes();
  auto v = AttributeValue::B(bytes);
  auto parsed = AttributeValue::from_json(json::parse(v.to_json().dump()));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->s(), bytes);
}

TEST(AttributeValueTest, SetsRoundTrip) {
  expect_round_trip(AttributeValue::SS({"shardId-1", "shardId-2"}),
                    json{{"SS", {"shardId-1", "shardId-2"}}});
  expect_round_trip(AttributeValue::NS({"1", "2.5", "-3"}), json{{"NS", {"1", "2.5", "-3"}}});
  expect_round_trip(AttributeValue::BS({"f", "fo", std::string("\0\xff", 2)}),
                    json{{"BS", {"Zg==", "Zm8=", "AP8="}}});
  EXPECT_EQ(AttributeValue::SS({"a"}).set(), std::vector<std::string>{"a"});
  EXPECT_EQ(AttributeValue::BS({"a"}).type(), T::kBS);
  EXPECT_EQ(AttributeValue::NS({"1"}).type(), T::kNS);
}

TEST(AttributeValueTest, BoolAndNullRoundTrip) {
  expect_round_trip(AttributeValue::Bool(true), json{{"BOOL", true}});
  expect_round_trip(AttributeValue::Bool(false), json{{"BOOL", false}});
  expect_round_trip(AttributeValue::Null(), json{{"NULL", true}});
  EXPECT_EQ(AttributeValue().type(), T::kNull);
  EXPECT_TRUE(AttributeValue::Bool(true).boolean());
}

TEST(AttributeValueTest, MapAndListRoundTrip) {
  Item inner{{"n", AttributeValue::N(1)}, {"s", AttributeValue::S("x")}};
  auto m = AttributeValue::M(inner);
  expect_round_trip(m, json{{"M", {{"n", {{"N", "1"}}}, {"s", {{"S", "x"}}}}}});
  EXPECT_EQ(m.m().size(), 2u);
  EXPECT_EQ(m.m().at("s").s(), "x");

  auto l = AttributeValue::L({AttributeValue::S("a"), AttributeValue::N(2), AttributeValue::Null(),
                              AttributeValue::M(inner), AttributeValue::L({})});
  expect_round_trip(l, json{{"L",
                             {{{"S", "a"}},
                              {{"N", "2"}},
                              {{"NULL", true}},
                              {{"M", {{"n", {{"N", "1"}}}, {"s", {{"S", "x"}}}}}},
                              {{"L", json::array()}}}}});
  EXPECT_EQ(l.l().size(), 5u);
  expect_round_trip(AttributeValue::M({}), json{{"M", json::object()}});

  // Accessors of the wrong type are empty, not a crash.
  EXPECT_TRUE(AttributeValue::S("x").m().empty());
  EXPECT_TRUE(AttributeValue::S("x").l().empty());
  EXPECT_TRUE(AttributeValue::N(1).set().empty());
}

TEST(AttributeValueTest, ItemRoundTripWithEveryType) {
  Item item{
      {"leaseKey", AttributeValue::S("shardId-000000000000")},
      {"leaseCounter", AttributeValue::N(17)},
      {"pendingCheckpointState", AttributeValue::B(all_bytes())},
      {"parentShardId", AttributeValue::SS({"shardId-a", "shardId-b"})},
      {"numbers", AttributeValue::NS({"1", "2"})},
      {"blobs", AttributeValue::BS({"x", "yz"})},
      {"flag", AttributeValue::Bool(true)},
      {"nothing", AttributeValue::Null()},
      {"map", AttributeValue::M({{"deep", AttributeValue::L({AttributeValue::N(1)})}})},
      {"list", AttributeValue::L({AttributeValue::S("a"), AttributeValue::Bool(false)})},
  };
  json wire = item_to_json(item);
  EXPECT_EQ(wire["leaseCounter"], (json{{"N", "17"}}));
  auto back = item_from_json(json::parse(wire.dump()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, item);
  auto empty = item_from_json(json::object());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(AttributeValueTest, EqualityIsSemantic) {
  EXPECT_EQ(AttributeValue::N("1.50"), AttributeValue::N("1.5"));
  EXPECT_EQ(AttributeValue::N("1e2"), AttributeValue::N("100"));
  EXPECT_EQ(AttributeValue::N("0.00"), AttributeValue::N("-0"));
  EXPECT_EQ(AttributeValue::N("007"), AttributeValue::N("7"));
  EXPECT_EQ(AttributeValue::N("+7"), AttributeValue::N("7.0e0"));
  EXPECT_NE(AttributeValue::N("100"), AttributeValue::N("10"));
  EXPECT_NE(AttributeValue::N("-1"), AttributeValue::N("1"));
  EXPECT_NE(AttributeValue::N("0.1"), AttributeValue::N("1"));
  EXPECT_NE(AttributeValue::N("abc"), AttributeValue::N("abd"));
  EXPECT_EQ(AttributeValue::N("abc"), AttributeValue::N("abc"));

  EXPECT_EQ(AttributeValue::SS({"a", "b"}), AttributeValue::SS({"b", "a"}));
  EXPECT_NE(AttributeValue::SS({"a", "b"}), AttributeValue::SS({"a"}));
  EXPECT_NE(AttributeValue::SS({"a", "b"}), AttributeValue::SS({"a", "c"}));
  EXPECT_EQ(AttributeValue::NS({"1", "2.0"}), AttributeValue::NS({"2", "1"}));
  EXPECT_EQ(AttributeValue::BS({"x", "y"}), AttributeValue::BS({"y", "x"}));
  EXPECT_NE(AttributeValue::SS({"a"}), AttributeValue::BS({"a"}));

  EXPECT_NE(AttributeValue::S("1"), AttributeValue::N("1"));
  EXPECT_NE(AttributeValue::S("a"), AttributeValue::B("a"));
  EXPECT_NE(AttributeValue::Bool(true), AttributeValue::Bool(false));
  EXPECT_NE(AttributeValue::Null(), AttributeValue::Bool(false));
  EXPECT_EQ(AttributeValue::Null(), AttributeValue());

  EXPECT_EQ(AttributeValue::L({AttributeValue::N(1), AttributeValue::N(2)}),
            AttributeValue::L({AttributeValue::N("1.0"), AttributeValue::N(2)}));
  EXPECT_NE(AttributeValue::L({AttributeValue::N(1), AttributeValue::N(2)}),
            AttributeValue::L({AttributeValue::N(2), AttributeValue::N(1)}));
  EXPECT_EQ(AttributeValue::M({{"a", AttributeValue::N(1)}}),
            AttributeValue::M({{"a", AttributeValue::N("1")}}));
  EXPECT_NE(AttributeValue::M({{"a", AttributeValue::N(1)}}),
            AttributeValue::M({{"b", AttributeValue::N(1)}}));
  EXPECT_NE(AttributeValue::M({}), AttributeValue::L({}));
}

TEST(AttributeValueTest, CopiesAreIndependentValues) {
  auto a = AttributeValue::M({{"x", AttributeValue::N(1)}});
  AttributeValue b = a;
  b = AttributeValue::S("changed");
  EXPECT_EQ(a.m().at("x"), AttributeValue::N(1));
  EXPECT_EQ(b.type(), T::kS);
}

TEST(AttributeValueTest, TypeNames) {
  EXPECT_EQ(to_string(T::kS), "S");
  EXPECT_EQ(to_string(T::kN), "N");
  EXPECT_EQ(to_string(T::kB), "B");
  EXPECT_EQ(to_string(T::kSS), "SS");
  EXPECT_EQ(to_string(T::kNS), "NS");
  EXPECT_EQ(to_string(T::kBS), "BS");
  EXPECT_EQ(to_string(T::kBool), "BOOL");
  EXPECT_EQ(to_string(T::kNull), "NULL");
  EXPECT_EQ(to_string(T::kM), "M");
  EXPECT_EQ(to_string(T::kL), "L");
}

TEST(AttributeValueTest, PrintsAsWireJson) {
  std::ostringstream os;
  os << AttributeValue::M({{"a", AttributeValue::N(1)}}) << " " << AttributeValue::S("\xff");
  EXPECT_EQ(os.str(), "{\"M\":{\"a\":{\"N\":\"1\"}}} {\"S\":\"\xEF\xBF\xBD\"}");
}

// Parses `wire` as a value and expects kInvalidArgument whose message contains `fragment`.
void expect_rejected(const json& wire, const std::string& fragment) {
  auto r = AttributeValue::from_json(wire);
  ASSERT_FALSE(r.ok()) << "accepted: " << wire.dump();
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << wire.dump();
  EXPECT_NE(r.status().message().find(fragment), std::string::npos)
      << "message: " << r.status().message() << " / expected fragment: " << fragment;
}

TEST(AttributeValueTest, RejectsMalformedShapes) {
  expect_rejected(json("S"), "expected an object");
  expect_rejected(json(5), "expected an object");
  expect_rejected(json::array(), "expected an object");
  expect_rejected(json(nullptr), "expected an object");
  expect_rejected(json::object(), "exactly one type key, got 0");
  expect_rejected(json{{"S", "a"}, {"N", "1"}}, "exactly one type key, got 2");
  expect_rejected(json{{"X", "a"}}, "unknown type key \"X\"");
  expect_rejected(json{{"s", "a"}}, "unknown type key \"s\"");
}

TEST(AttributeValueTest, RejectsWrongJsonTypes) {
  expect_rejected(json{{"S", 1}}, "S value must be a string, got a number");
  expect_rejected(json{{"N", 1}}, "N value must be a string, got a number");
  expect_rejected(json{{"B", true}}, "B value must be a string, got a boolean");
  expect_rejected(json{{"SS", "a"}}, "SS value must be an array, got a string");
  expect_rejected(json{{"SS", {"a", 1}}}, "SS element 1 must be a string");
  expect_rejected(json{{"NS", json::object()}}, "NS value must be an array");
  expect_rejected(json{{"BS", nullptr}}, "BS value must be an array, got null");
  expect_rejected(json{{"BOOL", "true"}}, "BOOL value must be a boolean, got a string");
  expect_rejected(json{{"BOOL", 1}}, "BOOL value must be a boolean");
  expect_rejected(json{{"NULL", false}}, "NULL value must be true");
  expect_rejected(json{{"NULL", "true"}}, "NULL value must be true");
  expect_rejected(json{{"M", json::array()}}, "M value must be an object, got an array");
  expect_rejected(json{{"L", json::object()}}, "L value must be an array, got an object");
}

TEST(AttributeValueTest, RejectsBadNumbers) {
  for (const char* bad : {"", "abc", "1.2.3", " 1", "1 ", "1e", "1e+", "--1", "+-1", "0x10", ".",
                          "-", "e5", "1,5", "NaN", "Infinity", "1_000"}) {
    expect_rejected(json{{"N", bad}}, "N value is not a number");
  }
  expect_rejected(json{{"N", "1e99999999999999999999"}}, "N value is out of range");
  expect_rejected(json{{"NS", {"1", "two"}}}, "NS element 1 value is not a number: \"two\"");
}

TEST(AttributeValueTest, RejectsBadBase64) {
  expect_rejected(json{{"B", "Zm9v!A=="}}, "B value is not valid base64");
  expect_rejected(json{{"B", "Zg="}}, "B value is not valid base64");
  expect_rejected(json{{"BS", {"Zg==", "%%%%"}}}, "BS element 1 value is not valid base64");
}

TEST(AttributeValueTest, LongOffendingValuesAreTruncatedInMessages) {
  std::string bad(1000, 'x');
  auto r = AttributeValue::from_json(json{{"N", bad}});
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.status().message().size(), 120u) << r.status().message();
}

// A NULL holding something else is named by its kind: its text was printed whole, so a long
// string filled the message and a deeply nested array overflowed the stack while printed.
TEST(AttributeValueTest, ABadNullValueIsNamedByItsKindNotPrinted) {
  auto long_string = AttributeValue::from_json(json{{"NULL", std::string(1 << 20, 'x')}});
  ASSERT_FALSE(long_string.ok());
  EXPECT_LT(long_string.status().message().size(), 120u);
  const std::size_t levels = 200000;
  auto deep = item_from_json(json::parse("{\"a\":{\"NULL\":" + std::string(levels, '[') +
                                         std::string(levels, ']') + "}}"));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().message(), "attribute 'a': NULL value must be true, got an array");
}

TEST(AttributeValueTest, ItemErrorsNameTheAttributePath) {
  auto r = item_from_json(json{{"leaseKey", {{"S", "shard"}}}, {"leaseCounter", {{"N", "x1"}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "attribute 'leaseCounter': N value is not a number: \"x1\"");

  auto nested =
      item_from_json(json{{"outer", {{"M", {{"inner", {{"L", {{{"N", "1"}}, {{"N", "?"}}}}}}}}}}});
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.status().message(),
            "attribute 'outer.inner[1]': N value is not a number: \"?\"");

  auto not_object = item_from_json(json::array());
  ASSERT_FALSE(not_object.ok());
  EXPECT_EQ(not_object.status().message(), "item: expected an object of attributes, got an array");

  auto bare = item_from_json(json{{"a", "plain string"}});
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.status().message().find("attribute 'a': expected an object"), std::string::npos)
      << bare.status().message();
}

TEST(AttributeValueTest, RejectsNestingDeeperThan32Levels) {
  json ok = {{"S", "leaf"}};
  for (int i = 0; i < 32; ++i) ok = json{{"L", {ok}}};
  EXPECT_TRUE(AttributeValue::from_json(ok).ok());
  json deep = ok;
  deep = json{{"L", {deep}}};
  expect_rejected(deep, "nested deeper than 32 levels");
  json deep_map = {{"S", "leaf"}};
  for (int i = 0; i < 40; ++i) deep_map = json{{"M", {{"k", deep_map}}}};
  expect_rejected(deep_map, "nested deeper than 32 levels");
}

}  // namespace
}  // namespace kcl::dynamodb
