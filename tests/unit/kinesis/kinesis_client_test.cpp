// KinesisClient against a scripted AwsJsonClient: the request bodies it sends and how it
// reads the answers (ListShards paging in particular, which kinesalite cannot exercise).
#include "kinesis/kinesis_client.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aws/base64.h"
#include "support/fake_json_client.h"

namespace kcl::kinesis {
namespace {

using fake::aws_error;
using fake::Call;
using fake::FakeJsonClient;
using nlohmann::json;

std::string shard_json(const std::string& id, const std::string& parent = "",
                       const std::string& adjacent = "", const std::string& ending_seq = "") {
  json s = {
      {"ShardId", id},
      {"HashKeyRange",
       {{"StartingHashKey", "0"}, {"EndingHashKey", "340282366920938463463374607431768211455"}}},
      {"SequenceNumberRange", {{"StartingSequenceNumber", "100"}}}};
  if (!parent.empty()) s["ParentShardId"] = parent;
  if (!adjacent.empty()) s["AdjacentParentShardId"] = adjacent;
  if (!ending_seq.empty()) s["SequenceNumberRange"]["EndingSequenceNumber"] = ending_seq;
  return s.dump();
}

class KinesisClientTest : public ::testing::Test {
 protected:
  std::shared_ptr<FakeJsonClient> fake = std::make_shared<FakeJsonClient>();
  KinesisClient client{fake};
};

// --- ListShards ---

TEST_F(KinesisClientTest, ListShardsFollowsOnlyReceivedTokensAndDropsStreamName) {
  fake->responses.push_back(std::string(R"({"Shards":[)") + shard_json("shardId-0") + "," +
                            shard_json("shardId-1") + R"(],"NextToken":"tok-1"})");
  fake->responses.push_back(std::string(R"({"Shards":[)") + shard_json("shardId-2", "shardId-0") +
                            R"(],"NextToken":"tok-2"})");
  fake->responses.push_back(std::string(R"({"Shards":[)") +
                            shard_json("shardId-3", "shardId-1", "shardId-2", "999") + "]}");
  ShardFilter filter;
  filter.type = ShardFilterType::kFromTrimHorizon;
  auto r = client.list_shards("orders", filter);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[2].parent_shard_id, "shardId-0");
  EXPECT_EQ((*r)[3].parent_shard_id, "shardId-1");
  EXPECT_EQ((*r)[3].adjacent_parent_shard_id, "shardId-2");
  EXPECT_TRUE((*r)[3].closed());
  EXPECT_FALSE((*r)[0].closed());
  EXPECT_EQ((*r)[0].hash_key_range.ending_hash_key, "340282366920938463463374607431768211455");
  EXPECT_EQ((*r)[0].sequence_number_range.starting_sequence_number, "100");

  ASSERT_EQ(fake->calls.size(), 3u);
  for (const auto& c : fake->calls) EXPECT_EQ(c.operation, "ListShards");
  const json& first = fake->calls[0].body;
  EXPECT_EQ(first["StreamName"], "orders");
  EXPECT_FALSE(first.contains("NextToken"));
  EXPECT_EQ(first["ShardFilter"], json({{"Type", "FROM_TRIM_HORIZON"}}));
  EXPECT_EQ(first["MaxResults"], 1000);
  const json& second = fake->calls[1].body;
  EXPECT_EQ(second["NextToken"], "tok-1");
  EXPECT_FALSE(second.contains("StreamName"));
  EXPECT_FALSE(second.contains("ShardFilter"));
  EXPECT_EQ(fake->calls[2].body["NextToken"], "tok-2");
  EXPECT_FALSE(fake->calls[2].body.contains("StreamName"));
}

TEST_F(KinesisClientTest, ListShardsSingleCallWithoutToken) {
  fake->responses.push_back(std::string(R"({"Shards":[)") + shard_json("shardId-0") + "]}");
  auto r = client.list_shards("s");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 1u);
  ASSERT_EQ(fake->calls.size(), 1u);
  EXPECT_FALSE(fake->calls[0].body.contains("ShardFilter"));  // kNone: not sent
  EXPECT_FALSE(fake->calls[0].body.contains("NextToken"));
}

TEST_F(KinesisClientTest, ListShardsFilterSerialization) {
  fake->handler = [](const Call&) -> Result<std::string> {
    return std::string(R"({"Shards":[]})");
  };
  ShardFilter after;
  after.type = ShardFilterType::kAfterShardId;
  after.shard_id = "shardId-000000000007";
  ASSERT_TRUE(client.list_shards_page("s", after, "", 50).ok());
  EXPECT_EQ(fake->calls.back().body["ShardFilter"],
            json({{"Type", "AFTER_SHARD_ID"}, {"ShardId", "shardId-000000000007"}}));
  EXPECT_EQ(fake->calls.back().body["MaxResults"], 50);

  ShardFilter ts;
  ts.type = ShardFilterType::kAtTimestamp;
  ts.timestamp = std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000000250));
  ASSERT_TRUE(client.list_shards_page("s", ts, "", 1000).ok());
  const json& f = fake->calls.back().body["ShardFilter"];
  EXPECT_EQ(f["Type"], "AT_TIMESTAMP");
  ASSERT_TRUE(f["Timestamp"].is_number());
  EXPECT_DOUBLE_EQ(f["Timestamp"].get<double>(), 1700000000.25);

  for (auto [type, name] : std::vector<std::pair<ShardFilterType, std::string>>{
           {ShardFilterType::kAtTrimHorizon, "AT_TRIM_HORIZON"},
           {ShardFilterType::kAtLatest, "AT_LATEST"}}) {
    ShardFilter sf;
    sf.type = type;
    ASSERT_TRUE(client.list_shards_page("s", sf, "", 1000).ok());
    EXPECT_EQ(fake->calls.back().body["ShardFilter"], json({{"Type", name}}));
  }

  const std::size_t before = fake->calls.size();
  ShardFilter missing;
  missing.type = ShardFilterType::kFromTimestamp;
  auto bad = client.list_shards_page("s", missing, "", 1000);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fake->calls.size(), before);  // never sent
}

TEST_F(KinesisClientTest, ListShardsPageReturnsToken) {
  fake->responses.push_back(std::string(R"({"Shards":[)") + shard_json("a") +
                            R"(],"NextToken":"n"})");
  auto r = client.list_shards_page("s", {}, "given", 10);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->next_token, "n");
  EXPECT_EQ(fake->calls[0].body, json({{"NextToken", "given"}, {"MaxResults", 10}}));
}

TEST_F(KinesisClientTest, ListShardsRepeatingTokenIsAnError) {
  fake->handler = [](const Call&) -> Result<std::string> {
    return std::string(R"({"Shards":[],"NextToken":"same"})");
  };
  auto r = client.list_shards("s");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("NextToken repeats"), std::string::npos) << r.status();
  EXPECT_EQ(fake->calls.size(), 2u);
}

TEST_F(KinesisClientTest, ListShardsRestartsOnExpiredToken) {
  fake->responses.push_back(std::string(R"({"Shards":[)") + shard_json("a") +
                            R"(],"NextToken":"t"})");
  fake->responses.push_back(
      aws_error(StatusCode::kInvalidArgument, "ExpiredNextTokenException", "ListShards"));
  fake->responses.push_back(std::string(R"({"Shards":[)") + shard_json("a") +
                            R"(],"NextToken":"u"})");
  fake->responses.push_back(std::string(R"({"Shards":[)") + shard_json("b") + "]}");
  auto r = client.list_shards("s");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].shard_id, "a");
  EXPECT_EQ((*r)[1].shard_id, "b");
  ASSERT_EQ(fake->calls.size(), 4u);
  EXPECT_EQ(fake->calls[2].body["StreamName"], "s");  // started over
}

TEST_F(KinesisClientTest, ListShardsPassesErrorsThrough) {
  fake->responses.push_back(
      aws_error(StatusCode::kNotFound, "ResourceNotFoundException", "ListShards"));
  auto r = client.list_shards("nope");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(r.status().aws().has_value());
  EXPECT_EQ(r.status().aws()->error_type, "ResourceNotFoundException");
}

TEST_F(KinesisClientTest, ListShardsMalformed) {
  fake->responses.push_back(std::string(R"({"Shards":[{"ShardId":"x"}]})"));
  auto r = client.list_shards("s");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(r.status().message(),
            "Kinesis.ListShards: malformed response: Shards[0].HashKeyRange: missing");
  ASSERT_TRUE(r.status().aws().has_value());
  EXPECT_EQ(r.status().aws()->operation, "Kinesis.ListShards");
  EXPECT_EQ(r.status().aws()->endpoint, "http://127.0.0.1:4567");

  fake->responses.push_back(std::string("not json"));
  auto r2 = client.list_shards("s");
  EXPECT_EQ(r2.status().code(), StatusCode::kInternal);
  EXPECT_NE(r2.status().message().find("invalid JSON"), std::string::npos);
}

// AWS SDKs read a member whose value is null as absent; so does the client (kinesis-local
// sends nulls for members it has no value for).
TEST_F(KinesisClientTest, NullMembersAreAbsent) {
  fake->responses.push_back(std::string(
      R"({"Shards":[{"ShardId":"shardId-1","ParentShardId":null,"AdjacentParentShardId":null,)"
      R"("HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"9"},)"
      R"("SequenceNumberRange":{"StartingSequenceNumber":"1","EndingSequenceNumber":null}}],)"
      R"("NextToken":null})"));
  auto r = client.list_shards("s");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].parent_shard_id, "");
  EXPECT_EQ(fake->calls.size(), 1u);  // a null NextToken is the last page

  fake->responses.push_back(
      std::string(R"({"Records":[{"SequenceNumber":"5","ShardId":"shardId-1","ErrorCode":null,)"
                  R"("ErrorMessage":null}],"FailedRecordCount":null,"EncryptionType":null})"));
  auto p = client.put_records("s", {PutRecordsEntry{"d", "k", ""}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->failed_record_count, 0);
  ASSERT_EQ(p->records.size(), 1u);
  EXPECT_TRUE(p->records[0].ok);

  fake->responses.push_back(std::string(R"({"Shards":[{"ShardId":null}]})"));
  auto missing = client.list_shards("s");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("Shards[0].ShardId: missing"), std::string::npos)
      << missing.status();
}

// --- GetShardIterator ---

TEST_F(KinesisClientTest, GetShardIteratorAllTypes) {
  fake->handler = [](const Call&) -> Result<std::string> {
    return std::string(R"({"ShardIterator":"IT"})");
  };
  IteratorPosition p;
  p.type = IteratorType::kTrimHorizon;
  auto r = client.get_shard_iterator("s", "shardId-1", p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "IT");
  EXPECT_EQ(fake->calls.back().operation, "GetShardIterator");
  EXPECT_EQ(
      fake->calls.back().body,
      json({{"StreamName", "s"}, {"ShardId", "shardId-1"}, {"ShardIteratorType", "TRIM_HORIZON"}}));

  p.type = IteratorType::kLatest;
  ASSERT_TRUE(client.get_shard_iterator("s", "shardId-1", p).ok());
  EXPECT_EQ(fake->calls.back().body["ShardIteratorType"], "LATEST");
  EXPECT_FALSE(fake->calls.back().body.contains("StartingSequenceNumber"));

  p.type = IteratorType::kAtSequenceNumber;
  p.sequence_number = "49590338271490256608559692538361571095921575989136588898";
  ASSERT_TRUE(client.get_shard_iterator("s", "shardId-1", p).ok());
  EXPECT_EQ(fake->calls.back().body["ShardIteratorType"], "AT_SEQUENCE_NUMBER");
  EXPECT_EQ(fake->calls.back().body["StartingSequenceNumber"], p.sequence_number);

  p.type = IteratorType::kAfterSequenceNumber;
  ASSERT_TRUE(client.get_shard_iterator("s", "shardId-1", p).ok());
  EXPECT_EQ(fake->calls.back().body["ShardIteratorType"], "AFTER_SEQUENCE_NUMBER");
  EXPECT_EQ(fake->calls.back().body["StartingSequenceNumber"], p.sequence_number);

  p.type = IteratorType::kAtTimestamp;
  p.timestamp = std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000000123));
  ASSERT_TRUE(client.get_shard_iterator("s", "shardId-1", p).ok());
  const json& b = fake->calls.back().body;
  EXPECT_EQ(b["ShardIteratorType"], "AT_TIMESTAMP");
  ASSERT_TRUE(b["Timestamp"].is_number_float());
  EXPECT_NEAR(b["Timestamp"].get<double>(), 1700000000.123, 1e-6);
  EXPECT_FALSE(b.contains("StartingSequenceNumber"));
}

TEST_F(KinesisClientTest, GetShardIteratorNeedsSequenceNumber) {
  IteratorPosition p;
  p.type = IteratorType::kAfterSequenceNumber;
  auto r = client.get_shard_iterator("s", "shardId-1", p);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(fake->calls.empty());
}

TEST_F(KinesisClientTest, GetShardIteratorMalformed) {
  fake->responses.push_back(std::string(R"({"ShardIterator":7})"));
  auto r = client.get_shard_iterator("s", "x", {});
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(r.status().message(),
            "Kinesis.GetShardIterator: malformed response: ShardIterator: not a string");
}

// A closed shard with nothing at or after the position answers a null iterator: the form
// with a budget reports the end of the shard; the plain form (callers that expect an
// iterator) reports it missing.
TEST_F(KinesisClientTest, GetShardIteratorNullIsTheEndOfAClosedShard) {
  fake->responses.push_back(std::string(R"({"ShardIterator":null})"));
  auto end = client.get_shard_iterator("s", "x", {}, aws::CallOptions{});
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->has_value());
  fake->responses.push_back(std::string(R"({})"));
  auto plain = client.get_shard_iterator("s", "x", {});
  EXPECT_EQ(plain.status().code(), StatusCode::kInternal);
  EXPECT_NE(plain.status().message().find("ShardIterator: missing"), std::string::npos)
      << plain.status();
}

// --- GetRecords ---

TEST_F(KinesisClientTest, GetRecordsSendsIteratorAndLimit) {
  fake->responses.push_back(std::string(
      R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p","Data":"aGk=","ApproximateArrivalTimestamp":1.7E9}],)"
      R"("NextShardIterator":"next","MillisBehindLatest":5})"));
  auto r = client.get_records("IT", 250);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(fake->calls[0].operation, "GetRecords");
  EXPECT_EQ(fake->calls[0].body, json({{"ShardIterator", "IT"}, {"Limit", 250}}));
  ASSERT_EQ(r->records.size(), 1u);
  EXPECT_EQ(r->records[0].data, "hi");
  EXPECT_EQ(r->next_shard_iterator, "next");
  EXPECT_EQ(r->millis_behind_latest, 5);
}

TEST_F(KinesisClientTest, GetRecordsMalformedCarriesCallDetails) {
  fake->responses.push_back(
      std::string(R"({"Records":[{"SequenceNumber":"1","PartitionKey":"p","Data":"!!!!"}]})"));
  auto r = client.get_records("IT");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_TRUE(
      r.status().message().starts_with("Kinesis.GetRecords: malformed response: Records[0].Data"))
      << r.status();
  ASSERT_TRUE(r.status().aws().has_value());
  EXPECT_EQ(r.status().aws()->operation, "Kinesis.GetRecords");
  EXPECT_EQ(r.status().aws()->endpoint, "http://127.0.0.1:4567");
}

TEST_F(KinesisClientTest, GetRecordsExpiredIteratorPassesThrough) {
  fake->responses.push_back(
      aws_error(StatusCode::kExpiredIterator, "ExpiredIteratorException", "GetRecords"));
  auto r = client.get_records("IT");
  EXPECT_EQ(r.status().code(), StatusCode::kExpiredIterator);
}

// --- PutRecord(s) ---

TEST_F(KinesisClientTest, PutRecordEncodesData) {
  fake->responses.push_back(
      std::string(R"({"ShardId":"shardId-0","SequenceNumber":"42","EncryptionType":"NONE"})"));
  PutRecordsEntry e{std::string("\x00\xff", 2), "pk", "12345"};
  auto r = client.put_record("s", e);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->shard_id, "shardId-0");
  EXPECT_EQ(r->sequence_number, "42");
  EXPECT_EQ(fake->calls[0].body, json({{"StreamName", "s"},
                                       {"Data", aws::base64_encode(std::string("\x00\xff", 2))},
                                       {"PartitionKey", "pk"},
                                       {"ExplicitHashKey", "12345"}}));
}

TEST_F(KinesisClientTest, PutRecordsPerRecordResults) {
  fake->responses.push_back(std::string(R"({"FailedRecordCount":1,"Records":[
      {"SequenceNumber":"1","ShardId":"shardId-0"},
      {"ErrorCode":"ProvisionedThroughputExceededException","ErrorMessage":"slow down"},
      {"SequenceNumber":"3","ShardId":"shardId-1"}]})"));
  std::vector<PutRecordsEntry> entries = {{"a", "k1", ""}, {"b", "k2", ""}, {"c", "k3", "99"}};
  auto r = client.put_records("s", entries);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->failed_record_count, 1);
  ASSERT_EQ(r->records.size(), 3u);
  EXPECT_TRUE(r->records[0].ok);
  EXPECT_EQ(r->records[0].sequence_number, "1");
  EXPECT_FALSE(r->records[1].ok);
  EXPECT_EQ(r->records[1].error_code, "ProvisionedThroughputExceededException");
  EXPECT_EQ(r->records[1].error_message, "slow down");
  EXPECT_TRUE(r->records[2].ok);
  EXPECT_EQ(r->records[2].shard_id, "shardId-1");
  const json& b = fake->calls[0].body;
  EXPECT_EQ(b["StreamName"], "s");
  ASSERT_EQ(b["Records"].size(), 3u);
  EXPECT_EQ(b["Records"][0], json({{"Data", "YQ=="}, {"PartitionKey", "k1"}}));
  EXPECT_EQ(b["Records"][2]["ExplicitHashKey"], "99");
}

// Without positions the answer is still checked whole, its strings are not kept, and each
// entry names its shard through the answer's list of shard ids.
TEST_F(KinesisClientTest, PutRecordsWithoutPositionsKeepsTheShardIndexOnly) {
  const std::string answer = R"({"FailedRecordCount":1,"Records":[
      {"SequenceNumber":"1","ShardId":"shardId-0"},
      {"ErrorCode":"ProvisionedThroughputExceededException","ErrorMessage":"slow down"},
      {"SequenceNumber":"3","ShardId":"shardId-1"},
      {"SequenceNumber":"4","ShardId":"shardId-0"}]})";
  fake->responses.push_back(answer);
  PutRecordsRequest request("s");
  for (const char* d : {"a", "b", "c", "d"}) request.add(d, "k");
  request.keep_positions(false);
  auto r = client.put_records(std::move(request), aws::CallOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->failed_record_count, 1);
  ASSERT_EQ(r->records.size(), 4u);
  EXPECT_EQ(r->shard_ids, (std::vector<std::string>{"shardId-0", "shardId-1"}));
  for (std::size_t i : {0u, 2u, 3u}) {
    EXPECT_TRUE(r->records[i].ok) << i;
    EXPECT_TRUE(r->records[i].shard_id.empty()) << i;
    EXPECT_TRUE(r->records[i].sequence_number.empty()) << i;
  }
  EXPECT_EQ(r->records[0].shard, 0u);
  EXPECT_EQ(r->records[2].shard, 1u);
  EXPECT_EQ(r->records[3].shard, 0u);
  EXPECT_FALSE(r->records[1].ok);
  EXPECT_EQ(r->records[1].error_code, "ProvisionedThroughputExceededException");

  // Kept (the default): the same indexes beside the strings.
  fake->responses.push_back(answer);
  PutRecordsRequest kept("s");
  for (const char* d : {"a", "b", "c", "d"}) kept.add(d, "k");
  auto k = client.put_records(std::move(kept), aws::CallOptions{});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->records[3].shard_id, "shardId-0");
  EXPECT_EQ(k->records[3].sequence_number, "4");
  EXPECT_EQ(k->records[2].shard, 1u);

  // An answer spread over many shards, some seen again out of order: more than the indexer
  // compares one by one (16), so both its ways of finding an id seen before are used.
  std::string many = R"({"Records":[)";
  PutRecordsRequest spread("s");
  const int order[] = {0,  1, 2,  3,  4,  5,  6,  7,  8, 9,  10, 11, 3,  11, 0,
                       12, 9, 13, 14, 15, 16, 17, 18, 2, 17, 19, 0,  16, 15};
  for (std::size_t i = 0; i < std::size(order); ++i) {
    if (i > 0) many += ',';
    many += R"({"SequenceNumber":"1","ShardId":"shardId-)" + std::to_string(order[i]) + "\"}";
    spread.add("x", "k");
  }
  many += "]}";
  fake->responses.push_back(many);
  spread.keep_positions(false);
  auto m = client.put_records(std::move(spread), aws::CallOptions{});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->shard_ids.size(), 20u);
  for (std::size_t i = 0; i < std::size(order); ++i) {
    EXPECT_EQ(m->shard_ids[m->records[i].shard], "shardId-" + std::to_string(order[i])) << i;
  }

  // A success without its sequence number is malformed either way.
  fake->responses.push_back(std::string(R"({"Records":[{"ShardId":"shardId-0"}]})"));
  PutRecordsRequest bad("s");
  bad.add("a", "k");
  bad.keep_positions(false);
  auto b = client.put_records(std::move(bad), aws::CallOptions{});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("Records[0].SequenceNumber: missing"), std::string::npos)
      << b.status();

  // Members are read in any order, unknown ones ignored, null taken as absent; a member of the
  // wrong type is malformed and named.
  fake->responses.push_back(std::string(
      R"({"Records":[{"Extra":{"a":[1]},"ShardId":"shardId-7","ErrorCode":null,)"
      R"("SequenceNumber":"9"},{"ErrorMessage":"m","ErrorCode":"InternalFailure","ShardId":null}]})"));
  PutRecordsRequest two("s");
  two.add("a", "k");
  two.add("b", "k");
  auto t = client.put_records(std::move(two), aws::CallOptions{});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->records[0].ok);
  EXPECT_EQ(t->records[0].sequence_number, "9");
  EXPECT_EQ(t->records[0].shard_id, "shardId-7");
  EXPECT_FALSE(t->records[1].ok);
  EXPECT_EQ(t->records[1].error_code, "InternalFailure");
  EXPECT_EQ(t->records[1].error_message, "m");
  EXPECT_EQ(t->failed_record_count, 1);
  fake->responses.push_back(
      std::string(R"({"Records":[{"SequenceNumber":9,"ShardId":"shardId-0"}]})"));
  PutRecordsRequest typed("s");
  typed.add("a", "k");
  auto w = client.put_records(std::move(typed), aws::CallOptions{});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInternal);
  EXPECT_NE(w.status().message().find("Records[0].SequenceNumber: not a string"), std::string::npos)
      << w.status();
}

TEST_F(KinesisClientTest, PutRecordsResultCountMismatchIsMalformed) {
  fake->responses.push_back(
      std::string(R"({"FailedRecordCount":0,"Records":[{"SequenceNumber":"1","ShardId":"s"}]})"));
  auto r = client.put_records("s", {{"a", "k", ""}, {"b", "k", ""}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("1 results for 2 entries"), std::string::npos) << r.status();
}

TEST_F(KinesisClientTest, InvalidUtf8PartitionKeyIsInvalidArgument) {
  auto r = client.put_record("s", {"data", std::string("\xff\xfe", 2), ""});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(fake->calls.empty());
}

// --- stream management ---

TEST_F(KinesisClientTest, StreamManagementBodies) {
  fake->handler = [](const Call&) -> Result<std::string> { return std::string("{}"); };
  ASSERT_TRUE(client.create_stream("s", 4).ok());
  EXPECT_EQ(fake->calls.back().operation, "CreateStream");
  EXPECT_EQ(fake->calls.back().body, json({{"StreamName", "s"}, {"ShardCount", 4}}));
  ASSERT_TRUE(client.delete_stream("s").ok());
  EXPECT_EQ(fake->calls.back().operation, "DeleteStream");
  EXPECT_EQ(fake->calls.back().body, json({{"StreamName", "s"}}));
  ASSERT_TRUE(client.split_shard("s", "shardId-0", "1000").ok());
  EXPECT_EQ(fake->calls.back().operation, "SplitShard");
  EXPECT_EQ(
      fake->calls.back().body,
      json({{"StreamName", "s"}, {"ShardToSplit", "shardId-0"}, {"NewStartingHashKey", "1000"}}));
  ASSERT_TRUE(client.merge_shards("s", "shardId-1", "shardId-2").ok());
  EXPECT_EQ(fake->calls.back().operation, "MergeShards");
  EXPECT_EQ(fake->calls.back().body, json({{"StreamName", "s"},
                                           {"ShardToMerge", "shardId-1"},
                                           {"AdjacentShardToMerge", "shardId-2"}}));
}

TEST_F(KinesisClientTest, DescribeStreamSummary) {
  fake->responses.push_back(std::string(R"({"StreamDescriptionSummary":{"StreamName":"s",
      "StreamARN":"arn:aws:kinesis:us-east-1:000000000000:stream/s","StreamStatus":"ACTIVE",
      "RetentionPeriodHours":24,"StreamCreationTimestamp":1700000000.5,"OpenShardCount":3,
      "EnhancedMonitoring":[{"ShardLevelMetrics":[]}],"EncryptionType":"NONE"}})"));
  auto r = client.describe_stream_summary("s");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stream_name, "s");
  EXPECT_EQ(r->stream_arn, "arn:aws:kinesis:us-east-1:000000000000:stream/s");
  EXPECT_EQ(r->stream_status, "ACTIVE");
  EXPECT_EQ(r->retention_period_hours, 24);
  EXPECT_EQ(r->open_shard_count, 3);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(
                r->creation_timestamp.time_since_epoch())
                .count(),
            1700000000500);
}

TEST_F(KinesisClientTest, WaitForActivePollsUntilActive) {
  int n = 0;
  fake->handler = [&n](const Call&) -> Result<std::string> {
    ++n;
    if (n == 1)
      return aws_error(StatusCode::kNotFound, "ResourceNotFoundException", "DescribeStreamSummary");
    const char* status = n < 4 ? "CREATING" : "ACTIVE";
    return std::string(R"({"StreamDescriptionSummary":{"StreamName":"s","StreamStatus":")") +
           status + R"(","OpenShardCount":1,"RetentionPeriodHours":24}})";
  };
  Status s = client.wait_for_active("s", std::chrono::seconds(10));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(n, 4);
}

TEST_F(KinesisClientTest, WaitForActiveGivesUpAtDeadline) {
  fake->handler = [](const Call&) -> Result<std::string> {
    return std::string(
        R"({"StreamDescriptionSummary":{"StreamName":"s","StreamStatus":"UPDATING"}})");
  };
  Status s = client.wait_for_active("s", std::chrono::milliseconds(100));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("UPDATING"), std::string::npos) << s;
}

TEST_F(KinesisClientTest, WaitForActiveStopsOnPermanentError) {
  fake->handler = [](const Call&) -> Result<std::string> {
    return aws_error(StatusCode::kPermissionDenied, "AccessDeniedException",
                     "DescribeStreamSummary");
  };
  Status s = client.wait_for_active("s", std::chrono::seconds(10));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(fake->calls.size(), 1u);
}

}  // namespace
}  // namespace kcl::kinesis
