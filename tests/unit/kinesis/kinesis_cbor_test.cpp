// The CBOR wire (aws/cbor.h, kinesis/kinesis_cbor.h): the reader and writer against RFC 8949's
// appendix A examples; request bodies byte for byte against hand-written encodings; answers
// as kinesis-local wrote them (captured from kinesis-local 0.6.2) and as hand-written
// AWS-shaped vectors; round trips through nlohmann::json's own CBOR codec (an independent
// implementation); and a decoder that, on every truncation, every wrong type of every
// field, huge declared lengths, deep nesting and thousands of seeded byte flips, answers a
// clear error naming the field (under ASan/UBSan in scripts/test.sh: never an over-read).
#include "kinesis/kinesis_cbor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "aws/cbor.h"
#include "kinesis/kinesis_client.h"
#include "kinesis/put_records_request.h"
#include "support/fake_json_client.h"

namespace kcl::kinesis {
namespace {

using aws::cbor::Head;
using aws::cbor::Major;
using aws::cbor::Reader;
using aws::cbor::Writer;
using nlohmann::json;

// "a1 b2" -> the bytes 0xa1 0xb2 (spaces ignored).
std::string hex(std::string_view text) {
  std::string out;
  int nibble = -1;
  for (char c : text) {
    int v = -1;
    if (c >= '0' && c <= '9') v = c - '0';
    if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    if (v < 0) continue;
    if (nibble < 0) {
      nibble = v;
    } else {
      out += static_cast<char>(nibble * 16 + v);
      nibble = -1;
    }
  }
  return out;
}

// A text string's encoding written out by hand: head then the characters.
std::string t(std::string_view s) {
  std::string out;
  if (s.size() < 24) {
    out += static_cast<char>(0x60 + s.size());
  } else {
    out += static_cast<char>(0x78);
    out += static_cast<char>(s.size());
  }
  out += s;
  return out;
}

std::int64_t millis(std::chrono::system_clock::time_point tp) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(tp.time_since_epoch()).count();
}
std::int64_t micros(std::chrono::system_clock::time_point tp) {
  return std::chrono::duration_cast<std::chrono::microseconds>(tp.time_since_epoch()).count();
}

// ---- the reader and the writer: RFC 8949 appendix A ----

struct IntCase {
  const char* bytes;
  Major major;
  std::uint64_t arg;
};

TEST(CborReaderTest, IntegersOfAppendixA) {
  const IntCase cases[] = {{"00", Major::kUnsigned, 0},
                           {"17", Major::kUnsigned, 23},
                           {"1818", Major::kUnsigned, 24},
                           {"1903e8", Major::kUnsigned, 1000},
                           {"1a000f4240", Major::kUnsigned, 1000000},
                           {"1b000000e8d4a51000", Major::kUnsigned, 1000000000000},
                           {"1bffffffffffffffff", Major::kUnsigned, 18446744073709551615u},
                           {"20", Major::kNegative, 0},        // -1
                           {"3863", Major::kNegative, 99},     // -100
                           {"3903e7", Major::kNegative, 999},  // -1000
                           {"c11a514b67b0", Major::kTag, 1}};
  for (const auto& c : cases) {
    std::string bytes = hex(c.bytes);
    Reader r(bytes.data(), bytes.size());
    Head h;
    ASSERT_TRUE(r.head(h)) << c.bytes << ": " << r.error();
    EXPECT_EQ(h.major, c.major) << c.bytes;
    EXPECT_EQ(h.arg, c.arg) << c.bytes;
    // The writer gives the same bytes for the same head (the shortest form).
    std::string written;
    Writer(written).head(c.major, c.arg);
    EXPECT_EQ(written, bytes.substr(0, written.size())) << c.bytes;
  }
  std::string neg;
  Writer w(neg);
  w.integer(-100);
  w.integer(-1);
  w.integer(1000);
  EXPECT_EQ(neg, hex("3863 20 1903e8"));
}

TEST(CborReaderTest, FloatsOfAppendixA) {
  const std::pair<const char*, double> cases[] = {{"f90000", 0.0},
                                                  {"f93c00", 1.0},
                                                  {"f93e00", 1.5},
                                                  {"f97bff", 65504.0},
                                                  {"f90001", 5.960464477539063e-8},
                                                  {"f90400", 0.00006103515625},
                                                  {"f9c400", -4.0},
                                                  {"fa47c35000", 100000.0},
                                                  {"fa7f7fffff", 3.4028234663852886e+38},
                                                  {"fb3ff199999999999a", 1.1},
                                                  {"fbc010666666666666", -4.1}};
  for (const auto& [bytes_hex, value] : cases) {
    std::string bytes = hex(bytes_hex);
    Reader r(bytes.data(), bytes.size());
    Head h;
    ASSERT_TRUE(r.head(h)) << bytes_hex;
    ASSERT_TRUE(h.is_float()) << bytes_hex;
    EXPECT_EQ(Reader::float_value(h), value) << bytes_hex;
    EXPECT_TRUE(r.at_end());
  }
  std::string inf = hex("f97c00");
  Reader r(inf.data(), inf.size());
  Head h;
  ASSERT_TRUE(r.head(h));
  EXPECT_TRUE(std::isinf(Reader::float_value(h)));
}

TEST(CborReaderTest, StringsDefiniteAndIndefiniteOfAppendixA) {
  const std::pair<const char*, std::string> cases[] = {{"60", ""},
                                                       {"6161", "a"},
                                                       {"6449455446", "IETF"},
                                                       {"62225c", "\"\\"},
                                                       {"62c3bc", "\xc3\xbc"},
                                                       {"4401020304", hex("01020304")},
                                                       {"5f42010243030405ff", hex("0102030405")},
                                                       {"7f657374726561646d696e67ff", "streaming"},
                                                       {"5fff", ""}};
  for (const auto& [bytes_hex, value] : cases) {
    std::string bytes = hex(bytes_hex);
    Reader r(bytes.data(), bytes.size());
    Head h;
    ASSERT_TRUE(r.head(h)) << bytes_hex;
    std::string_view s;
    ASSERT_TRUE(r.string_body(h, s)) << bytes_hex << ": " << r.error();
    EXPECT_EQ(s, value) << bytes_hex;
    EXPECT_TRUE(r.at_end()) << bytes_hex;
    // Joined in place: a view into the bytes read.
    if (!s.empty()) {
      EXPECT_GE(s.data(), bytes.data());
      EXPECT_LE(s.data() + s.size(), bytes.data() + bytes.size());
    }
  }
}

TEST(CborReaderTest, SkipsNestedItemsOfAppendixA) {
  const char* items[] = {
      "83010203",                                      // [1, 2, 3]
      "8301820203820405",                              // [1, [2, 3], [4, 5]]
      "9f018202039f0405ffff",                          // [_ 1, [2, 3], [_ 4, 5]]
      "a26161016162820203",                            // {"a": 1, "b": [2, 3]}
      "bf61610161629f0203ffff",                        // {_ "a": 1, "b": [_ 2, 3]}
      "c074323031332d30332d32315432303a30343a30305a",  // 0("2013-03-21T20:04:00Z")
      "d74401020304",                                  // 23(h'01020304')
      "f4",
      "f5",
      "f6",
      "f7",
      "f820",                // false, true, null, undefined, simple(32)
      "5f42010243030405ff",  // (_ h'0102', h'030405')
  };
  for (const char* item : items) {
    std::string bytes = hex(item);
    Reader r(bytes.data(), bytes.size());
    ASSERT_TRUE(r.skip()) << item << ": " << r.error();
    EXPECT_TRUE(r.at_end()) << item;
  }
}

TEST(CborReaderTest, RejectsMalformedHeads) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "truncated"},
      {"18", "truncated inside an item's head"},
      {"1b0000", "truncated inside an item's head"},
      {"1c", "reserved additional information"},
      {"1f", "indefinite length on an integer or a tag"},
      {"df", "indefinite length on an integer or a tag"},
      {"ff", "a break where an item was expected"},
      {"f818", "a two-byte simple value below 32"},
      {"5b ffffffffffffffff", "a string longer than the bytes left"},
      {"7a 7fffffff 61", "a string longer than the bytes left"},
      {"9b ffffffffffffffff", "an array with more elements than the bytes left"},
      {"bb 0000000100000000", "a map with more members than the bytes left"},
      {"5f 61 61 ff", "a chunk that is not a definite string of its type"},
      {"7f 7f ff ff", "a chunk that is not a definite string of its type"},
      {"5f 41 00", "truncated"},
  };
  for (const auto& [bytes_hex, why] : cases) {
    std::string bytes = hex(bytes_hex);
    Reader r(bytes.data(), bytes.size());
    EXPECT_FALSE(r.skip()) << bytes_hex;
    EXPECT_NE(std::string(r.error()).find(why), std::string::npos)
        << bytes_hex << ": " << r.error();
  }
}

TEST(CborReaderTest, SkipIsBoundedInDepth) {
  // 31 nested arrays and a zero skip; 33 do not.
  std::string ok(31, static_cast<char>(0x81));
  ok += '\0';
  Reader r1(ok.data(), ok.size());
  EXPECT_TRUE(r1.skip()) << r1.error();
  for (char opener : {static_cast<char>(0x81), static_cast<char>(0x9f), static_cast<char>(0xc1)}) {
    std::string deep(100000, opener);
    Reader r2(deep.data(), deep.size());
    EXPECT_FALSE(r2.skip());
    EXPECT_STREQ(r2.error(), "nested deeper than 32 levels");
  }
  std::string maps;
  for (int i = 0; i < 100000; ++i) maps += hex("a1 60");
  Reader r3(maps.data(), maps.size());
  EXPECT_FALSE(r3.skip());
  EXPECT_STREQ(r3.error(), "nested deeper than 32 levels");
}

// ---- requests, byte for byte ----
// The fast paths a record's members go through: short_text takes a definite text string
// whose length is in the head's first byte or the next one (the 27 bytes of
// "ApproximateArrivalTimestamp"), skip_short_scalar a short string or a small integer; on
// anything else, or a length beyond the bytes left, both read nothing and leave the item to
// head() / skip().
TEST(CborReaderTest, FastPathsTakeShortItemsAndLeaveTheRest) {
  const std::string long_name = "ApproximateArrivalTimestamp";
  const std::pair<std::string, std::string> taken[] = {
      {hex("60"), ""},
      {hex("6449455446"), "IETF"},
      {hex("78 1b") + long_name, long_name},
      {hex("78 00"), ""},
      {hex("78 ff") + std::string(255, 'x'), std::string(255, 'x')},
  };
  for (const auto& [bytes, value] : taken) {
    std::string buf = bytes + hex("01");  // an item after it stays unread
    Reader r(buf.data(), buf.size());
    std::string_view s;
    ASSERT_TRUE(r.short_text(s)) << value.size();
    EXPECT_EQ(s, value);
    EXPECT_EQ(r.left(), 1u);
  }
  const char* left_alone[] = {
      "",            // nothing left
      "6449 4554",   // a length beyond the bytes left
      "78",          // a one-byte length missing
      "78 05 6161",  // a one-byte length beyond the bytes left
      "79 0001 61",  // a two-byte length
      "7f 6161 ff",  // indefinite
      "4449455446",  // a byte string
      "01",          // an integer
  };
  for (const char* bytes_hex : left_alone) {
    std::string buf = hex(bytes_hex);
    Reader r(buf.data(), buf.size());
    std::string_view s;
    EXPECT_FALSE(r.short_text(s)) << bytes_hex;
    EXPECT_EQ(r.offset(), 0u) << bytes_hex;
  }
  const std::pair<const char*, std::size_t> skipped[] = {
      {"644e4f4e45 01", 5}, {"43010203 01", 4}, {"17 01", 1}, {"37 01", 1}, {"60 01", 1}};
  for (const auto& [bytes_hex, size] : skipped) {
    std::string buf = hex(bytes_hex);
    Reader r(buf.data(), buf.size());
    ASSERT_TRUE(r.skip_short_scalar()) << bytes_hex;
    EXPECT_EQ(r.offset(), size) << bytes_hex;
  }
  for (const char* bytes_hex : {"", "644e4f", "18 20", "78 01 61", "a0", "80", "c1 01", "f6"}) {
    std::string buf = hex(bytes_hex);
    Reader r(buf.data(), buf.size());
    EXPECT_FALSE(r.skip_short_scalar()) << bytes_hex;
    EXPECT_EQ(r.offset(), 0u) << bytes_hex;
  }
}

TEST(KinesisCborRequestTest, GetRecords) {
  EXPECT_EQ(cbor_get_records_request("AAAA", 100),
            hex("a2") + t("ShardIterator") + t("AAAA") + t("Limit") + hex("1864"));
  EXPECT_EQ(cbor_get_records_request("it", 10000),
            hex("a2") + t("ShardIterator") + t("it") + t("Limit") + hex("192710"));
  EXPECT_EQ(cbor_get_records_request("it", 0), hex("a1") + t("ShardIterator") + t("it"));
}

TEST(KinesisCborRequestTest, PutRecordsWritesRawBytesInAnIndefiniteArray) {
  PutRecordsRequest req("s", Wire::kCbor);
  EXPECT_EQ(req.wire(), Wire::kCbor);
  req.reserve(2, 10);
  req.add(std::string("\x00\xff", 2), "k");
  req.add("", "pk", "340282366920938463463374607431768211455");
  EXPECT_EQ(req.records(), 2u);
  const std::string expected = hex("a2") + t("StreamName") + t("s") + t("Records") + hex("9f") +  //
                               hex("a2") + t("Data") + hex("4200ff") + t("PartitionKey") + t("k") +
                               hex("a3") + t("Data") + hex("40") + t("PartitionKey") + t("pk") +
                               t("ExplicitHashKey") + hex("7827") +
                               "340282366920938463463374607431768211455" +  //
                               hex("ff");
  EXPECT_EQ(std::move(req).take_body(), expected);

  PutRecordsRequest empty("s", Wire::kCbor);
  EXPECT_EQ(std::move(empty).take_body(),
            hex("a2") + t("StreamName") + t("s") + t("Records") + hex("9fff"));
}

TEST(KinesisCborRequestTest, PutRecordsLengthHeadsOfEverySize) {
  // Data of 23, 24, 255, 256, 65535 and 65536 bytes: heads 0x57, 0x58 18, 0x58 ff, 0x59 0100,
  // 0x59 ffff, 0x5a 00010000.
  const std::pair<std::size_t, const char*> sizes[] = {{23, "57"},        {24, "5818"},
                                                       {255, "58ff"},     {256, "590100"},
                                                       {65535, "59ffff"}, {65536, "5a00010000"}};
  for (const auto& [size, head] : sizes) {
    PutRecordsRequest req("s", Wire::kCbor);
    const std::string data(size, 'x');
    req.add(data, "k");
    const std::string expected = hex("a2") + t("StreamName") + t("s") + t("Records") +
                                 hex("9f a2") + t("Data") + hex(head) + data + t("PartitionKey") +
                                 t("k") + hex("ff");
    EXPECT_EQ(std::move(req).take_body(), expected) << size;
  }
}

TEST(KinesisCborRequestTest, PutRecordsDecodesWithAnIndependentCodec) {
  std::mt19937_64 rng(47);
  PutRecordsRequest req("stream-\xc3\xa9", Wire::kCbor);
  json expected_records = json::array();
  for (int i = 0; i < 300; ++i) {
    std::string data(rng() % 3000, '\0');
    for (char& c : data) c = static_cast<char>(rng());
    const std::string key = "key-" + std::to_string(rng());
    const std::string ehk = i % 3 == 0 ? std::to_string(rng()) : "";
    req.add(data, key, ehk);
    json rec = {{"Data", json::binary(std::vector<std::uint8_t>(data.begin(), data.end()))},
                {"PartitionKey", key}};
    if (!ehk.empty()) rec["ExplicitHashKey"] = ehk;
    expected_records.push_back(std::move(rec));
  }
  const std::string body = std::move(req).take_body();
  const json decoded = json::from_cbor(body);
  EXPECT_EQ(decoded["StreamName"], "stream-\xc3\xa9");
  EXPECT_EQ(decoded["Records"], expected_records);
}

TEST(KinesisCborRequestTest, PutRecord) {
  PutRecordsEntry e{std::string("\x01\x02\x03", 3), "pk", ""};
  EXPECT_EQ(cbor_put_record_request("s", e), hex("a3") + t("StreamName") + t("s") + t("Data") +
                                                 hex("43010203") + t("PartitionKey") + t("pk"));
  e.explicit_hash_key = "7";
  EXPECT_EQ(cbor_put_record_request("s", e), hex("a4") + t("StreamName") + t("s") + t("Data") +
                                                 hex("43010203") + t("PartitionKey") + t("pk") +
                                                 t("ExplicitHashKey") + t("7"));
}

TEST(KinesisCborRequestTest, SubscribeToShard) {
  IteratorPosition pos;
  pos.type = IteratorType::kAfterSequenceNumber;
  pos.sequence_number = "123";
  auto body = cbor_subscribe_to_shard_request("arn", "shardId-0", pos);
  ASSERT_TRUE(body.ok()) << body.status().to_string();
  EXPECT_EQ(*body, hex("a3") + t("ConsumerARN") + t("arn") + t("ShardId") + t("shardId-0") +
                       t("StartingPosition") + hex("a2") + t("Type") + t("AFTER_SEQUENCE_NUMBER") +
                       t("SequenceNumber") + t("123"));
  // AT_TIMESTAMP: tag 1, then the milliseconds since the epoch (1363896240500 = 0x13d8e8d0974).
  pos.type = IteratorType::kAtTimestamp;
  pos.timestamp = std::chrono::system_clock::time_point(std::chrono::milliseconds(1363896240500));
  body = cbor_subscribe_to_shard_request("arn", "shardId-0", pos);
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(*body, hex("a3") + t("ConsumerARN") + t("arn") + t("ShardId") + t("shardId-0") +
                       t("StartingPosition") + hex("a2") + t("Type") + t("AT_TIMESTAMP") +
                       t("Timestamp") + hex("c1 1b 0000013d8e8d0974"));
  pos.type = IteratorType::kTrimHorizon;
  body = cbor_subscribe_to_shard_request("arn", "s", pos);
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(*body, hex("a3") + t("ConsumerARN") + t("arn") + t("ShardId") + t("s") +
                       t("StartingPosition") + hex("a1") + t("Type") + t("TRIM_HORIZON"));
  pos.type = IteratorType::kAtSequenceNumber;
  pos.sequence_number.clear();
  body = cbor_subscribe_to_shard_request("arn", "s", pos);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().code(), StatusCode::kInvalidArgument);
}

// ---- answers: vectors ----

// A GetRecords answer kinesis-local 0.6.2 sent (two records put in CBOR; its Data comes back
// as base64 text, its timestamps as plain integer milliseconds, ChildShards null).
const char* kKinesisLocalGetRecords =
    "a46b4368696c64536861726473f6724d696c6c6973426568696e644c617465737400714e6578745368617264"
    "4974657261746f7278cc41414141414141414141484c4e442b4d4a4d4d4c39364c7445636c353137676f4477"
    "62326c676f43463352746c764b6e2f59584449676b383164364557642f4c4867696962656231796d6f6c7572"
    "784c576864734c6d51393655437658792b6271764b77326c684e497335673668704749704d4e52544b793346"
    "6a7079533436756e2f4a31685761324236776347714e513973552f2f664247757a365047512f454661375045"
    "2b796e77375236307345576b4d6d72327432524e4b577054317850414f553371734f6a4f593d675265636f72"
    "647382a5781b417070726f78696d6174654172726976616c54696d657374616d701b000001a223241c1a6444"
    "61746168414145432f773d3d6e456e6372797074696f6e54797065644e4f4e456c506172746974696f6e4b65"
    "79616b6e53657175656e63654e756d6265727838343936383036353038303837373933363131373032303336"
    "3838313430393537353034373039363933393436303735333038363231383236a5781b417070726f78696d61"
    "74654172726976616c54696d657374616d701b000001a223241c6b64446174616443516b3d6e456e63727970"
    "74696f6e54797065644e4f4e456c506172746974696f6e4b6579626b326e53657175656e63654e756d626572"
    "7838343936383036353038303837373933363131373032303336383831343039353837313336333535313335"
    "3630373034343833333238303032";

TEST(KinesisCborAnswerTest, GetRecordsAsKinesisLocalSendsIt) {
  std::string body = hex(kKinesisLocalGetRecords);
  GetRecordsResult out;
  Status s = parse_get_records_cbor(body, out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_EQ(out.records.size(), 2u);
  EXPECT_EQ(out.records[0].data, std::string("\x00\x01\x02\xff", 4));
  EXPECT_EQ(out.records[0].partition_key, "k");
  EXPECT_EQ(out.records[0].sequence_number,
            "49680650808779361170203688140957504709693946075308621826");
  EXPECT_EQ(millis(out.records[0].approximate_arrival_timestamp), 1795885898778);
  EXPECT_EQ(out.records[1].data, "\x09\x09");
  EXPECT_EQ(millis(out.records[1].approximate_arrival_timestamp), 1795885898859);
  EXPECT_TRUE(out.child_shards.empty());
  EXPECT_EQ(out.millis_behind_latest, 0);
  ASSERT_TRUE(out.next_shard_iterator.has_value());
  EXPECT_EQ(out.payload_bytes, 6u);
}

// An AWS-shaped answer written by hand: byte-string Data (one of them in two chunks), tag-1
// timestamps (integer milliseconds, a double, a half-precision zero), an indefinite Records
// array, a member nobody reads, ChildShards of a split, MillisBehindLatest 1000.
std::string aws_shaped_answer() {
  return hex("a5") + t("Records") + hex("9f") +
         // record 0
         hex("a5") + t("SequenceNumber") + t("1") + t("ApproximateArrivalTimestamp") +
         hex("c1 1b 0000018fd3abc47b") +  // 1717243200635 ms
         t("Data") + hex("45 68656c6c6f") + t("PartitionKey") + t("pk-1") + t("EncryptionType") +
         t("NONE") +
         // record 1: Data in chunks, a double timestamp, an unknown nested member
         hex("a5") + t("Data") + hex("5f 42 0001 41 ff ff") + t("SequenceNumber") + t("2") +
         t("PartitionKey") + t("\xc3\xa9") + t("ApproximateArrivalTimestamp") +
         hex("c1 fb 4278fd3abc47b800") +  // 1717243200635.5 ms
         t("Future") + hex("a1 61 78 9f 01 02 ff") +
         // record 2: half-precision 0, empty data, explicit hash key
         hex("a5") + t("SequenceNumber") + t("3") + t("ApproximateArrivalTimestamp") +
         hex("f9 0000") + t("Data") + hex("40") + t("PartitionKey") + t("k") +
         t("ExplicitHashKey") + t("12") + hex("ff") + t("NextShardIterator") + t("AAAA") +
         t("MillisBehindLatest") + hex("1903e8") + t("ChildShards") + hex("81 a3") + t("ShardId") +
         t("shardId-000000000002") + t("ParentShards") + hex("81") + t("shardId-000000000000") +
         t("HashKeyRange") + hex("a2") + t("StartingHashKey") + t("0") + t("EndingHashKey") +
         t("99") + t("Unread") + hex("f6");
}

TEST(KinesisCborAnswerTest, GetRecordsAwsShaped) {
  const std::string body = aws_shaped_answer();
  GetRecordsResult out;
  Status s = parse_get_records_cbor(body, out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_EQ(out.records.size(), 3u);
  EXPECT_EQ(out.records[0].sequence_number, "1");
  EXPECT_EQ(out.records[0].data, "hello");
  EXPECT_EQ(out.records[0].partition_key, "pk-1");
  EXPECT_EQ(micros(out.records[0].approximate_arrival_timestamp), 1717243200635000);
  EXPECT_EQ(out.records[1].data, std::string("\x00\x01\xff", 3));
  EXPECT_EQ(out.records[1].partition_key, "\xc3\xa9");
  EXPECT_EQ(micros(out.records[1].approximate_arrival_timestamp), 1717243200635500);
  EXPECT_EQ(micros(out.records[2].approximate_arrival_timestamp), 0);
  EXPECT_EQ(out.records[2].data, "");
  EXPECT_EQ(out.records[2].explicit_hash_key, "12");
  EXPECT_EQ(out.next_shard_iterator, "AAAA");
  EXPECT_EQ(out.millis_behind_latest, 1000);
  ASSERT_EQ(out.child_shards.size(), 1u);
  EXPECT_EQ(out.child_shards[0].shard_id, "shardId-000000000002");
  EXPECT_EQ(out.child_shards[0].parent_shards, std::vector<std::string>{"shardId-000000000000"});
  EXPECT_EQ(out.child_shards[0].hash_key_range.starting_hash_key, "0");
  EXPECT_EQ(out.child_shards[0].hash_key_range.ending_hash_key, "99");
  EXPECT_EQ(out.payload_bytes, 8u);
  // Views into the answer's buffer, not copies.
  const std::string& buf = out.buffer->body;
  for (const auto& rec : out.records) {
    for (std::string_view v : {rec.data, rec.sequence_number, rec.partition_key}) {
      if (v.empty()) continue;
      EXPECT_GE(v.data(), buf.data());
      EXPECT_LE(v.data() + v.size(), buf.data() + buf.size());
    }
  }
}

TEST(KinesisCborAnswerTest, EndOfShardAndSelfDescribedTag) {
  std::string body = hex("d9d9f7 a3") + t("Records") + hex("80") + t("NextShardIterator") +
                     hex("f6") + t("ChildShards") + hex("80");
  GetRecordsResult out;
  Status s = parse_get_records_cbor(body, out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(out.records.empty());
  EXPECT_TRUE(out.shard_ended());
}

TEST(KinesisCborAnswerTest, SubscribeToShardEventInsideItsFrame) {
  const std::string payload = hex("a4") + t("Records") + hex("81 a3") + t("SequenceNumber") +
                              t("5") + t("Data") + hex("43 616263") + t("PartitionKey") + t("p") +
                              t("ContinuationSequenceNumber") + t("5") + t("MillisBehindLatest") +
                              hex("00") + t("ChildShards") + hex("80");
  std::string frame = "HEADERS-" + payload + "-CRC";
  GetRecordsResult out;
  Status s = parse_subscribe_to_shard_event_cbor_in_place(std::move(frame), 8, payload.size(), out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_EQ(out.records.size(), 1u);
  EXPECT_EQ(out.records[0].data, "abc");
  EXPECT_EQ(out.continuation_sequence_number, "5");
  EXPECT_FALSE(out.next_shard_iterator.has_value());
  std::string small = "xx";
  s = parse_subscribe_to_shard_event_cbor_in_place(std::move(small), 1, 5, out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);

  EXPECT_TRUE(parse_subscribe_to_shard_initial_response_cbor(hex("a0")).ok());
  EXPECT_TRUE(parse_subscribe_to_shard_initial_response_cbor(hex("bf ff")).ok());
  EXPECT_FALSE(parse_subscribe_to_shard_initial_response_cbor(hex("80")).ok());
  EXPECT_FALSE(parse_subscribe_to_shard_initial_response_cbor(hex("a1 61")).ok());
}

TEST(KinesisCborAnswerTest, SinkTakesRecordsInOrder) {
  struct Collect : RecordSink {
    std::vector<std::string> data;
    void add(const KinesisRecord& r) override { data.emplace_back(r.data); }
  } sink;
  GetRecordsResult out;
  Status s = parse_get_records_cbor_in_place(aws_shaped_answer(), out, &sink);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(out.records.empty());
  EXPECT_EQ(sink.data, (std::vector<std::string>{"hello", std::string("\x00\x01\xff", 3), ""}));
}

// PutRecords and PutRecord answers kinesis-local 0.6.2 sent.
const char* kKinesisLocalPutRecords =
    "a36e456e6372797074696f6e54797065644e4f4e45714661696c65645265636f7264436f756e740067526563"
    "6f72647381a4694572726f72436f6465f66c4572726f724d657373616765f66e53657175656e63654e756d62"
    "6572783834393638303635303830383737393336313137303230333638383134303935373530343730393639"
    "33393436303735333038363231383236675368617264496474736861726449642d3030303030303030303030"
    "30";
const char* kKinesisLocalPutRecord =
    "a36e456e6372797074696f6e54797065644e4f4e456e53657175656e63654e756d6265727838343936383036"
    "3530383038373739333631313730323033363838313430393538373133363335353133353630373034343833"
    "333238303032675368617264496474736861726449642d303030303030303030303030";

TEST(KinesisCborAnswerTest, PutRecordsAndPutRecordAsKinesisLocalSendsThem) {
  PutRecordsResult out;
  Status s = parse_put_records_cbor(hex(kKinesisLocalPutRecords), 1, true, out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_EQ(out.records.size(), 1u);
  EXPECT_TRUE(out.records[0].ok);
  EXPECT_EQ(out.records[0].shard_id, "shardId-000000000000");
  EXPECT_EQ(out.records[0].sequence_number,
            "49680650808779361170203688140957504709693946075308621826");
  EXPECT_EQ(out.failed_record_count, 0);
  EXPECT_EQ(out.shard_ids, std::vector<std::string>{"shardId-000000000000"});
  s = parse_put_records_cbor(hex(kKinesisLocalPutRecords), 2, true, out);
  EXPECT_NE(s.message().find("Records: 1 results for 2 entries"), std::string::npos)
      << s.to_string();

  PutRecordResult one;
  s = parse_put_record_cbor(hex(kKinesisLocalPutRecord), one);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(one.shard_id, "shardId-000000000000");
  EXPECT_EQ(one.sequence_number, "49680650808779361170203688140958713635513560704483328002");
}

TEST(KinesisCborAnswerTest, PutRecordsWithFailuresAndWithoutPositions) {
  const std::string body =
      hex("a2") + t("FailedRecordCount") + hex("01") + t("Records") + hex("9f") +  //
      hex("a2") + t("SequenceNumber") + t("10") + t("ShardId") + t("shardId-1") + hex("a2") +
      t("ErrorCode") + t("ProvisionedThroughputExceededException") + t("ErrorMessage") +
      t("Rate exceeded for shard shardId-1") + hex("a2") + t("ShardId") + t("shardId-2") +
      t("SequenceNumber") + t("11") + hex("a2") + t("SequenceNumber") + t("12") + t("ShardId") +
      t("shardId-1") + hex("ff");
  PutRecordsResult out;
  Status s = parse_put_records_cbor(body, 4, false, out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_EQ(out.records.size(), 4u);
  EXPECT_EQ(out.failed_record_count, 1);
  EXPECT_TRUE(out.records[0].ok);
  EXPECT_TRUE(out.records[0].shard_id.empty());  // positions not kept
  EXPECT_FALSE(out.records[1].ok);
  EXPECT_EQ(out.records[1].error_code, "ProvisionedThroughputExceededException");
  EXPECT_EQ(out.records[1].error_message, "Rate exceeded for shard shardId-1");
  EXPECT_EQ(out.records[2].shard, 1u);
  EXPECT_EQ(out.records[3].shard, 0u);
  EXPECT_EQ(out.shard_ids, (std::vector<std::string>{"shardId-1", "shardId-2"}));
  s = parse_put_records_cbor(body, 3, false, out);
  EXPECT_NE(s.message().find("more results than the 3 entries"), std::string::npos);
}

TEST(KinesisCborAnswerTest, Errors) {
  std::string type, message, why;
  ASSERT_TRUE(aws::cbor::read_error_body(hex("a2") + t("__type") +
                                             t("com.amazonaws.kinesis#ResourceNotFoundException") +
                                             t("message") + t("Stream s not found"),
                                         type, message, why))
      << why;
  EXPECT_EQ(type, "com.amazonaws.kinesis#ResourceNotFoundException");
  EXPECT_EQ(message, "Stream s not found");
  type.clear();
  message.clear();
  ASSERT_TRUE(aws::cbor::read_error_body(
      hex("bf") + t("Message") + t("m") + t("other") + hex("82 01 02") + t("__type") + hex("f6 ff"),
      type, message, why))
      << why;
  EXPECT_EQ(type, "");
  EXPECT_EQ(message, "m");
  EXPECT_FALSE(aws::cbor::read_error_body(hex("a1") + t("__type") + hex("01"), type, message, why));
  EXPECT_EQ(why, "__type: not a text string (byte 9)");
  EXPECT_FALSE(aws::cbor::read_error_body(hex("a1") + t("__type"), type, message, why));
  EXPECT_FALSE(aws::cbor::read_error_body("{\"__type\":\"x\"}", type, message, why));
  EXPECT_EQ(why.rfind("top level: ", 0), 0u) << why;
  EXPECT_FALSE(aws::cbor::read_error_body(hex("80"), type, message, why));
  EXPECT_EQ(why, "top level: not a map (byte 1)");
  EXPECT_FALSE(aws::cbor::read_error_body(hex("a0 00"), type, message, why));
  // Every truncation of a valid body is refused.
  const std::string body = hex("a2") + t("__type") + t("X") + t("message") + t("m");
  for (std::size_t n = 0; n < body.size(); ++n) {
    EXPECT_FALSE(aws::cbor::read_error_body(body.substr(0, n), type, message, why)) << n;
  }
}

// ---- round trips through nlohmann::json's CBOR ----

struct TestRecord {
  std::string seq, key, ehk, data;
  std::int64_t arrival_ms = 0;
};

std::vector<TestRecord> random_records(std::mt19937_64& rng, int n, std::size_t max_data) {
  std::vector<TestRecord> out;
  for (int i = 0; i < n; ++i) {
    TestRecord r;
    r.seq = "4959" + std::to_string(rng()) + std::to_string(i);
    r.key = "pk-" + std::to_string(rng() % 1000) + (i % 5 == 0 ? "-\xe2\x82\xac" : "");
    if (i % 7 == 0) r.ehk = std::to_string(rng());
    r.data.resize(rng() % (max_data + 1));
    for (char& c : r.data) c = static_cast<char>(rng());
    r.arrival_ms = 1700000000000 + static_cast<std::int64_t>(rng() % 100000000);
    out.push_back(std::move(r));
  }
  return out;
}

json records_json(const std::vector<TestRecord>& records) {
  json arr = json::array();
  for (const auto& r : records) {
    json j = {{"SequenceNumber", r.seq},
              {"ApproximateArrivalTimestamp", r.arrival_ms},
              {"Data", json::binary(std::vector<std::uint8_t>(r.data.begin(), r.data.end()))},
              {"PartitionKey", r.key},
              {"EncryptionType", "NONE"}};
    if (!r.ehk.empty()) j["ExplicitHashKey"] = r.ehk;
    arr.push_back(std::move(j));
  }
  return arr;
}

void expect_records(const GetRecordsResult& out, const std::vector<TestRecord>& records) {
  ASSERT_EQ(out.records.size(), records.size());
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(out.records[i].sequence_number, records[i].seq) << i;
    EXPECT_EQ(out.records[i].partition_key, records[i].key) << i;
    EXPECT_EQ(out.records[i].explicit_hash_key, records[i].ehk) << i;
    EXPECT_EQ(out.records[i].data, records[i].data) << i;
    EXPECT_EQ(millis(out.records[i].approximate_arrival_timestamp), records[i].arrival_ms) << i;
    bytes += records[i].data.size();
  }
  EXPECT_EQ(out.payload_bytes, bytes);
}

TEST(KinesisCborRoundTripTest, GetRecordsThroughAnIndependentEncoder) {
  std::mt19937_64 rng(8949);
  for (int round = 0; round < 20; ++round) {
    const auto records = random_records(rng, round * 13,
                                        round % 2    ? 40
                                        : round == 4 ? 70000
                                                     : 3000);
    json answer = {{"Records", records_json(records)}, {"MillisBehindLatest", round * 1000}};
    if (round % 3 != 0) answer["NextShardIterator"] = "it-" + std::to_string(round);
    if (round % 4 == 1) {
      answer["ChildShards"] = {{{"ShardId", "shardId-3"},
                                {"ParentShards", {"shardId-1", "shardId-2"}},
                                {"HashKeyRange",
                                 {{"StartingHashKey", "0"},
                                  {"EndingHashKey", "340282366920938463463374607431768211455"}}}}};
    }
    const std::vector<std::uint8_t> bytes = json::to_cbor(answer);
    GetRecordsResult out;
    Status s = parse_get_records_cbor_in_place(std::string(bytes.begin(), bytes.end()), out);
    ASSERT_TRUE(s.ok()) << s.to_string();
    expect_records(out, records);
    EXPECT_EQ(out.millis_behind_latest, round * 1000);
    EXPECT_EQ(out.next_shard_iterator.has_value(), round % 3 != 0);
    if (round % 4 == 1) {
      ASSERT_EQ(out.child_shards.size(), 1u);
      EXPECT_EQ(out.child_shards[0].parent_shards.size(), 2u);
      EXPECT_EQ(out.child_shards[0].hash_key_range.ending_hash_key,
                "340282366920938463463374607431768211455");
    }
  }
}

TEST(KinesisCborRoundTripTest, PutRecordsAnswerThroughAnIndependentEncoder) {
  std::mt19937_64 rng(11);
  json recs = json::array();
  std::vector<bool> ok;
  for (int i = 0; i < 500; ++i) {
    const bool good = rng() % 10 != 0;
    ok.push_back(good);
    if (good) {
      recs.push_back({{"SequenceNumber", std::to_string(rng())},
                      {"ShardId", "shardId-" + std::to_string(rng() % 4)}});
    } else {
      recs.push_back({{"ErrorCode", "InternalFailure"}, {"ErrorMessage", "try again"}});
    }
  }
  const json answer = {{"FailedRecordCount", 0}, {"Records", recs}};
  const auto bytes = json::to_cbor(answer);
  PutRecordsResult out;
  Status s = parse_put_records_cbor(std::string(bytes.begin(), bytes.end()), 500, true, out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  int failures = 0;
  for (std::size_t i = 0; i < 500; ++i) {
    ASSERT_EQ(out.records[i].ok, ok[i]) << i;
    if (ok[i]) {
      EXPECT_EQ(out.records[i].sequence_number, recs[i]["SequenceNumber"].get<std::string>());
      EXPECT_EQ(out.shard_ids[out.records[i].shard], recs[i]["ShardId"].get<std::string>());
    } else {
      ++failures;
      EXPECT_EQ(out.records[i].error_code, "InternalFailure");
    }
  }
  EXPECT_EQ(out.failed_record_count, failures);
}

// ---- the client on the CBOR wire ----

std::string cbor_of(const json& j) {
  const auto bytes = json::to_cbor(j);
  return std::string(bytes.begin(), bytes.end());
}

TEST(KinesisClientCborTest, DataCallsGoInCbor) {
  auto fake = std::make_shared<fake::FakeJsonClient>();
  KinesisClient client(fake);
  EXPECT_EQ(client.wire(), Wire::kJson);
  client.set_wire(Wire::kCbor);
  const std::string data("\x00\x01\xfe\xff", 4);
  const json record = {{"SequenceNumber", "7"},
                       {"ApproximateArrivalTimestamp", 1700000000123},
                       {"Data", json::binary({0, 1, 0xfe, 0xff})},
                       {"PartitionKey", "k"}};
  fake->responses.push_back(cbor_of({{"Records", {record}}, {"NextShardIterator", "next"}}));
  fake->responses.push_back(
      cbor_of({{"FailedRecordCount", 0},
               {"Records", {{{"SequenceNumber", "8"}, {"ShardId", "shardId-000000000000"}}}}}));
  fake->responses.push_back(cbor_of({{"SequenceNumber", "9"}, {"ShardId", "shardId-1"}}));

  auto got = client.get_records("it", 100);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->records.size(), 1u);
  EXPECT_EQ(got->records[0].data, data);
  EXPECT_EQ(millis(got->records[0].approximate_arrival_timestamp), 1700000000123);
  EXPECT_EQ(got->next_shard_iterator, "next");

  auto put = client.put_records("s", {PutRecordsEntry{data, "k", ""}});
  ASSERT_TRUE(put.ok()) << put.status().to_string();
  EXPECT_EQ(put->records[0].sequence_number, "8");

  auto one = client.put_record("s", PutRecordsEntry{data, "k", ""});
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_EQ(one->shard_id, "shardId-1");

  ASSERT_EQ(fake->calls.size(), 3u);
  for (const auto& c : fake->calls) EXPECT_EQ(c.content_type, kCborContentType) << c.operation;
  EXPECT_EQ(fake->calls[0].body, json({{"ShardIterator", "it"}, {"Limit", 100}}));
  const json sent_data = json::binary({0, 1, 0xfe, 0xff});
  EXPECT_EQ(fake->calls[1].body["Records"][0]["Data"], sent_data);
  EXPECT_EQ(fake->calls[2].body["Data"], sent_data);

  // A malformed answer names the operation and the field, with the call's details.
  fake->responses.push_back(cbor_of({{"Records", {{{"Data", 5}}}}}));
  auto bad = client.get_records("it", 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("Kinesis.GetRecords: malformed CBOR response: "
                                        "Records[0].Data: expected a byte string"),
            std::string::npos)
      << bad.status().to_string();
  ASSERT_TRUE(bad.status().aws().has_value());
  EXPECT_EQ(bad.status().aws()->operation, "Kinesis.GetRecords");
}

// ---- the decoder under bad answers ----

constexpr std::string_view kMalformed = "malformed CBOR response: ";

// A small valid answer with every member the decoder reads.
std::string small_answer() {
  std::mt19937_64 rng(3);
  auto records = random_records(rng, 4, 30);
  json answer = {{"Records", records_json(records)},
                 {"NextShardIterator", "it"},
                 {"MillisBehindLatest", 5},
                 {"ChildShards",
                  {{{"ShardId", "c"},
                    {"ParentShards", {"p"}},
                    {"HashKeyRange", {{"StartingHashKey", "0"}, {"EndingHashKey", "9"}}}}}}};
  const auto bytes = json::to_cbor(answer);
  return std::string(bytes.begin(), bytes.end());
}

void expect_clean_error(const Status& s, const std::string& context) {
  ASSERT_FALSE(s.ok()) << context;
  EXPECT_EQ(s.code(), StatusCode::kInternal) << context;
  EXPECT_NE(s.message().find(kMalformed), std::string::npos) << context << ": " << s.message();
}

TEST(KinesisCborFuzzTest, EveryTruncationIsAnError) {
  const std::string answer = small_answer();
  for (std::size_t n = 0; n < answer.size(); ++n) {
    GetRecordsResult out;
    Status s = parse_get_records_cbor_in_place(answer.substr(0, n), out);
    expect_clean_error(s, "truncated to " + std::to_string(n));
    EXPECT_TRUE(out.records.empty());
  }
  const std::string put = hex(kKinesisLocalPutRecords);
  for (std::size_t n = 0; n < put.size(); ++n) {
    PutRecordsResult out;
    expect_clean_error(parse_put_records_cbor(put.substr(0, n), 1, true, out),
                       "PutRecords truncated to " + std::to_string(n));
  }
  const std::string one = hex(kKinesisLocalPutRecord);
  for (std::size_t n = 0; n < one.size(); ++n) {
    PutRecordResult out;
    expect_clean_error(parse_put_record_cbor(one.substr(0, n), out),
                       "PutRecord truncated to " + std::to_string(n));
  }
}

// Every field given a value of each type it cannot hold: the error names the field.
TEST(KinesisCborFuzzTest, WrongTypesNameTheField) {
  const std::vector<std::pair<std::string, std::string>> wrong = {{"uint", hex("01")},
                                                                  {"negint", hex("20")},
                                                                  {"bytes", hex("4161")},
                                                                  {"text", t("x")},
                                                                  {"array", hex("80")},
                                                                  {"map", hex("a0")},
                                                                  {"tag 0", hex("c0") + t("x")},
                                                                  {"float", hex("f93c00")},
                                                                  {"true", hex("f5")}};
  struct Field {
    std::string path;             // what the error must name
    std::vector<std::string> ok;  // the wrong-type names this field accepts
    std::function<std::string(const std::string&)> answer;
  };
  auto record_with = [](const std::string& name, const std::string& value) {
    std::map<std::string, std::string> m = {{"SequenceNumber", t("1")},
                                            {"ApproximateArrivalTimestamp", hex("01")},
                                            {"Data", hex("4161")},
                                            {"PartitionKey", t("k")}};
    m[name] = value;
    std::string rec = hex("a4");
    for (const auto& [k, v] : m) rec += t(k) + v;
    return hex("a1") + t("Records") + hex("81") + rec;
  };
  std::vector<Field> fields = {
      {"Records[0].SequenceNumber",
       {"text"},
       [&](const std::string& v) { return record_with("SequenceNumber", v); }},
      {"Records[0].PartitionKey",
       {"text"},
       [&](const std::string& v) { return record_with("PartitionKey", v); }},
      {"Records[0].Data",
       {"bytes", "text"},
       [&](const std::string& v) { return record_with("Data", v); }},
      {"Records[0].ApproximateArrivalTimestamp",
       {"uint", "float"},
       [&](const std::string& v) { return record_with("ApproximateArrivalTimestamp", v); }},
      {"Records", {"array"}, [](const std::string& v) { return hex("a1") + t("Records") + v; }},
      {"Records[0]",
       {"map"},
       [](const std::string& v) { return hex("a1") + t("Records") + hex("81") + v; }},
      {"NextShardIterator",
       {"text"},
       [](const std::string& v) {
         return hex("a2") + t("Records") + hex("80") + t("NextShardIterator") + v;
       }},
      {"MillisBehindLatest",
       {"uint", "negint"},
       [](const std::string& v) {
         return hex("a2") + t("Records") + hex("80") + t("MillisBehindLatest") + v;
       }},
      {"ChildShards",
       {"array"},
       [](const std::string& v) {
         return hex("a2") + t("Records") + hex("80") + t("ChildShards") + v;
       }},
      {"ChildShards[0].ShardId",
       {"text"},
       [](const std::string& v) {
         return hex("a2") + t("Records") + hex("80") + t("ChildShards") + hex("81 a1") +
                t("ShardId") + v;
       }},
      {"ChildShards[0].ParentShards",
       {"array"},
       [](const std::string& v) {
         return hex("a2") + t("Records") + hex("80") + t("ChildShards") + hex("81 a2") +
                t("ShardId") + t("s") + t("ParentShards") + v;
       }},
      {"ChildShards[0].HashKeyRange",
       {"map"},
       [](const std::string& v) {
         return hex("a2") + t("Records") + hex("80") + t("ChildShards") + hex("81 a2") +
                t("ShardId") + t("s") + t("HashKeyRange") + v;
       }},
      {"ChildShards[0].HashKeyRange.EndingHashKey",
       {"text"},
       [](const std::string& v) {
         return hex("a2") + t("Records") + hex("80") + t("ChildShards") + hex("81 a2") +
                t("ShardId") + t("s") + t("HashKeyRange") + hex("a1") + t("EndingHashKey") + v;
       }},
  };
  for (const Field& field : fields) {
    for (const auto& [type_name, value] : wrong) {
      const bool accepted =
          std::find(field.ok.begin(), field.ok.end(), type_name) != field.ok.end();
      GetRecordsResult out;
      Status s = parse_get_records_cbor(field.answer(value), out);
      if (accepted) {
        // Data as text must be base64: "x" is not, so only the other accepted ones pass.
        if (field.path == "Records[0].Data" && type_name == "text") {
          expect_clean_error(s, field.path + " as " + type_name);
        } else if (field.path == "Records[0]") {  // an empty map: its members are missing
          EXPECT_NE(s.message().find("Records[0].SequenceNumber: missing"), std::string::npos)
              << s.to_string();
        } else {
          EXPECT_TRUE(s.ok()) << field.path << " as " << type_name << ": " << s.to_string();
        }
        continue;
      }
      expect_clean_error(s, field.path + " as " + type_name);
      EXPECT_NE(s.message().find(std::string(kMalformed) + field.path + ":"), std::string::npos)
          << field.path << " as " << type_name << ": " << s.message();
    }
  }
  // PutRecords' fields likewise.
  for (const std::string field : {"SequenceNumber", "ShardId", "ErrorCode", "ErrorMessage"}) {
    PutRecordsResult out;
    const std::string body = hex("a1") + t("Records") + hex("81 a1") + t(field) + hex("01");
    Status s = parse_put_records_cbor(body, 1, true, out);
    expect_clean_error(s, field);
    EXPECT_NE(s.message().find("Records[0]." + field + ": expected a text string"),
              std::string::npos)
        << s.message();
  }
}

TEST(KinesisCborFuzzTest, HugeLengthsAndCountsAreRefusedBeforeAnything) {
  const std::pair<std::string, std::string> cases[] = {
      {"Records", hex("a1") + t("Records") + hex("9b ffffffffffffffff")},
      {"Records[0].Data",
       hex("a1") + t("Records") + hex("81 a1") + t("Data") + hex("5b ffffffffffffffff 00")},
      {"Records[0].Data",
       hex("a1") + t("Records") + hex("81 a1") + t("Data") + hex("5f 5a ffffffff 00 ff")},
      {"Records[0].SequenceNumber",
       hex("a1") + t("Records") + hex("81 a1") + t("SequenceNumber") + hex("7a 80000000")},
      {"Records[0]", hex("a1") + t("Records") + hex("81 bb 7fffffffffffffff")},
      {"top level", hex("bb ffffffffffffffff")},
      {"ChildShards", hex("a2") + t("Records") + hex("80") + t("ChildShards") + hex("9a ffffffff")},
  };
  for (const auto& [path, body] : cases) {
    GetRecordsResult out;
    Status s = parse_get_records_cbor(body, out);
    expect_clean_error(s, path);
    EXPECT_NE(s.message().find(std::string(kMalformed) + path + ":"), std::string::npos)
        << s.message();
  }
  PutRecordsResult out;
  Status s =
      parse_put_records_cbor(hex("a1") + t("Records") + hex("9b ffffffffffffffff"), 1, true, out);
  expect_clean_error(s, "PutRecords Records");
}

TEST(KinesisCborFuzzTest, DeepNestingInAnUnknownMemberIsBounded) {
  auto with = [](const std::string& value) {
    return hex("a2") + t("Records") + hex("80") + t("Unknown") + value;
  };
  GetRecordsResult out;
  EXPECT_TRUE(parse_get_records_cbor(with(std::string(31, '\x81') + '\x00'), out).ok());
  Status s = parse_get_records_cbor(with(std::string(200000, '\x81') + '\x00'), out);
  expect_clean_error(s, "deep");
  EXPECT_NE(s.message().find("Unknown: nested deeper than 32 levels"), std::string::npos)
      << s.message();
  s = parse_get_records_cbor(with(std::string(200000, '\x9f')), out);
  EXPECT_NE(s.message().find("nested deeper than 32 levels"), std::string::npos);
}

TEST(KinesisCborFuzzTest, OtherShapesTheAnswerCannotHold) {
  const std::pair<std::string, std::string> cases[] = {
      {"trailing bytes after the top-level map", hex("a1") + t("Records") + hex("80 00")},
      {"Records: missing", hex("a1") + t("NextShardIterator") + t("x")},
      {"Records: a second Records member",
       hex("a2") + t("Records") + hex("80") + t("Records") + hex("80")},
      {"Records[0].Data: missing", hex("a1") + t("Records") + hex("81 a2") + t("SequenceNumber") +
                                       t("1") + t("PartitionKey") + t("k")},
      {"Records[0].PartitionKey: text that is not valid UTF-8",
       hex("a1") + t("Records") + hex("81 a3") + t("SequenceNumber") + t("1") + t("Data") +
           hex("40") + t("PartitionKey") + hex("62 c328")},
      {"Records[0].ApproximateArrivalTimestamp: a tag other than 1",
       hex("a1") + t("Records") + hex("81 a4") + t("SequenceNumber") + t("1") + t("Data") +
           hex("40") + t("PartitionKey") + t("k") + t("ApproximateArrivalTimestamp") +
           hex("c0 01")},
      {"Records[0].ApproximateArrivalTimestamp: out of range",
       hex("a1") + t("Records") + hex("81 a4") + t("SequenceNumber") + t("1") + t("Data") +
           hex("40") + t("PartitionKey") + t("k") + t("ApproximateArrivalTimestamp") +
           hex("fb 7ff0000000000000")},
      {"top level: expected a member name (a text string), found an unsigned integer",
       hex("a1 01 80")},
      {"top level: expected a map, found an array", hex("80")},
      {"MillisBehindLatest: integer too large",
       hex("a2") + t("Records") + hex("80") + t("MillisBehindLatest") + hex("1b ffffffffffffffff")},
  };
  for (const auto& [what, body] : cases) {
    GetRecordsResult out;
    Status s = parse_get_records_cbor(body, out);
    expect_clean_error(s, what);
    EXPECT_NE(s.message().find(what), std::string::npos) << what << ": " << s.message();
  }
}

// Seeded byte flips over valid answers: every outcome is an answer whose views lie in its
// buffer, or a clean error.
// Text members are checked for UTF-8 a word at a time with an overlapping last word: a byte
// that is not UTF-8 is found at every position of every length (short keys, 56-byte sequence
// numbers and beyond), and ASCII of any length passes.
TEST(KinesisCborFuzzTest, InvalidUtf8IsFoundAtEveryPosition) {
  const auto answer = [](const std::string& key) {
    return hex("a1") + t("Records") + hex("81 a3") + t("SequenceNumber") + t("1") + t("Data") +
           hex("40") + t("PartitionKey") + t(key);
  };
  GetRecordsResult out;
  for (std::size_t n = 1; n <= 70; ++n) {
    const std::string ascii(n, 'k');
    ASSERT_TRUE(parse_get_records_cbor(answer(ascii), out).ok()) << n;
    ASSERT_EQ(out.records.size(), 1u);
    EXPECT_EQ(out.records[0].partition_key, ascii);
    for (std::size_t pos = 0; pos < n; ++pos) {
      std::string key = ascii;
      key[pos] = static_cast<char>(0xff);
      const Status s = parse_get_records_cbor(answer(key), out);
      EXPECT_NE(s.message().find("Records[0].PartitionKey: text that is not valid UTF-8"),
                std::string::npos)
          << n << " " << pos << ": " << s.message();
    }
  }
}

TEST(KinesisCborFuzzTest, RandomByteFlips) {
  const std::string answers[] = {small_answer(), aws_shaped_answer(), hex(kKinesisLocalGetRecords)};
  std::mt19937_64 rng(20261128);
  int errors = 0, oks = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    std::string body = answers[iteration % 3];
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const std::size_t at = rng() % body.size();
      if (rng() % 2) {
        body[at] = static_cast<char>(rng());
      } else {
        body[at] = static_cast<char>(body[at] ^ (1 << (rng() % 8)));
      }
    }
    GetRecordsResult out;
    Status s = parse_get_records_cbor(body, out);
    if (!s.ok()) {
      ++errors;
      ASSERT_EQ(s.code(), StatusCode::kInternal) << iteration;
      ASSERT_NE(s.message().find(kMalformed), std::string::npos) << iteration;
      continue;
    }
    ++oks;
    const std::string& buf = out.buffer->body;
    for (const auto& rec : out.records) {
      for (std::string_view v :
           {rec.data, rec.sequence_number, rec.partition_key, rec.explicit_hash_key}) {
        if (v.empty()) continue;
        ASSERT_GE(v.data(), buf.data()) << iteration;
        ASSERT_LE(v.data() + v.size(), buf.data() + buf.size()) << iteration;
      }
    }
  }
  // Both outcomes occur: the flips reach the structure and the bytes.
  EXPECT_GT(errors, 100);
  EXPECT_GT(oks, 10);
  // PutRecords answers too.
  const std::string put = hex(kKinesisLocalPutRecords);
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::string body = put;
    body[rng() % body.size()] = static_cast<char>(rng());
    PutRecordsResult out;
    Status s = parse_put_records_cbor(body, 1, true, out);
    if (!s.ok()) {
      ASSERT_NE(s.message().find(kMalformed), std::string::npos) << iteration;
    }
  }
}

}  // namespace
}  // namespace kcl::kinesis

namespace kcl::kinesis {
namespace {

TEST(KinesisWireChoiceTest, AutoIsCborOnAwsEndpointsOnly) {
  std::string why;
  EXPECT_EQ(choose_wire(KinesisWire::kAuto, "https://kinesis.us-east-1.amazonaws.com", why),
            Wire::kCbor);
  EXPECT_NE(why.find("kinesis.us-east-1.amazonaws.com is an AWS endpoint"), std::string::npos);
  EXPECT_EQ(
      choose_wire(KinesisWire::kAuto, "https://KINESIS.cn-north-1.amazonaws.com.cn:443/", why),
      Wire::kCbor);
  EXPECT_EQ(choose_wire(KinesisWire::kAuto, "http://127.0.0.1:4567", why), Wire::kJson);
  EXPECT_NE(why.find("127.0.0.1 is not an AWS endpoint"), std::string::npos);
  EXPECT_EQ(choose_wire(KinesisWire::kAuto, "https://amazonaws.com.evil.example", why),
            Wire::kJson);
  EXPECT_EQ(choose_wire(KinesisWire::kCbor, "http://127.0.0.1:4567", why), Wire::kCbor);
  EXPECT_EQ(why, "configured");
  EXPECT_EQ(choose_wire(KinesisWire::kJson, "https://kinesis.us-east-1.amazonaws.com", why),
            Wire::kJson);
  KinesisWire w = KinesisWire::kAuto;
  EXPECT_TRUE(parse_kinesis_wire("cbor", w));
  EXPECT_EQ(w, KinesisWire::kCbor);
  EXPECT_TRUE(parse_kinesis_wire("json", w));
  EXPECT_EQ(w, KinesisWire::kJson);
  EXPECT_FALSE(parse_kinesis_wire("CBOR", w));
}

}  // namespace
}  // namespace kcl::kinesis
