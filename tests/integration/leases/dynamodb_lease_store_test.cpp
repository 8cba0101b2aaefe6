// DynamoDbLeaseStore against dynalite: table creation and schema checks, the LeaseStore
// contract (same results as the in-memory store), the Java KCL item format on the wire, and
// coordinators sharing a real table.
#include "leases/dynamodb_lease_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "assignment/dynamodb_coordination_store.h"
#include "aws/aws_json_client.h"
#include "aws/credentials.h"
#include "aws/http_transport.h"
#include "checkpoint/shard_checkpointer.h"
#include "leases/lease_serializer.h"
#include "support/emulators.h"
#include "unit/assignment/coordination_store_contract.h"
#include "unit/leases/lease_store_contract.h"
#include "unit/leases/lease_test_util.h"

namespace kcl::leases {
namespace {

using namespace std::chrono_literals;
using dynamodb::AttributeValue;
using dynamodb::Item;

class DynamoDbLeaseStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& emulators = kcl::testing::shared_emulators();
    AwsConfig config = emulators.aws_config();
    ASSERT_TRUE(config.credentials.has_value());
    std::shared_ptr<aws::AwsJsonClient> raw = aws::make_aws_json_client(
        aws::dynamodb_service(), config, aws::make_curl_transport(config.http),
        aws::make_static_provider(*config.credentials));
    client_ = std::make_shared<dynamodb::DynamoDbClient>(std::move(raw));
  }
  void TearDown() override {
    for (const auto& t : tables_) (void)client_->delete_table(t);
  }

  LeaseConfig config(const std::string& table) {
    LeaseConfig c;
    c.application_name = table;
    c.worker_id = "integration";
    c.assignment = LeaseAssignment::kWorkerTakes;
    c.table_active_timeout = 30s;
    tables_.push_back(table);
    return c;
  }

  // A store on a new, created table.
  std::unique_ptr<DynamoDbLeaseStore> ready_store(std::string_view prefix = "leases") {
    auto store =
        std::make_unique<DynamoDbLeaseStore>(client_, config(kcl::testing::unique_name(prefix)));
    Status s = store->create_table_if_not_exists();
    EXPECT_TRUE(s.ok()) << s;
    return store;
  }

  std::shared_ptr<dynamodb::DynamoDbClient> client_;
  std::vector<std::string> tables_;
};

TEST_F(DynamoDbLeaseStoreTest, CreatesThePayPerRequestTableOnFirstStart) {
  std::string table = kcl::testing::unique_name("leases");
  DynamoDbLeaseStore store(client_, config(table));
  ASSERT_TRUE(store.create_table_if_not_exists().ok());
  auto d = client_->describe_table(table);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->table_status, "ACTIVE");
  ASSERT_EQ(d->key_schema.size(), 1u);
  EXPECT_EQ(d->key_schema[0].attribute_name, "leaseKey");
  EXPECT_EQ(d->key_schema[0].key_type, "HASH");
  EXPECT_EQ(d->billing_mode, "PAY_PER_REQUEST");
  // Second start: the table is used as it is.
  EXPECT_TRUE(store.create_table_if_not_exists().ok());
  DynamoDbLeaseStore again(client_, config(table));
  EXPECT_TRUE(again.create_table_if_not_exists().ok());
}

TEST_F(DynamoDbLeaseStoreTest, ProvisionedCapacityIsAnOption) {
  std::string table = kcl::testing::unique_name("leases-prov");
  LeaseConfig c = config(table);
  c.billing_mode = BillingMode::kProvisioned;
  c.read_capacity_units = 7;
  c.write_capacity_units = 9;
  DynamoDbLeaseStore store(client_, c);
  ASSERT_TRUE(store.create_table_if_not_exists().ok());
  auto d = client_->describe_table(table);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->billing_mode, "PROVISIONED");
}

TEST_F(DynamoDbLeaseStoreTest, WrongKeySchemaIsAClearErrorAndNothingIsWritten) {
  std::string table = kcl::testing::unique_name("not-leases");
  tables_.push_back(table);
  dynamodb::CreateTableRequest req;
  req.table_name = table;
  req.key_schema = {{"id", "HASH"}, {"ts", "RANGE"}};
  req.attribute_definitions = {{"id", "S"}, {"ts", "N"}};
  ASSERT_TRUE(client_->create_table(req).ok());
  ASSERT_TRUE(client_->wait_until_active(table, 30000ms).ok());

  DynamoDbLeaseStore store(client_, config(table));
  Status s = store.create_table_if_not_exists();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find(table), std::string::npos) << s;
  EXPECT_NE(s.message().find("id (HASH, S), ts (RANGE, N)"), std::string::npos) << s;
  EXPECT_NE(s.message().find("leaseKey (S)"), std::string::npos) << s;
  EXPECT_NE(s.message().find("nothing was written"), std::string::npos) << s;
  auto items = client_->scan_all(table, true);
  ASSERT_TRUE(items.ok()) << items.status();
  EXPECT_TRUE(items->empty());

  // A hash key of the right name but the wrong type is refused too.
  std::string table2 = kcl::testing::unique_name("not-leases");
  tables_.push_back(table2);
  req.table_name = table2;
  req.key_schema = {{"leaseKey", "HASH"}};
  req.attribute_definitions = {{"leaseKey", "N"}};
  ASSERT_TRUE(client_->create_table(req).ok());
  ASSERT_TRUE(client_->wait_until_active(table2, 30000ms).ok());
  DynamoDbLeaseStore store2(client_, config(table2));
  EXPECT_EQ(store2.create_table_if_not_exists().code(), StatusCode::kFailedPrecondition);
}

TEST_F(DynamoDbLeaseStoreTest, SameSemanticsAsTheInMemoryStore) {
  auto store = ready_store();
  testing::check_lease_store_contract(*store);
}

TEST_F(DynamoDbLeaseStoreTest, HandoffsAsTheInMemoryStoreAndInTheJavaKcl3Attributes) {
  auto store = ready_store();
  testing::check_lease_store_handoff_contract(*store);
  // On the wire: leaseOwner and checkpointOwner as the Java KCL 3.x writes them.
  Lease fresh;
  fresh.lease_key = "shardId-000000000009";
  ASSERT_TRUE(store->create_lease_if_not_exists(fresh).ok());
  auto held = store->take_lease(fresh, "old");
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(store->initiate_handoff(*held, "new").ok());
  auto item = client_->get_item(store->table_name(), lease_key_item(fresh.lease_key));
  ASSERT_TRUE(item.ok() && item->has_value());
  EXPECT_EQ((**item).at("leaseOwner").s(), "new");
  EXPECT_EQ((**item).at("checkpointOwner").s(), "old");
}

TEST_F(DynamoDbLeaseStoreTest, CoordinationTableAsTheInMemoryOne) {
  LeaseConfig c = config(kcl::testing::unique_name("coord"));
  tables_.push_back(c.effective_coordinator_table_name());
  assignment::DynamoDbCoordinationStore store(client_, c);
  ASSERT_TRUE(store.create_table_if_not_exists().ok());
  EXPECT_EQ(store.table_name(), c.application_name + "-CoordinatorState");
  testing::check_coordination_store_contract(store);
}

TEST_F(DynamoDbLeaseStoreTest, LoadsItemsWrittenInTheJavaKclFormat) {
  auto store = ready_store();
  // Written by hand exactly as the Java KCL 2.x writes them.
  const char* java_items[] = {
      R"({"leaseKey": {"S": "shardId-000000000002"},
          "leaseOwner": {"S": "java-worker-1"},
          "leaseCounter": {"N": "77"},
          "ownerSwitchesSinceCheckpoint": {"N": "1"},
          "checkpoint": {"S": "49590338271490256608559692538361571095921575989136588898"},
          "checkpointSubSequenceNumber": {"N": "5"},
          "parentShardId": {"SS": ["shardId-000000000000", "shardId-000000000001"]},
          "startingHashKey": {"S": "0"},
          "endingHashKey": {"S": "340282366920938463463374607431768211455"}})",
      R"({"leaseKey": {"S": "shardId-000000000000"},
          "leaseCounter": {"N": "12"},
          "ownerSwitchesSinceCheckpoint": {"N": "0"},
          "checkpoint": {"S": "SHARD_END"},
          "checkpointSubSequenceNumber": {"N": "0"},
          "childShardIds": {"SS": ["shardId-000000000002"]}})",
      R"({"leaseKey": {"S": "shardId-000000000003"},
          "leaseCounter": {"N": "0"},
          "ownerSwitchesSinceCheckpoint": {"N": "0"},
          "checkpoint": {"S": "TRIM_HORIZON"},
          "checkpointSubSequenceNumber": {"N": "0"},
          "pendingCheckpoint": {"S": "49590338271490256608559692538361571095921575989136589999"},
          "pendingCheckpointSubSequenceNumber": {"N": "0"},
          "pendingCheckpointState": {"B": "AAEC"}})",
  };
  for (const char* text : java_items) {
    auto item = dynamodb::item_from_json(nlohmann::json::parse(text));
    ASSERT_TRUE(item.ok()) << item.status();
    ASSERT_TRUE(client_->put_item(store->table_name(), *item).ok());
  }
  auto leases = store->list_leases();
  ASSERT_TRUE(leases.ok()) << leases.status();
  ASSERT_EQ(leases->size(), 3u);
  std::map<std::string, Lease> by_key;
  for (const auto& l : *leases) by_key[l.lease_key] = l;
  const Lease& child = by_key.at("shardId-000000000002");
  EXPECT_EQ(child.lease_owner, "java-worker-1");
  EXPECT_EQ(child.lease_counter, 77);
  EXPECT_EQ(child.checkpoint,
            ExtendedSequenceNumber("49590338271490256608559692538361571095921575989136588898", 5));
  EXPECT_EQ(child.parent_shard_ids.size(), 2u);
  EXPECT_TRUE(by_key.at("shardId-000000000000").checkpoint.is_shard_end());
  EXPECT_EQ(by_key.at("shardId-000000000000").child_shard_ids,
            std::vector<std::string>{"shardId-000000000002"});
  EXPECT_EQ(by_key.at("shardId-000000000003").pending_checkpoint_state, std::string("\0\1\2", 3));

  // A kcl-cpp worker takes the Java worker's lease once it is expired (here: take directly)
  // and checkpoints; the item keeps the Java names and types, plus nothing else.
  auto taken = store->take_lease(child, "cpp-worker");
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->owner_switches_since_checkpoint, 2);
  CheckpointFields f;
  f.checkpoint =
      ExtendedSequenceNumber("49590338271490256608559692538361571095921575989136599999", 2);
  ASSERT_TRUE(store->update_checkpoint(*taken, f).ok());
  auto raw = client_->get_item(store->table_name(), lease_key_item("shardId-000000000002"));
  ASSERT_TRUE(raw.ok() && raw->has_value());
  using T = AttributeValue::Type;
  std::map<std::string, T> types;
  for (const auto& [name, value] : **raw) types[name] = value.type();
  EXPECT_EQ(types, (std::map<std::string, T>{{"leaseKey", T::kS},
                                             {"leaseOwner", T::kS},
                                             {"leaseCounter", T::kN},
                                             {"ownerSwitchesSinceCheckpoint", T::kN},
                                             {"checkpoint", T::kS},
                                             {"checkpointSubSequenceNumber", T::kN},
                                             {"parentShardId", T::kSS},
                                             {"startingHashKey", T::kS},
                                             {"endingHashKey", T::kS}}));
  EXPECT_EQ((**raw).at("leaseCounter").s(), "79");
  EXPECT_EQ((**raw).at("checkpointSubSequenceNumber").s(), "2");
  EXPECT_EQ((**raw).at("ownerSwitchesSinceCheckpoint").s(), "0");
}

TEST_F(DynamoDbLeaseStoreTest, CoordinatorsAndCheckpointerOnARealTable) {
  auto store = ready_store();
  for (int i = 0; i < 4; ++i) {
    Lease l;
    l.lease_key = testing::shard(i);
    ASSERT_TRUE(store->create_lease_if_not_exists(l).ok());
  }
  ManualClock clock;
  LeaseConfig ca = testing::test_config("A");
  LeaseConfig cb = testing::test_config("B");
  testing::TakesWorker a(*store, ca, clock, NoopMetricsSink::instance(), 1);
  testing::TakesWorker b(*store, cb, clock, NoopMetricsSink::instance(), 2);
  ASSERT_EQ(a.run_take_pass().taken.size(), 4u);
  auto cp = checkpoint::ShardCheckpointer::create(a.held(), testing::shard(0));
  ASSERT_TRUE(cp.ok());
  (*cp)->records_delivered(ExtendedSequenceNumber("1000"));
  ASSERT_TRUE((*cp)->checkpoint().ok());

  // B steals one, sees the rest expire after A stops renewing, and A's checkpoint is fenced.
  assignment::TakePassResult first = b.run_take_pass();
  EXPECT_EQ(first.stolen.size(), 1u);
  clock.advance(5s);
  ASSERT_EQ(b.run_renew_pass().renewed, 1);
  clock.advance(5s);
  assignment::TakePassResult second = b.run_take_pass();
  EXPECT_EQ(second.taken.size() + first.stolen.size(), 4u);
  (*cp)->records_delivered(ExtendedSequenceNumber("2000"));
  EXPECT_EQ((*cp)->checkpoint().code(), StatusCode::kLeaseLost);
  auto l0 = store->get_lease(testing::shard(0));
  ASSERT_TRUE(l0.ok() && l0->has_value());
  EXPECT_EQ((*l0)->lease_owner, "B");
  EXPECT_EQ((*l0)->checkpoint, ExtendedSequenceNumber("1000"));

  // B hands everything back.
  ASSERT_TRUE(b.release_all().ok());
  auto all = store->list_leases();
  ASSERT_TRUE(all.ok());
  for (const auto& l : *all) EXPECT_FALSE(l.lease_owner) << l.lease_key;
}

}  // namespace
}  // namespace kcl::leases
