// `kcl consume` takes over an application whose tables a Java KCL 3.x fleet wrote, in each
// layout of docs/lease-table-layouts.md, written here attribute for attribute with the Java
// sources' names: the 3.5 single-table layout (the leader lock, migration state, worker
// metrics and a stream entry in the lease table, tagged by entityType) and the 3.0-3.4 set
// (the LeaseOwnerToLeaseKeyIndex GSI, <app>-CoordinatorState with Leader and Migration3.0,
// <app>-WorkerMetricStats). The Java worker that held the leases is gone. kcl-cpp must print
// every record after the Java checkpoints and none at or below them, leave every item that is
// not a lease exactly as written, and after a graceful stop leave leases that still read as
// that layout: Java's attributes and types only, no owner, no pending handoff.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dynamodb/dynamodb_client.h"
#include "leases/lease_serializer.h"
#include "support/kcl_process.h"

namespace kcl::cli {
namespace {

using dynamodb::AttributeValue;
using dynamodb::Item;
using nlohmann::json;

// The attributes a Java KCL 3.x lease may carry, with their types.
const std::map<std::string, AttributeValue::Type>& java_lease_attributes() {
  using T = AttributeValue::Type;
  static const std::map<std::string, T> attributes = {
      {"leaseKey", T::kS},
      {"leaseOwner", T::kS},
      {"checkpointOwner", T::kS},
      {"leaseCounter", T::kN},
      {"ownerSwitchesSinceCheckpoint", T::kN},
      {"checkpoint", T::kS},
      {"checkpointSubSequenceNumber", T::kN},
      {"pendingCheckpoint", T::kS},
      {"pendingCheckpointSubSequenceNumber", T::kN},
      {"pendingCheckpointState", T::kB},
      {"parentShardId", T::kSS},
      {"childShardIds", T::kSS},
      {"startingHashKey", T::kS},
      {"endingHashKey", T::kS},
      {"throughputKBps", T::kN},
      {"entityType", T::kS},
  };
  return attributes;
}

Item item(const json& j) {
  auto parsed = dynamodb::item_from_json(j);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : Item{};
}

class JavaTablesTest : public CliTest {
 protected:
  void SetUp() override {
    make_stream("java", 2);
    make_dynamodb();
    app_ = testing::unique_name("java-app");
    // 20 records over the two shards; each shard's Java checkpoint is its middle record.
    for (int i = 0; i < 20; ++i) {
      kinesis::PutRecordsEntry e;
      e.partition_key = "key-" + std::to_string(i);
      e.data = "r" + std::to_string(i);
      auto r = kinesis_->put_record(stream_, e);
      ASSERT_TRUE(r.ok()) << r.status();
      records_[r->shard_id].push_back(r->sequence_number);
    }
    for (const auto& [shard, seqs] : records_) {
      checkpoint_[shard] = seqs[seqs.size() / 2];
      for (std::size_t i = seqs.size() / 2 + 1; i < seqs.size(); ++i) expected_.insert(seqs[i]);
    }
  }

  void TearDown() override {
    for (const std::string& t : {app_, app_ + "-CoordinatorState", app_ + "-WorkerMetricStats",
                                 app_ + "-KclCppCoordinatorState"}) {
      (void)ddb_->delete_table(t);
    }
  }

  // CreateTable as the Java KCL's own code sends it (PAY_PER_REQUEST).
  void create_table(const std::string& name, const std::string& key, bool owner_index = false) {
    json body{
        {"TableName", name},
        {"BillingMode", "PAY_PER_REQUEST"},
        {"KeySchema", json::array({{{"AttributeName", key}, {"KeyType", "HASH"}}})},
        {"AttributeDefinitions", json::array({{{"AttributeName", key}, {"AttributeType", "S"}}})}};
    if (owner_index) {
      body["AttributeDefinitions"].push_back(
          {{"AttributeName", "leaseOwner"}, {"AttributeType", "S"}});
      body["GlobalSecondaryIndexes"] = json::array(
          {{{"IndexName", "LeaseOwnerToLeaseKeyIndex"},
            {"KeySchema", json::array({{{"AttributeName", "leaseOwner"}, {"KeyType", "HASH"}},
                                       {{"AttributeName", "leaseKey"}, {"KeyType", "RANGE"}}})},
            {"Projection", {{"ProjectionType", "KEYS_ONLY"}}}}});
    }
    auto created = ddb_->raw().call("CreateTable", body.dump());
    ASSERT_TRUE(created.ok()) << created.status();
    auto active = ddb_->wait_until_active(name, 30s);
    ASSERT_TRUE(active.ok()) << active.status();
  }

  // The Java KCL 3.x's index of the lease table is there as Java made it (used, never
  // dropped or changed).
  void expect_owner_index_unchanged() {
    auto d = ddb_->describe_table(app_);
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_EQ(d->global_secondary_indexes.size(), 1u);
    const auto& index = d->global_secondary_indexes[0];
    EXPECT_EQ(index.index_name, "LeaseOwnerToLeaseKeyIndex");
    ASSERT_EQ(index.key_schema.size(), 2u);
    EXPECT_EQ(index.key_schema[0].attribute_name, "leaseOwner");
    EXPECT_EQ(index.key_schema[1].attribute_name, "leaseKey");
  }

  void put(const std::string& table, const Item& i) {
    auto written = ddb_->put_item(table, i);
    ASSERT_TRUE(written.ok()) << written.status();
  }

  // The Java worker's lease of `shard` at its checkpoint; `extra` adds attributes of the
  // layout (entityType, throughputKBps).
  Item java_lease(const std::string& shard, json extra) {
    json j{{"leaseKey", {{"S", shard}}},
           {"leaseOwner", {{"S", "java-worker-1"}}},
           {"leaseCounter", {{"N", "57"}}},
           {"ownerSwitchesSinceCheckpoint", {{"N", "0"}}},
           {"checkpoint", {{"S", checkpoint_.at(shard)}}},
           {"checkpointSubSequenceNumber", {{"N", "0"}}}};
    j.update(extra);
    return item(j);
  }

  // Runs kcl consume until it printed every record after the checkpoints, stops it
  // gracefully, and checks what it printed: exactly those records.
  void consume_and_check() {
    KclProcess p(aws_,
                 {"consume", "--stream", stream_, "--app", app_, "--failover-ms", "3000",
                  "--checkpoint-interval", "0"},
                 ::testing::TempDir() + "/" + app_ + ".out");
    ASSERT_TRUE(p.started());
    ASSERT_TRUE(eventually([&] { return p.lines().size() >= expected_.size(); }, 90s))
        << p.lines().size() << " of " << expected_.size() << " records printed";
    EXPECT_EQ(p.stop(), 0);
    std::multiset<std::string> printed;
    for (const std::string& line : p.lines()) {
      printed.insert(json::parse(line).at("sequenceNumber").get<std::string>());
    }
    EXPECT_EQ(printed, std::multiset<std::string>(expected_.begin(), expected_.end()))
        << "printed something at or below a Java checkpoint, twice, or not at all";
  }

  // After the graceful stop: each lease at its shard's last record, free, no handoff, with
  // Java's attributes and types only, `entity_type` kept where it was.
  void check_leases_read_as_java(const std::map<std::string, bool>& entity_type) {
    for (const auto& [shard, seqs] : records_) {
      auto got = ddb_->get_item(app_, leases::lease_key_item(shard));
      ASSERT_TRUE(got.ok() && got->has_value()) << shard;
      const Item& l = **got;
      EXPECT_EQ(l.at("checkpoint").s(), seqs.back()) << shard;
      EXPECT_EQ(l.count("leaseOwner"), 0u) << shard << " still owned after the graceful stop";
      EXPECT_EQ(l.count("checkpointOwner"), 0u) << shard << " left in a handoff";
      EXPECT_EQ(l.count("entityType"), entity_type.at(shard) ? 1u : 0u) << shard;
      for (const auto& [name, value] : l) {
        auto known = java_lease_attributes().find(name);
        ASSERT_NE(known, java_lease_attributes().end()) << shard << ": " << name;
        EXPECT_EQ(value.type(), known->second) << shard << ": " << name;
      }
    }
  }

  void expect_unchanged(const std::string& table, const std::string& key_name,
                        const std::vector<Item>& items) {
    for (const Item& want : items) {
      Item key;
      key.emplace(key_name, want.at(key_name));
      auto now = ddb_->get_item(table, key);
      ASSERT_TRUE(now.ok() && now->has_value()) << table << " " << want.at(key_name).s();
      EXPECT_EQ(**now, want) << table << " " << want.at(key_name).s() << " was changed";
    }
  }

  bool table_exists(const std::string& name) { return ddb_->describe_table(name).ok(); }

  std::string app_;
  std::map<std::string, std::vector<std::string>> records_;  // shard -> sequence numbers
  std::map<std::string, std::string> checkpoint_;            // shard -> Java's checkpoint
  std::set<std::string> expected_;                           // records after the checkpoints
};

TEST_F(JavaTablesTest, TheJava35SingleTableLayoutIsTakenOverAndLeftAsItWas) {
  create_table(app_, "leaseKey", /*owner_index=*/true);
  // One lease a 3.5 worker created (entityType LEASE), one from before 3.5 (none).
  std::map<std::string, bool> tagged;
  bool first = true;
  for (const auto& [shard, seqs] : records_) {
    json extra{{"throughputKBps", {{"N", "0.5"}}}};
    if (first) extra["entityType"] = {{"S", "LEASE"}};
    tagged[shard] = first;
    first = false;
    put(app_, java_lease(shard, extra));
  }
  const std::vector<Item> others = {
      item({{"leaseKey", {{"S", "Leader"}}},
            {"entityType", {{"S", "LEADER"}}},
            {"ownerName", {{"S", "java-worker-1"}}},
            {"leaseDuration", {{"S", "120000"}}},
            {"recordVersionNumber", {{"S", "8d7c5b3a-0000-4000-8000-00000000beef"}}}}),
      item({{"leaseKey", {{"S", "Migration3.0"}}},
            {"entityType", {{"S", "CLIENT_VERSION_MIGRATION"}}},
            {"cv", {{"S", "CLIENT_VERSION_3X"}}},
            {"mb", {{"S", "java-worker-1"}}},
            {"mts", {{"N", "1764000000000"}}},
            {"h",
             {{"L", json::array({{{"M",
                                   {{"cv", {{"S", "CLIENT_VERSION_3X"}}},
                                    {"mb", {{"S", "java-worker-1"}}},
                                    {"mts", {{"N", "1764000000000"}}}}}}})}}}}),
      item({{"leaseKey", {{"S", "java-worker-1"}}},
            {"entityType", {{"S", "WORKER_METRIC_STATS"}}},
            {"lut", {{"N", "1764000000"}}},
            {"sts", {{"M", {{"C", {{"L", json::array({{{"N", "21"}}, {{"N", "-1"}}})}}}}}}},
            {"opr", {{"M", {{"C", {{"L", json::array({{{"N", "100"}}})}}}}}}},
            {"sup", {{"N", "1"}}},
            {"slu", {{"N", "1764000000"}}}}),
      item({{"leaseKey", {{"S", "123456789012:" + stream_ + ":1700000000"}}},
            {"entityType", {{"S", "STREAM"}}},
            {"streamId", {{"S", "123456789012:" + stream_ + ":1700000000"}}}}),
  };
  for (const Item& i : others) put(app_, i);

  consume_and_check();
  expect_owner_index_unchanged();
  expect_unchanged(app_, "leaseKey", others);
  check_leases_read_as_java(tagged);
  // A Java 3.5 fleet reads a "<app>-CoordinatorState" table as a 3.0-3.4 one still to
  // migrate: kcl-cpp keeps its own coordination in a table of its own name.
  EXPECT_FALSE(table_exists(app_ + "-CoordinatorState"));
  EXPECT_TRUE(table_exists(app_ + "-KclCppCoordinatorState"));
}

TEST_F(JavaTablesTest, TheJava30To34TableSetIsTakenOverAndLeftAsItWas) {
  create_table(app_, "leaseKey", /*owner_index=*/true);
  create_table(app_ + "-CoordinatorState", "key");
  create_table(app_ + "-WorkerMetricStats", "wid");
  std::map<std::string, bool> tagged;
  for (const auto& [shard, seqs] : records_) {
    put(app_, java_lease(shard, {{"throughputKBps", {{"N", "12.75"}}}}));
    tagged[shard] = false;
  }
  const std::vector<Item> coordinator = {
      item({{"key", {{"S", "Leader"}}},
            {"ownerName", {{"S", "java-worker-1"}}},
            {"leaseDuration", {{"S", "120000"}}},
            {"recordVersionNumber", {{"S", "1f2e3d4c-0000-4000-8000-00000000cafe"}}}}),
      item({{"key", {{"S", "Migration3.0"}}},
            {"cv", {{"S", "CLIENT_VERSION_3X"}}},
            {"mb", {{"S", "java-worker-1"}}},
            {"mts", {{"N", "1763000000000"}}},
            {"h", {{"L", json::array()}}}}),
  };
  for (const Item& i : coordinator) put(app_ + "-CoordinatorState", i);
  const std::vector<Item> metrics = {
      item({{"wid", {{"S", "java-worker-1"}}},
            {"lut", {{"N", "1763000000"}}},
            {"sts", {{"M", {{"T", {{"L", json::array({{{"N", "3.5"}}})}}}}}}},
            {"opr", {{"M", json::object()}}}}),
  };
  for (const Item& i : metrics) put(app_ + "-WorkerMetricStats", i);

  consume_and_check();
  expect_owner_index_unchanged();
  expect_unchanged(app_ + "-CoordinatorState", "key", coordinator);
  expect_unchanged(app_ + "-WorkerMetricStats", "wid", metrics);
  check_leases_read_as_java(tagged);
  // kcl-cpp shares the 3.0-3.4 coordinator state table (entries of its own) and creates no
  // other.
  EXPECT_FALSE(table_exists(app_ + "-KclCppCoordinatorState"));
}

// A Java multi-stream application's table: leases "<account>:<stream>:<creation epoch>:<shard>"
// with streamName (the stream identifier) and shardId, the identifier built here from the
// stream's ARN and creation time as the Java KCL's StreamIdentifier does. kcl consume reading
// both streams resumes each shard after its Java checkpoint and leaves the leases as Java
// wrote them (plus its checkpoints).
TEST_F(JavaTablesTest, AJavaMultiStreamTableIsTakenOver) {
  // A second stream beside the fixture's, with its records and checkpoints.
  const std::string second = testing::unique_name("java-second");
  ASSERT_TRUE(kinesis_->create_stream(second, 1).ok());
  ASSERT_TRUE(kinesis_->wait_for_active(second, 30s).ok());
  std::map<std::string, std::map<std::string, std::vector<std::string>>>
      records;  // stream -> shard
  records[stream_] = records_;
  for (int i = 0; i < 6; ++i) {
    kinesis::PutRecordsEntry e;
    e.partition_key = "second-" + std::to_string(i);
    e.data = "s" + std::to_string(i);
    auto r = kinesis_->put_record(second, e);
    ASSERT_TRUE(r.ok()) << r.status();
    records[second][r->shard_id].push_back(r->sequence_number);
  }
  std::set<std::string> expected;  // "<stream> <sequence number>"
  create_table(app_, "leaseKey");
  std::map<std::string, std::string> identifier;
  for (const auto& [stream, shards] : records) {
    // DescribeStreamSummary as the Java KCL reads it: the account from the ARN, the
    // creation time in epoch seconds.
    auto answer = kinesis_->describe_stream_summary(stream);
    ASSERT_TRUE(answer.ok()) << answer.status();
    std::vector<std::string> arn;
    std::stringstream parts(answer->stream_arn);
    for (std::string p; std::getline(parts, p, ':');) arn.push_back(p);
    ASSERT_GE(arn.size(), 6u) << answer->stream_arn;
    const auto epoch = std::chrono::duration_cast<std::chrono::seconds>(
                           answer->creation_timestamp.time_since_epoch())
                           .count();
    identifier[stream] = arn[4] + ":" + stream + ":" + std::to_string(epoch);
    for (const auto& [shard, seqs] : shards) {
      const std::string& at = seqs[seqs.size() / 2];
      for (std::size_t i = seqs.size() / 2 + 1; i < seqs.size(); ++i) {
        expected.insert(stream + " " + seqs[i]);
      }
      put(app_, item({{"leaseKey", {{"S", identifier[stream] + ":" + shard}}},
                      {"leaseOwner", {{"S", "java-worker-1"}}},
                      {"leaseCounter", {{"N", "9"}}},
                      {"ownerSwitchesSinceCheckpoint", {{"N", "0"}}},
                      {"checkpoint", {{"S", at}}},
                      {"checkpointSubSequenceNumber", {{"N", "0"}}},
                      {"streamName", {{"S", identifier[stream]}}},
                      {"shardId", {{"S", shard}}}}));
    }
  }

  KclProcess p(aws_,
               {"consume", "--stream", stream_, "--stream", second, "--app", app_, "--failover-ms",
                "3000", "--checkpoint-interval", "0"},
               ::testing::TempDir() + "/" + app_ + ".multi.out");
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(eventually([&] { return p.lines().size() >= expected.size(); }, 90s))
      << p.lines().size() << " of " << expected.size() << " records printed";
  EXPECT_EQ(p.stop(), 0);
  std::multiset<std::string> printed;
  for (const std::string& line : p.lines()) {
    const json j = json::parse(line);
    printed.insert(j.at("streamName").get<std::string>() + " " +
                   j.at("sequenceNumber").get<std::string>());
  }
  EXPECT_EQ(printed, std::multiset<std::string>(expected.begin(), expected.end()));

  // The Java layout still: the same keys, streamName and shardId, each at its shard's last
  // record, no owner left.
  for (const auto& [stream, shards] : records) {
    for (const auto& [shard, seqs] : shards) {
      auto got = ddb_->get_item(app_, leases::lease_key_item(identifier[stream] + ":" + shard));
      ASSERT_TRUE(got.ok() && got->has_value()) << stream << " " << shard;
      const Item& l = **got;
      EXPECT_EQ(l.at("streamName").s(), identifier[stream]);
      EXPECT_EQ(l.at("shardId").s(), shard);
      EXPECT_EQ(l.at("checkpoint").s(), seqs.back());
      EXPECT_EQ(l.count("leaseOwner"), 0u);
    }
  }
  auto all = ddb_->scan_all(app_);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), records[stream_].size() + records[second].size())
      << "kcl-cpp created leases of its own";
  (void)kinesis_->delete_stream(second);
}

}  // namespace
}  // namespace kcl::cli
