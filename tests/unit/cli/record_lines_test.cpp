// The JSON lines of kcl tail / kcl consume: valid JSON that gives back every field.
#include "record_lines.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "aws/base64.h"

namespace kcl::cli {
namespace {

Record record(std::string data, std::string key = "k") {
  Record r;
  r.set_shard_id("shardId-000000000001");
  r.set_sequence_number("49590338271490256608559692538361571095921575989136588898");
  r.set_sub_sequence_number(18446744073709551615ull);
  r.set_partition_key(std::move(key));
  r.set_approximate_arrival_timestamp(
      std::chrono::system_clock::time_point(std::chrono::milliseconds(1795992038007)));
  r.set_data(std::move(data));
  return r;
}

TEST(RecordLinesTest, EveryFieldComesBackFromTheJsonLine) {
  RecordLines lines;
  std::string out;
  lines.append(out, record("hello"), false);
  ASSERT_EQ(out.back(), '\n');
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["shardId"], "shardId-000000000001");
  EXPECT_EQ(j["sequenceNumber"], "49590338271490256608559692538361571095921575989136588898");
  EXPECT_EQ(j["subSequenceNumber"].get<std::uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(j["partitionKey"], "k");
  EXPECT_EQ(j["approximateArrivalTimestamp"], "2026-11-29T22:40:38.007Z");
  EXPECT_EQ(j["data"], "aGVsbG8=");
}

TEST(RecordLinesTest, KeysWithEveryControlAndQuoteCharacterStayValidJson) {
  std::string key;
  for (int c = 0; c < 0x80; ++c) key += static_cast<char>(c);
  key += "\xc3\xa9";  // UTF-8 passes through
  RecordLines lines;
  std::string out;
  lines.append(out, record("x", key), false);
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["partitionKey"].get<std::string>(), key);
}

// The escape check runs 16 characters at a time: a character that needs an escape at any
// position of a block, or in the scalar tail, must be found, in every string field.
TEST(RecordLinesTest, ACharacterNeedingAnEscapeIsFoundAtEveryPositionOfEveryStringField) {
  RecordLines lines;
  for (char special : {'"', '\\', '\n', '\x01', '\x1f'}) {
    for (std::size_t pos = 0; pos < 40; ++pos) {
      std::string text(40, 'a');
      text[pos] = special;
      for (int field = 0; field < 3; ++field) {
        Record r = record("data");
        if (field == 0) r.set_shard_id(text);
        if (field == 1) r.set_sequence_number(text);
        if (field == 2) r.set_partition_key(text);
        std::string out = "previous line\n";
        lines.append(out, r, false);
        ASSERT_EQ(out.substr(0, 14), "previous line\n");
        ASSERT_EQ(out.substr(out.size() - 3), "\"}\n") << "field " << field << " at " << pos;
        auto j = nlohmann::json::parse(out.substr(14));
        const char* key = field == 0 ? "shardId" : field == 1 ? "sequenceNumber" : "partitionKey";
        ASSERT_EQ(j[key].get<std::string>(), text) << "field " << field << " at " << pos;
      }
    }
  }
}

// The same at every length from 1 to 70: whole blocks of 16, the last block that overlaps
// the one before it, and strings shorter than a block.
TEST(RecordLinesTest, ACharacterNeedingAnEscapeIsFoundAtEveryLength) {
  RecordLines lines;
  for (std::size_t length = 1; length <= 70; ++length) {
    for (std::size_t pos = 0; pos <= length; ++pos) {
      std::string text(length, '7');
      if (pos < length) text[pos] = (pos % 2 == 0) ? '"' : '\x02';  // pos == length: none
      Record r = record("data", text);
      r.set_sequence_number(text);
      std::string out;
      lines.append(out, r, false);
      auto j = nlohmann::json::parse(out);
      ASSERT_EQ(j["partitionKey"].get<std::string>(), text) << length << " at " << pos;
      ASSERT_EQ(j["sequenceNumber"].get<std::string>(), text) << length << " at " << pos;
      if (pos == length) {
        EXPECT_NE(out.find("\"" + text + "\""), std::string::npos);
      }
    }
  }
}

TEST(RecordLinesTest, ABufferReusedAcrossRecordsAndSecondsHoldsEachLine) {
  std::mt19937 rng(5);
  RecordLines lines;
  std::string out;
  std::vector<Record> records;
  for (int i = 0; i < 200; ++i) {
    std::string data(static_cast<std::size_t>(rng() % 300), '\0');
    for (auto& c : data) c = static_cast<char>(rng());
    Record r = record(data, "key-" + std::to_string(i));
    // Timestamps move across seconds, minutes and a day boundary.
    r.set_approximate_arrival_timestamp(r.approximate_arrival_timestamp() +
                                        std::chrono::milliseconds(i * 997LL * 60));
    records.push_back(r);
    lines.append(out, r, false);
  }
  std::size_t start = 0;
  for (const Record& r : records) {
    const std::size_t end = out.find('\n', start);
    ASSERT_NE(end, std::string::npos);
    auto j = nlohmann::json::parse(out.substr(start, end - start));
    EXPECT_EQ(j["partitionKey"], r.partition_key());
    auto data = aws::base64_decode(j["data"].get<std::string>());
    ASSERT_TRUE(data.ok());
    EXPECT_EQ(*data, r.data());
    // The same text as a fresh formatter gives (no stale cached second).
    RecordLines fresh;
    std::string alone;
    fresh.append(alone, r, false);
    EXPECT_EQ(out.substr(start, end + 1 - start), alone);
    start = end + 1;
  }
  EXPECT_EQ(start, out.size());
}

// A LineBuffer holds the same text as a string, line after line, as it grows past its first
// capacity (4096) many times and after clear().
TEST(RecordLinesTest, ALineBufferHoldsWhatAStringHolds) {
  std::mt19937 rng(7);
  RecordLines lines;
  LineBuffer buffer;
  for (int round = 0; round < 2; ++round) {
    std::string expected;
    buffer.clear();
    for (int i = 0; i < 300; ++i) {
      std::string data(static_cast<std::size_t>(rng() % 700), 'd');
      const bool raw = i % 7 == 0;
      const std::string stream = i % 5 == 0 ? "stream \"" + std::to_string(i) : "";
      lines.append(expected, record(data, "k" + std::to_string(i)), raw, stream);
      lines.append(buffer, record(data, "k" + std::to_string(i)), raw, stream);
      ASSERT_EQ(std::string_view(buffer.data(), buffer.size()), expected) << round << " " << i;
    }
  }
  EXPECT_FALSE(buffer.empty());
  buffer.clear();
  EXPECT_TRUE(buffer.empty());
}

TEST(RecordLinesTest, RawLinesAreTheDataAlone) {
  RecordLines lines;
  std::string out;
  lines.append(out, record("a b"), true);
  lines.append(out, record(""), true);
  EXPECT_EQ(out, "a b\n\n");
}

}  // namespace
}  // namespace kcl::cli
