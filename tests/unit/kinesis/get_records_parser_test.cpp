// parse_get_records_response: normal responses, end of shard, ChildShards, and every way a
// 200 response can be malformed.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "aws/base64.h"
#include "kinesis/kinesis_client.h"

namespace kcl::kinesis {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;

std::int64_t micros_since_epoch(std::chrono::system_clock::time_point tp) {
  return duration_cast<microseconds>(tp.time_since_epoch()).count();
}

const char* kNormal = R"({
  "Records": [
    {"SequenceNumber": "49590338271490256608559692538361571095921575989136588898",
     "ApproximateArrivalTimestamp": 1.700000000123E9,
     "Data": "aGVsbG8=",
     "PartitionKey": "pk-1",
     "EncryptionType": "NONE"},
    {"Data": "AAEC/wD+", "PartitionKey": "pk-\u00e9", "SequenceNumber": "2",
     "ApproximateArrivalTimestamp": 1700000001.5},
    {"SequenceNumber": "3", "ApproximateArrivalTimestamp": 1700000002, "Data": "",
     "PartitionKey": "k", "ExplicitHashKey": "170141183460469231731687303715884105728"}
  ],
  "NextShardIterator": "AAAAAAAAAAGitr",
  "MillisBehindLatest": 1234
})";

TEST(GetRecordsParserTest, ParsesNormalResponse) {
  GetRecordsResult out;
  Status s = parse_get_records_response(kNormal, out);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.records.size(), 3u);
  const auto& r0 = out.records[0];
  EXPECT_EQ(r0.sequence_number, "49590338271490256608559692538361571095921575989136588898");
  EXPECT_EQ(r0.partition_key, "pk-1");
  EXPECT_EQ(r0.data, "hello");
  EXPECT_EQ(r0.explicit_hash_key, "");
  EXPECT_EQ(micros_since_epoch(r0.approximate_arrival_timestamp), 1700000000123000);
  const auto& r1 = out.records[1];
  EXPECT_EQ(r1.sequence_number, "2");
  EXPECT_EQ(r1.partition_key, "pk-\xC3\xA9");  // \u00e9 unescaped to UTF-8
  EXPECT_EQ(r1.data, std::string("\x00\x01\x02\xff\x00\xfe", 6));
  EXPECT_EQ(micros_since_epoch(r1.approximate_arrival_timestamp), 1700000001500000);
  const auto& r2 = out.records[2];
  EXPECT_EQ(r2.data, "");
  EXPECT_EQ(r2.explicit_hash_key, "170141183460469231731687303715884105728");
  EXPECT_EQ(micros_since_epoch(r2.approximate_arrival_timestamp), 1700000002000000);
  ASSERT_TRUE(out.next_shard_iterator.has_value());
  EXPECT_EQ(*out.next_shard_iterator, "AAAAAAAAAAGitr");
  EXPECT_FALSE(out.shard_ended());
  EXPECT_EQ(out.millis_behind_latest, 1234);
  EXPECT_TRUE(out.child_shards.empty());
  EXPECT_EQ(out.payload_bytes, 5u + 6u + 0u);
}

TEST(GetRecordsParserTest, InPlaceGivesTheSameAndTakesTheBody) {
  std::string text;
  text.reserve(std::string_view(kNormal).size() + 64);  // as the transport gives a body
  text = kNormal;
  GetRecordsResult a, b;
  ASSERT_TRUE(parse_get_records_response(text, a).ok());
  const char* const body = text.data();
  ASSERT_TRUE(parse_get_records_response_in_place(std::move(text), b).ok());
  ASSERT_EQ(a.records.size(), b.records.size());
  for (std::size_t i = 0; i < a.records.size(); ++i) {
    EXPECT_EQ(a.records[i].data, b.records[i].data);
    EXPECT_EQ(a.records[i].sequence_number, b.records[i].sequence_number);
    EXPECT_EQ(a.records[i].partition_key, b.records[i].partition_key);
  }
  // The body moved into the result's buffer (no copy), and the records point into it.
  ASSERT_TRUE(b.buffer);
  EXPECT_EQ(b.buffer->body.data(), body);
  const std::string_view kept(b.buffer->body.data(), b.buffer->body.size());
  EXPECT_GE(b.records[0].data.data(), kept.data());
  EXPECT_LE(b.records[0].data.data() + b.records[0].data.size(), kept.data() + kept.size());
}

TEST(GetRecordsParserTest, RecordsOutliveTheResultThroughTheirBuffer) {
  std::shared_ptr<RecordsBuffer> first_buffer;
  std::vector<KinesisRecord> first;
  {
    GetRecordsResult out;
    ASSERT_TRUE(parse_get_records_response(kNormal, out).ok());
    first_buffer = out.buffer;
    first = out.records;
    // Reusing the result for another answer gives it a new buffer; the first stays intact.
    ASSERT_TRUE(parse_get_records_response(
                    R"({"Records":[{"SequenceNumber":"9","PartitionKey":"q","Data":"eQ=="}]})", out)
                    .ok());
    EXPECT_NE(out.buffer, first_buffer);
  }
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].data, "hello");
  EXPECT_EQ(first[1].data, std::string("\x00\x01\x02\xff\x00\xfe", 6));
  EXPECT_EQ(first[1].partition_key, "pk-\xc3\xa9");
  EXPECT_EQ(first[2].explicit_hash_key, "170141183460469231731687303715884105728");
}

TEST(GetRecordsParserTest, EscapedStringsAreUnescapedIntoTheBuffer) {
  GetRecordsResult out;
  ASSERT_TRUE(parse_get_records_response(
                  R"({"Records":[{"SequenceNumber":"1\u0032","PartitionKey":"a\"b\\c\n",)"
                  R"("ExplicitHashKey":"\u0039","Data":"eQ=="}]})",
                  out)
                  .ok());
  ASSERT_EQ(out.records.size(), 1u);
  EXPECT_EQ(out.records[0].sequence_number, "12");
  EXPECT_EQ(out.records[0].partition_key, "a\"b\\c\n");
  EXPECT_EQ(out.records[0].explicit_hash_key, "9");
  EXPECT_EQ(out.records[0].data, "y");
  EXPECT_EQ(out.buffer->unescaped.size(), 3u);
}

TEST(GetRecordsParserTest, EndOfShardWithNullIterator) {
  GetRecordsResult out;
  ASSERT_TRUE(parse_get_records_response(
                  R"({"Records":[],"NextShardIterator":null,"MillisBehindLatest":0})", out)
                  .ok());
  EXPECT_TRUE(out.records.empty());
  EXPECT_FALSE(out.next_shard_iterator.has_value());
  EXPECT_TRUE(out.shard_ended());
}

TEST(GetRecordsParserTest, EndOfShardWithAbsentIterator) {
  GetRecordsResult out;
  out.next_shard_iterator = "stale";  // must be reset
  ASSERT_TRUE(parse_get_records_response(R"({"Records":[],"MillisBehindLatest":0})", out).ok());
  EXPECT_TRUE(out.shard_ended());
}

TEST(GetRecordsParserTest, ParsesChildShards) {
  const char* json = R"({"Records":[],"MillisBehindLatest":0,"ChildShards":[
    {"ShardId":"shardId-000000000002","ParentShards":["shardId-000000000000"],
     "HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"170141183460469231731687303715884105727"}},
    {"ShardId":"shardId-000000000003","ParentShards":["shardId-000000000000","shardId-000000000001"],
     "HashKeyRange":{"StartingHashKey":"170141183460469231731687303715884105728",
                     "EndingHashKey":"340282366920938463463374607431768211455"}}]})";
  GetRecordsResult out;
  Status s = parse_get_records_response(json, out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(out.shard_ended());
  ASSERT_EQ(out.child_shards.size(), 2u);
  EXPECT_EQ(out.child_shards[0].shard_id, "shardId-000000000002");
  EXPECT_EQ(out.child_shards[0].parent_shards, std::vector<std::string>{"shardId-000000000000"});
  EXPECT_EQ(out.child_shards[0].hash_key_range.starting_hash_key, "0");
  EXPECT_EQ(out.child_shards[0].hash_key_range.ending_hash_key,
            "170141183460469231731687303715884105727");
  EXPECT_EQ(out.child_shards[1].parent_shards.size(), 2u);
  EXPECT_EQ(out.child_shards[1].hash_key_range.ending_hash_key,
            "340282366920938463463374607431768211455");
}

TEST(GetRecordsParserTest, IgnoresUnknownFields) {
  const char* json = R"({"Future":{"a":[1,2,{"b":null}]},"Records":[
    {"SequenceNumber":"1","Data":"eA==","PartitionKey":"p","NewThing":[true,false],
     "ApproximateArrivalTimestamp":1.5}],"MillisBehindLatest":7,"Extra":"x"})";
  GetRecordsResult out;
  Status s = parse_get_records_response(json, out);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.records.size(), 1u);
  EXPECT_EQ(out.records[0].data, "x");
  EXPECT_EQ(out.millis_behind_latest, 7);
}

TEST(GetRecordsParserTest, DataWithJsonEscapesIsUnescapedFirst) {
  // "/" may legally be escaped as "\/" in JSON.
  const std::string b64 = aws::base64_encode(std::string("\xff\xff\xff\xfe", 4));  // "/////g=="
  ASSERT_NE(b64.find('/'), std::string::npos);
  std::string escaped;
  for (char c : b64) {
    if (c == '/')
      escaped += "\\/";
    else
      escaped += c;
  }
  std::string json =
      R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p","Data":")" + escaped + R"("}]})";
  GetRecordsResult out;
  Status s = parse_get_records_response(json, out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out.records[0].data, std::string("\xff\xff\xff\xfe", 4));
}

// A long Data (the vector decoder's path) with "\/" escapes near its start, middle and end:
// the in-place decoding fails on the backslash, puts the text back, and the unescaped text
// is decoded instead. Parsed in place, as the HTTP transport's bodies are.
TEST(GetRecordsParserTest, LongDataWithJsonEscapesAnywhereIsDecodedInPlaceOrUnescaped) {
  std::string bytes;
  for (int i = 0; i < 600; ++i) bytes += static_cast<char>(i % 7 == 0 ? '\xff' : 'a' + i % 26);
  const std::string b64 = aws::base64_encode(bytes);
  std::vector<std::size_t> slashes;
  for (std::size_t i = 0; i < b64.size(); ++i) {
    if (b64[i] == '/') slashes.push_back(i);
  }
  ASSERT_GE(slashes.size(), 8u);
  // Four escapes each time, so the text's length stays a multiple of 4 and the decoder gets
  // as far as the first backslash before it fails.
  for (std::size_t first : {std::size_t{0}, slashes.size() / 2, slashes.size() - 4}) {
    std::string escaped;
    std::size_t from = 0;
    for (std::size_t k = first; k < first + 4; ++k) {
      escaped += b64.substr(from, slashes[k] - from) + "\\/";
      from = slashes[k] + 1;
    }
    escaped += b64.substr(from);
    ASSERT_EQ(escaped.size() % 4, 0u);
    const std::size_t at = slashes[first];
    std::string json = R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p","Data":")" + b64 +
                       R"("},{"SequenceNumber":"2","PartitionKey":"p","Data":")" + escaped +
                       R"("}],"NextShardIterator":"it"})";
    GetRecordsResult out;
    Status s = parse_get_records_response_in_place(std::move(json), out);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(out.records.size(), 2u);
    EXPECT_EQ(out.records[0].data, bytes);
    EXPECT_EQ(out.records[1].data, bytes) << "escape at " << at;
  }
  // A long Data with a character outside the alphabet is still an error naming the record.
  std::string bad = b64;
  bad[bad.size() / 2] = '*';
  GetRecordsResult out;
  Status s = parse_get_records_response_in_place(
      R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p","Data":")" + bad + R"("}]})", out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Records[0].Data: invalid base64"), std::string::npos) << s;
}

TEST(GetRecordsParserTest, ReusedResultIsFullyOverwritten) {
  GetRecordsResult out;
  ASSERT_TRUE(parse_get_records_response(kNormal, out).ok());
  ASSERT_EQ(out.records.size(), 3u);
  ASSERT_TRUE(parse_get_records_response(
                  R"({"Records":[{"SequenceNumber":"9","PartitionKey":"q","Data":"eQ=="}]})", out)
                  .ok());
  ASSERT_EQ(out.records.size(), 1u);
  EXPECT_EQ(out.records[0].sequence_number, "9");
  EXPECT_EQ(out.records[0].data, "y");
  EXPECT_EQ(out.records[0].explicit_hash_key, "");
  EXPECT_EQ(micros_since_epoch(out.records[0].approximate_arrival_timestamp), 0);
  EXPECT_EQ(out.millis_behind_latest, 0);
  EXPECT_TRUE(out.shard_ended());
  EXPECT_EQ(out.payload_bytes, 1u);
}

TEST(GetRecordsParserTest, RoundTripsManyRandomRecords) {
  std::mt19937_64 rng(99);
  std::vector<std::string> payloads;
  std::string json = R"({"Records":[)";
  for (int i = 0; i < 2000; ++i) {
    std::string data(rng() % 3000, '\0');
    for (auto& c : data) c = static_cast<char>(rng());
    if (i) json += ',';
    json += R"({"SequenceNumber":")" + std::to_string(1000 + i) +
            R"(","ApproximateArrivalTimestamp":1717243200.)" + std::to_string(100 + i % 900) +
            R"(,"Data":")" + aws::base64_encode(data) + R"(","PartitionKey":"k)" +
            std::to_string(i) + R"("})";
    payloads.push_back(std::move(data));
  }
  json += R"(],"NextShardIterator":"it","MillisBehindLatest":0})";
  GetRecordsResult out;
  Status s = parse_get_records_response(json, out);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.records.size(), payloads.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    ASSERT_EQ(out.records[i].data, payloads[i]) << i;
    EXPECT_EQ(out.records[i].sequence_number, std::to_string(1000 + i));
    total += payloads[i].size();
  }
  EXPECT_EQ(out.payload_bytes, total);
}

// --- malformed responses ---

void expect_malformed(std::string_view json, std::string_view what) {
  GetRecordsResult out;
  Status s = parse_get_records_response(json, out);
  ASSERT_FALSE(s.ok()) << "accepted: " << json;
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s;
  EXPECT_TRUE(s.message().starts_with("Kinesis.GetRecords: malformed response: ")) << s;
  EXPECT_NE(s.message().find(what), std::string::npos) << "expected '" << what << "' in: " << s;
  EXPECT_TRUE(out.records.empty());
  EXPECT_FALSE(out.next_shard_iterator.has_value());
}

// AWS SDKs read a member whose value is null as absent (kinesis-local sends
// "ChildShards": null on every GetRecords answer); so does the parser, for every optional
// member, and a required member that is null is reported missing.
TEST(GetRecordsParserTest, NullMembersAreAbsent) {
  GetRecordsResult out;
  Status s = parse_get_records_response(
      R"({"Records":[{"SequenceNumber":"7","PartitionKey":"p","Data":"aGk=",)"
      R"("ApproximateArrivalTimestamp":null,"ExplicitHashKey":null,"EncryptionType":null}],)"
      R"("NextShardIterator":"it","MillisBehindLatest":null,"ChildShards":null})",
      out);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.records.size(), 1u);
  EXPECT_EQ(out.records[0].data, "hi");
  EXPECT_EQ(out.records[0].explicit_hash_key, "");
  EXPECT_EQ(out.millis_behind_latest, 0);
  EXPECT_TRUE(out.child_shards.empty());
  EXPECT_FALSE(out.shard_ended());

  // The end of a shard: no iterator (null), children with null members inside.
  s = parse_get_records_response(
      R"({"Records":[],"NextShardIterator":null,"ChildShards":[{"ShardId":"shardId-2",)"
      R"("ParentShards":null,"HashKeyRange":{"StartingHashKey":"0","EndingHashKey":null}}]})",
      out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(out.shard_ended());
  ASSERT_EQ(out.child_shards.size(), 1u);
  EXPECT_TRUE(out.child_shards[0].parent_shards.empty());
  EXPECT_EQ(out.child_shards[0].hash_key_range.starting_hash_key, "0");

  expect_malformed(R"({"Records":null})", "Records: missing");
  expect_malformed(R"({"Records":[{"SequenceNumber":null,"PartitionKey":"p","Data":""}]})",
                   "Records[0].SequenceNumber: missing");
  expect_malformed(R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p","Data":null}]})",
                   "Records[0].Data: missing");
  expect_malformed(R"({"Records":[],"ChildShards":[{"ShardId":null}]})",
                   "ChildShards[0].ShardId: missing");
}

TEST(GetRecordsParserTest, RejectsWrongTypes) {
  expect_malformed(R"([])", "top level");
  expect_malformed(R"("Records")", "top level");
  expect_malformed(R"({"Records":{}})", "Records");
  expect_malformed(R"({"Records":[1]})", "Records[0]");
  expect_malformed(R"({"Records":[{"SequenceNumber":1,"PartitionKey":"p","Data":""}]})",
                   "Records[0].SequenceNumber");
  expect_malformed(R"({"Records":[{"SequenceNumber":"1","PartitionKey":["p"],"Data":""}]})",
                   "Records[0].PartitionKey");
  expect_malformed(R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p","Data":17}]})",
                   "Records[0].Data: not a string");
  expect_malformed(
      R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p","Data":"","ApproximateArrivalTimestamp":"now"}]})",
      "Records[0].ApproximateArrivalTimestamp");
  expect_malformed(
      R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p","Data":"","ApproximateArrivalTimestamp":-5}]})",
      "Records[0].ApproximateArrivalTimestamp: out of range");
  expect_malformed(R"({"Records":[],"NextShardIterator":5})", "NextShardIterator");
  expect_malformed(R"({"Records":[],"MillisBehindLatest":"0"})", "MillisBehindLatest");
  expect_malformed(R"({"Records":[],"MillisBehindLatest":1.5})", "MillisBehindLatest");
  expect_malformed(R"({"Records":[],"ChildShards":{}})", "ChildShards");
  expect_malformed(R"({"Records":[],"ChildShards":[{"ParentShards":[]}]})",
                   "ChildShards[0].ShardId: missing");
  expect_malformed(R"({"Records":[],"ChildShards":[{"ShardId":"s","ParentShards":[1]}]})",
                   "ChildShards[0].ParentShards");
}

TEST(GetRecordsParserTest, RejectsASecondRecordsMember) {
  expect_malformed(
      R"({"Records":[{"SequenceNumber":"1","PartitionKey":"a","Data":""}],)"
      R"("Records":[{"SequenceNumber":"2","PartitionKey":"b","Data":""}],"NextShardIterator":"x"})",
      "a second Records member");
}

TEST(GetRecordsParserTest, RejectsMissingFields) {
  expect_malformed(R"({})", "Records: missing");
  expect_malformed(R"({"NextShardIterator":"x"})", "Records: missing");
  expect_malformed(R"({"Records":[{"PartitionKey":"p","Data":""}]})",
                   "Records[0].SequenceNumber: missing");
  expect_malformed(R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p"}]})",
                   "Records[0].Data: missing");
  expect_malformed(R"({"Records":[{"SequenceNumber":"1","Data":""}]})",
                   "Records[0].PartitionKey: missing");
}

TEST(GetRecordsParserTest, RejectsBadBase64WithItsPosition) {
  expect_malformed(
      R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p","Data":"aGVsbG8="},
                     {"SequenceNumber":"2","PartitionKey":"p","Data":"aGVs!G8="}]})",
      "Records[1].Data: invalid base64");
  expect_malformed(R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p","Data":"aGVsbG8"}]})",
                   "Records[0].Data: invalid base64");
  expect_malformed(R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p","Data":"a\"GVsbG8="}]})",
                   "Records[0].Data: invalid base64");
  // Long enough for the vector decoder, bad character deep inside.
  std::string b64 = aws::base64_encode(std::string(600, 'q'));
  b64[500] = '-';
  expect_malformed(
      R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p","Data":")" + b64 + R"("}]})",
      "Records[0].Data: invalid base64");
}

TEST(GetRecordsParserTest, RejectsInvalidJson) {
  expect_malformed("", "");
  expect_malformed("   ", "");
  expect_malformed("{", "");
  expect_malformed(R"({"Records":[],})", "");
  expect_malformed(R"({"Records":[]} {})", "trailing content");
  expect_malformed(R"({"Records":[]}])", "");
  expect_malformed(R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p","Data":"eA=="},]})", "");
  expect_malformed(
      "{\"Records\":[{\"SequenceNumber\":\"1\xff\",\"PartitionKey\":\"p\",\"Data\":\"\"}]}", "");
}

TEST(GetRecordsParserTest, RejectsEveryTruncation) {
  const std::string full = kNormal;
  for (std::size_t len = 0; len < full.size(); ++len) {
    std::string_view cut(full.data(), len);
    // Cuts that leave only trailing whitespace missing are still complete documents.
    if (full.find_first_not_of(" \n\r\t", len) == std::string::npos) continue;
    GetRecordsResult out;
    Status s = parse_get_records_response(cut, out);
    ASSERT_FALSE(s.ok()) << "accepted a truncation at " << len << ": " << cut;
    EXPECT_EQ(s.code(), StatusCode::kInternal);
    EXPECT_TRUE(s.message().starts_with("Kinesis.GetRecords: malformed response: ")) << s;
  }
}

}  // namespace
}  // namespace kcl::kinesis
