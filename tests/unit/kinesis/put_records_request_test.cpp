// PutRecordsRequest: the body it writes is the JSON document nlohmann builds for the same
// records (data base64, keys escaped: quotes, backslashes, control characters, non-ASCII
// UTF-8), with ExplicitHashKey only where given; an empty request is still valid JSON.
#include "kinesis/put_records_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "aws/base64.h"
#include "aws/json_text.h"

namespace kcl::kinesis {
namespace {

using nlohmann::json;

TEST(PutRecordsRequestTest, BodyIsTheJsonOfItsRecords) {
  PutRecordsRequest req("stream \"one\"");
  json expected = {{"StreamName", "stream \"one\""}, {"Records", json::array()}};
  const std::string keys[] = {"plain",
                              "quote\" and \\ backslash",
                              "tab\tnew\nline\r",
                              std::string("nul\0bell\x07", 9),
                              "caf\xc3\xa9 \xe2\x82\xac",
                              std::string(256, 'k')};
  int i = 0;
  for (const std::string& key : keys) {
    const std::string data(static_cast<std::size_t>(i * 7), static_cast<char>(i * 41));
    const std::string hash_key = i % 2 == 0 ? "" : std::to_string(i * 1000);
    req.add(data, key, hash_key);
    json rec = {{"Data", aws::base64_encode(data)}, {"PartitionKey", key}};
    if (!hash_key.empty()) rec["ExplicitHashKey"] = hash_key;
    expected["Records"].push_back(rec);
    ++i;
  }
  EXPECT_EQ(req.records(), 6u);
  const std::string body = std::move(req).take_body();
  EXPECT_EQ(json::parse(body), expected) << body;
  EXPECT_EQ(body.find("\"ExplicitHashKey\":\"0\""), std::string::npos);
}

TEST(PutRecordsRequestTest, ReserveChangesNothingAndAnEmptyRequestIsValid) {
  PutRecordsRequest reserved("s");
  reserved.reserve(2, 10);
  PutRecordsRequest plain("s");
  for (auto* r : {&reserved, &plain}) r->add("data", "k");
  EXPECT_EQ(std::move(reserved).take_body(), std::move(plain).take_body());
  EXPECT_EQ(json::parse(std::move(PutRecordsRequest("s")).take_body()),
            json({{"StreamName", "s"}, {"Records", json::array()}}));
}

TEST(JsonTextTest, EscapedSizeMatchesWhatIsWrittenAndUtf8IsChecked) {
  for (const std::string& s : {std::string(""), std::string("abc"), std::string("\"\\\b\f\x1f"),
                               std::string(40, '\n'), std::string("x\x01y")}) {
    std::string out;
    aws::append_json_string(out, s);
    EXPECT_EQ(out.size(), aws::json_escaped_size(s) + 2);
    EXPECT_EQ(json::parse(out).get<std::string>(), s);
  }
  EXPECT_TRUE(aws::is_valid_utf8("caf\xc3\xa9"));
  EXPECT_FALSE(aws::is_valid_utf8("\xff\xfe"));
  EXPECT_FALSE(aws::is_valid_utf8("\xc3"));  // cut short
}

}  // namespace
}  // namespace kcl::kinesis
