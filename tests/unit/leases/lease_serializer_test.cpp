// The Java KCL 2.x lease item format: items written by hand as the Java KCL writes them load
// correctly, and what kcl-cpp writes has exactly those attribute names and DynamoDB types.
#include "leases/lease_serializer.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace kcl::leases {
namespace {

using dynamodb::AttributeValue;
using dynamodb::Item;
using ESN = ExtendedSequenceNumber;

// An item in DynamoDB's JSON wire form, as the Java KCL 2.x writes it (and as `aws dynamodb
// scan` shows it).
Item wire(const char* json) {
  auto item = dynamodb::item_from_json(nlohmann::json::parse(json));
  EXPECT_TRUE(item.ok()) << item.status();
  return item.value();
}

TEST(LeaseSerializerTest, ReadsAJavaKclLeaseWithTwoParentsAndSubSequenceCheckpoint) {
  // A merge child (two parents) held by a Java worker, with a KPL sub-sequence checkpoint and
  // a prepared (pending) checkpoint with application state.
  Item item = wire(R"({
    "leaseKey": {"S": "shardId-000000000007"},
    "leaseOwner": {"S": "ip-10-0-0-12.ec2.internal:1f0e6a41-2ab1-4c1e-8c33-5f0c2e6f2f6b"},
    "leaseCounter": {"N": "1234"},
    "ownerSwitchesSinceCheckpoint": {"N": "2"},
    "checkpoint": {"S": "49590338271490256608559692538361571095921575989136588898"},
    "checkpointSubSequenceNumber": {"N": "17"},
    "pendingCheckpoint": {"S": "49590338271490256608559692540361571095921575989136588898"},
    "pendingCheckpointSubSequenceNumber": {"N": "3"},
    "pendingCheckpointState": {"B": "c3RhdGUtYnl0ZXM="},
    "parentShardId": {"SS": ["shardId-000000000005", "shardId-000000000003"]},
    "childShardIds": {"SS": ["shardId-000000000009"]},
    "startingHashKey": {"S": "0"},
    "endingHashKey": {"S": "340282366920938463463374607431768211455"}
  })");
  auto lease = lease_from_item(item);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->lease_key, "shardId-000000000007");
  EXPECT_EQ(lease->lease_owner, "ip-10-0-0-12.ec2.internal:1f0e6a41-2ab1-4c1e-8c33-5f0c2e6f2f6b");
  EXPECT_EQ(lease->lease_counter, 1234);
  EXPECT_EQ(lease->owner_switches_since_checkpoint, 2);
  EXPECT_EQ(lease->checkpoint, ESN("49590338271490256608559692538361571095921575989136588898", 17));
  EXPECT_EQ(lease->checkpoint.sub_sequence_number(), 17);
  ASSERT_TRUE(lease->pending_checkpoint);
  EXPECT_EQ(*lease->pending_checkpoint,
            ESN("49590338271490256608559692540361571095921575989136588898", 3));
  EXPECT_EQ(lease->pending_checkpoint_state, "state-bytes");
  EXPECT_EQ(lease->parent_shard_ids,
            (std::vector<std::string>{"shardId-000000000003", "shardId-000000000005"}));
  EXPECT_EQ(lease->child_shard_ids, std::vector<std::string>{"shardId-000000000009"});
  ASSERT_TRUE(lease->hash_key_range);
  EXPECT_EQ(lease->hash_key_range->starting_hash_key, "0");
  EXPECT_EQ(lease->hash_key_range->ending_hash_key, "340282366920938463463374607431768211455");
}

TEST(LeaseSerializerTest, ReadsTheSentinelCheckpoints) {
  for (const char* sentinel : {"TRIM_HORIZON", "LATEST", "AT_TIMESTAMP", "SHARD_END"}) {
    std::string json = std::string(R"({"leaseKey": {"S": "shardId-000000000001"},
        "leaseCounter": {"N": "0"}, "ownerSwitchesSinceCheckpoint": {"N": "0"},
        "checkpoint": {"S": ")") +
                       sentinel + R"("}, "checkpointSubSequenceNumber": {"N": "0"}})";
    auto lease = lease_from_item(wire(json.c_str()));
    ASSERT_TRUE(lease.ok()) << sentinel << ": " << lease.status();
    EXPECT_EQ(lease->checkpoint.sequence_number(), sentinel);
    EXPECT_TRUE(lease->checkpoint.is_sentinel());
    EXPECT_FALSE(lease->lease_owner) << "a free lease has no leaseOwner attribute";
    EXPECT_FALSE(lease->pending_checkpoint);
    EXPECT_TRUE(lease->parent_shard_ids.empty());
  }
  auto end = lease_from_item(wire(R"({"leaseKey": {"S": "s"}, "leaseCounter": {"N": "5"},
      "checkpoint": {"S": "SHARD_END"}})"));
  ASSERT_TRUE(end.ok());
  EXPECT_TRUE(end->checkpoint.is_shard_end());
  EXPECT_EQ(end->owner_switches_since_checkpoint, 0) << "missing reads as 0";
}

TEST(LeaseSerializerTest, ToleratesWhatSomeJavaVersionsWrite) {
  // Some Java versions wrote pendingCheckpointState as a number on create; newer ones add
  // attributes of their own. Neither stops the lease from loading.
  auto lease = lease_from_item(wire(R"({"leaseKey": {"S": "shardId-1"}, "leaseCounter": {"N": "3"},
      "checkpoint": {"S": "100"}, "checkpointSubSequenceNumber": {"N": "0"},
      "pendingCheckpoint": {"S": ""}, "pendingCheckpointState": {"N": "0"},
      "throughputKBps": {"N": "12.5"}, "entityType": {"S": "LEASE"}})"));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_FALSE(lease->pending_checkpoint) << "an empty pendingCheckpoint is none";
  EXPECT_FALSE(lease->pending_checkpoint_state);
}

TEST(LeaseSerializerTest, RejectsItemsThatAreNotLeases) {
  EXPECT_EQ(lease_from_item(wire(R"({"id": {"S": "x"}})")).status().code(), StatusCode::kInternal);
  auto no_counter = lease_from_item(wire(R"({"leaseKey": {"S": "a"}, "checkpoint": {"S": "1"}})"));
  EXPECT_NE(no_counter.status().message().find("leaseCounter"), std::string::npos);
  auto bad_type = lease_from_item(
      wire(R"({"leaseKey": {"S": "a"}, "leaseCounter": {"S": "1"}, "checkpoint": {"S": "1"}})"));
  EXPECT_NE(bad_type.status().message().find("expected N"), std::string::npos) << bad_type.status();
  auto bad_checkpoint = lease_from_item(
      wire(R"({"leaseKey": {"S": "a"}, "leaseCounter": {"N": "1"}, "checkpoint": {"S": "x1"}})"));
  EXPECT_EQ(bad_checkpoint.status().code(), StatusCode::kInternal);
  auto negative_sub = lease_from_item(
      wire(R"({"leaseKey": {"S": "a"}, "leaseCounter": {"N": "1"}, "checkpoint": {"S": "1"},)"
           R"( "checkpointSubSequenceNumber": {"N": "-1"}})"));
  EXPECT_EQ(negative_sub.status().code(), StatusCode::kInternal);
  EXPECT_NE(negative_sub.status().message().find("checkpointSubSequenceNumber"), std::string::npos)
      << negative_sub.status();
}

TEST(LeaseSerializerTest, WritesExactlyTheJavaNamesAndTypes) {
  Lease l;
  l.lease_key = "shardId-000000000007";
  l.lease_owner = "worker-1";
  l.lease_counter = 42;
  l.owner_switches_since_checkpoint = 1;
  l.checkpoint = ESN("12345", 6);
  l.pending_checkpoint = ESN("12399", 2);
  l.pending_checkpoint_state = std::string("\x00\xff", 2);
  l.parent_shard_ids = {"shardId-000000000003", "shardId-000000000005"};
  l.child_shard_ids = {"shardId-000000000009"};
  l.hash_key_range = HashKeyRange{"0", "170141183460469231731687303715884105727"};
  Item item = lease_to_item(l);

  using T = AttributeValue::Type;
  const std::map<std::string, T> expected = {
      {"leaseKey", T::kS},
      {"leaseOwner", T::kS},
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
  };
  std::map<std::string, T> actual;
  for (const auto& [name, value] : item) actual[name] = value.type();
  EXPECT_EQ(actual, expected);
  EXPECT_EQ(item.at("leaseCounter").s(), "42");
  EXPECT_EQ(item.at("checkpoint").s(), "12345");
  EXPECT_EQ(item.at("checkpointSubSequenceNumber").s(), "6");
  EXPECT_EQ(item.at("pendingCheckpointState").s(), std::string("\x00\xff", 2));

  // And back.
  auto back = lease_from_item(item);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, l);
}

TEST(LeaseSerializerTest, AFreshFreeLeaseHasOnlyTheAlwaysPresentAttributes) {
  Lease l;
  l.lease_key = "shardId-000000000000";
  Item item = lease_to_item(l);
  std::set<std::string> names;
  for (const auto& [name, value] : item) names.insert(name);
  EXPECT_EQ(names,
            (std::set<std::string>{"leaseKey", "leaseCounter", "ownerSwitchesSinceCheckpoint",
                                   "checkpoint", "checkpointSubSequenceNumber"}));
  EXPECT_EQ(item.at("checkpoint").s(), "TRIM_HORIZON");
  auto back = lease_from_item(item);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, l);
}

// The Java KCL 3.5 single-table layout keeps other entities in the lease table, each tagged
// by entityType (from its EntityType enum); an item without entityType, or with "LEASE", is
// a lease. The keys of its coordinator state are not leases even without a tag.
TEST(LeaseSerializerTest, OnlyLeasesAreLeasesInTheJava35SingleTableLayout) {
  const char* others[][2] = {
      {R"({"leaseKey": {"S": "Leader"}, "entityType": {"S": "LEADER"},)"
       R"( "ownerName": {"S": "w1"}, "leaseDuration": {"S": "120000"},)"
       R"( "recordVersionNumber": {"S": "0f7c"}})",
       "LEADER"},
      {R"({"leaseKey": {"S": "Migration3.0"}, "entityType": {"S": "CLIENT_VERSION_MIGRATION"},)"
       R"( "cv": {"S": "CLIENT_VERSION_3X"}, "mb": {"S": "w1"}, "mts": {"N": "1764000000000"}})",
       "CLIENT_VERSION_MIGRATION"},
      {R"({"leaseKey": {"S": "TableMigration3.5"}, "entityType": {"S": "TABLE_MIGRATION"},)"
       R"( "tm": {"S": "TABLE_MIGRATION_STATUS_COMPLETE"}})",
       "TABLE_MIGRATION"},
      {R"({"leaseKey": {"S": "worker-7"}, "entityType": {"S": "WORKER_METRIC_STATS"},)"
       R"( "lut": {"N": "1764000000"}, "sts": {"M": {"C": {"L": [{"N": "10"}]}}}})",
       "WORKER_METRIC_STATS"},
      {R"({"leaseKey": {"S": "123456789012:orders:1700000000"}, "entityType": {"S": "STREAM"},)"
       R"( "streamId": {"S": "123456789012:orders:1700000000"}})",
       "STREAM"},
      {R"({"leaseKey": {"S": "Leader"}, "ownerName": {"S": "w1"}})", "coordinator state"},
      {R"({"leaseKey": {"S": "x"}, "entityType": {"N": "1"}})", "(entityType not a string)"},
  };
  for (const auto& [json, entity] : others) {
    const Item item = wire(json);
    EXPECT_EQ(other_entity(item), std::optional<std::string>(entity)) << json;
    EXPECT_TRUE(has_entity_type(item) || std::string(entity) == "coordinator state") << json;
  }
  const Item tagged = wire(R"({"leaseKey": {"S": "shardId-1"}, "entityType": {"S": "LEASE"},)"
                           R"( "leaseCounter": {"N": "3"}, "checkpoint": {"S": "TRIM_HORIZON"},)"
                           R"( "throughputKBps": {"N": "1.5E-1"}})");
  EXPECT_EQ(other_entity(tagged), std::nullopt);
  EXPECT_TRUE(has_entity_type(tagged));
  ASSERT_TRUE(lease_from_item(tagged).ok());
  const Item untagged = wire(R"({"leaseKey": {"S": "shardId-2"}, "leaseCounter": {"N": "3"},)"
                             R"( "checkpoint": {"S": "TRIM_HORIZON"}})");
  EXPECT_EQ(other_entity(untagged), std::nullopt);
  EXPECT_FALSE(has_entity_type(untagged));

  // New leases carry the tag only where the table uses it.
  Lease l;
  l.lease_key = "shardId-3";
  EXPECT_EQ(lease_to_item(l).count("entityType"), 0u);
  const Item made = lease_to_item(l, /*tag_entity_type=*/true);
  ASSERT_EQ(made.count("entityType"), 1u);
  EXPECT_EQ(made.at("entityType"), AttributeValue::S("LEASE"));
  EXPECT_EQ(other_entity(made), std::nullopt);
}

}  // namespace
}  // namespace kcl::leases
