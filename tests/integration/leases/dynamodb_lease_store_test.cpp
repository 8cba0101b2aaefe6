// DynamoDbLeaseStore against dynalite: table creation and schema checks, the LeaseStore
// contract (same results as the in-memory store), the Java KCL item format on the wire, and
// coordinators sharing a real table.
#include "leases/dynamodb_lease_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aws/aws_json_client.h"
#include "aws/credentials.h"
#include "aws/http_transport.h"
#include "checkpoint/shard_checkpointer.h"
#include "coordination/dynamodb_coordination_store.h"
#include "leases/lease_serializer.h"
#include "support/captured_log.h"
#include "support/coordination_store_contract.h"
#include "support/emulators.h"
#include "support/lease_store_contract.h"
#include "support/lease_test_util.h"
#include "support/local_http_server.h"

namespace kcl::leases {
namespace {

using namespace ::kcl::coordination;
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

// Three leases for worker-a, one for worker-b, one free, in `store`.
void add_owned_leases(DynamoDbLeaseStore& store) {
  const std::vector<std::pair<std::string, std::optional<std::string>>> owners = {
      {"shardId-000000000003", "worker-a"},
      {"shardId-000000000001", "worker-a"},
      {"shardId-000000000002", "worker-b"},
      {"shardId-000000000004", std::nullopt},
      {"shardId-000000000000", "worker-a"}};
  for (const auto& [key, owner] : owners) {
    Lease l;
    l.lease_key = key;
    ASSERT_TRUE(store.create_lease_if_not_exists(l).ok());
    if (owner) {
      ASSERT_TRUE(store.take_lease(store.get_lease(key)->value(), *owner).ok());
    }
  }
}

// A table kcl-cpp creates carries the Java KCL 3.x's LeaseOwnerToLeaseKeyIndex (hash
// leaseOwner, range leaseKey, keys only), and a worker finds its leases with a Query of it.
TEST_F(DynamoDbLeaseStoreTest, ANewTableHasTheOwnerIndexAndAWorkerQueriesItsLeases) {
  std::string table = kcl::testing::unique_name("leases-gsi");
  DynamoDbLeaseStore store(client_, config(table));
  ASSERT_TRUE(store.create_table_if_not_exists().ok());
  EXPECT_TRUE(store.has_owner_index());
  auto d = client_->describe_table(table);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->global_secondary_indexes.size(), 1u);
  const dynamodb::GlobalSecondaryIndex& index = d->global_secondary_indexes[0];
  EXPECT_EQ(index.index_name, "LeaseOwnerToLeaseKeyIndex");
  ASSERT_EQ(index.key_schema.size(), 2u);
  EXPECT_EQ(index.key_schema[0].attribute_name, "leaseOwner");
  EXPECT_EQ(index.key_schema[0].key_type, "HASH");
  EXPECT_EQ(index.key_schema[1].attribute_name, "leaseKey");
  EXPECT_EQ(index.key_schema[1].key_type, "RANGE");
  ASSERT_NO_FATAL_FAILURE(add_owned_leases(store));
  auto owned = store.owned_lease_keys("worker-a");
  ASSERT_TRUE(owned.ok()) << owned.status();
  EXPECT_EQ(*owned, (std::vector<std::string>{"shardId-000000000000", "shardId-000000000001",
                                              "shardId-000000000003"}));
  EXPECT_EQ(store.owned_lease_keys("worker-b").value(),
            std::vector<std::string>{"shardId-000000000002"});
  EXPECT_TRUE(store.owned_lease_keys("nobody").value().empty());
  // A lease handed back leaves the index.
  auto l1 = store.get_lease("shardId-000000000001");
  ASSERT_TRUE(l1.ok() && l1->has_value());
  ASSERT_TRUE(store.evict_lease(**l1).ok());
  EXPECT_EQ(store.owned_lease_keys("worker-a").value(),
            (std::vector<std::string>{"shardId-000000000000", "shardId-000000000003"}));
}

// A table without the index (as the Java KCL 2.x made them) is used as it is, never given an
// index: a worker finds its leases with a filtered scan instead (dynalite cannot add an
// index to a table; DynamoDB could, but kcl-cpp changes no table it did not create).
TEST_F(DynamoDbLeaseStoreTest, ATableWithoutTheOwnerIndexIsScannedAndLeftAsItIs) {
  std::string table = kcl::testing::unique_name("leases-2x");
  tables_.push_back(table);
  dynamodb::CreateTableRequest req;
  req.table_name = table;
  req.key_schema = {{"leaseKey", "HASH"}};
  req.attribute_definitions = {{"leaseKey", "S"}};
  ASSERT_TRUE(client_->create_table(req).ok());
  ASSERT_TRUE(client_->wait_until_active(table, 30000ms).ok());
  DynamoDbLeaseStore store(client_, config(table));
  ASSERT_TRUE(store.create_table_if_not_exists().ok());
  EXPECT_FALSE(store.has_owner_index());
  ASSERT_NO_FATAL_FAILURE(add_owned_leases(store));
  auto owned = store.owned_lease_keys("worker-a");
  ASSERT_TRUE(owned.ok()) << owned.status();
  EXPECT_EQ(*owned, (std::vector<std::string>{"shardId-000000000000", "shardId-000000000001",
                                              "shardId-000000000003"}));
  auto d = client_->describe_table(table);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->global_secondary_indexes.empty()) << "the table was changed";
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
  coordination::DynamoDbCoordinationStore store(client_, c);
  ASSERT_TRUE(store.create_table_if_not_exists().ok());
  EXPECT_EQ(store.table_name(), c.application_name + "-CoordinatorState");
  coordination::testing::check_coordination_store_contract(store);
}

// An entry whose load figures are in the earlier form (leaseKbps, a map) is read; the next
// heartbeat writes them as leaseLoad (one short string, so 50 leases' figures and the rest of
// the entry stay within one write unit) and removes the map.
TEST_F(DynamoDbLeaseStoreTest, CoordinationEntryLoadFiguresMoveToTheShortForm) {
  LeaseConfig c = config(kcl::testing::unique_name("coordload"));
  tables_.push_back(c.effective_coordinator_table_name());
  coordination::DynamoDbCoordinationStore store(client_, c);
  ASSERT_TRUE(store.create_table_if_not_exists().ok());
  auto old_form = dynamodb::item_from_json(nlohmann::json::parse(R"({
      "key": {"S": "kcl-cpp/worker/w1"}, "workerId": {"S": "w1"}, "incarnation": {"S": "i1"},
      "heartbeat": {"N": "4"}, "leaseCount": {"N": "2"},
      "leaseKbps": {"M": {"shardId-000000000001": {"N": "12.5"},
                          "shardId-000000000002": {"N": "0.0"}}}})"));
  ASSERT_TRUE(old_form.ok()) << old_form.status();
  ASSERT_TRUE(client_->put_item(store.table_name(), *old_form).ok());
  auto all = store.read_all(coordination::Consistency::kStrong);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->workers.size(), 1u);
  const std::map<std::string, double> before = {{"shardId-000000000001", 12.5},
                                                {"shardId-000000000002", 0.0}};
  EXPECT_EQ(all->workers[0].lease_kbps, before);

  coordination::WorkerEntry report;
  report.lease_count = 50;
  for (int i = 0; i < 50; ++i) report.lease_kbps[testing::shard(1000 + i)] = 123.4;
  auto beat = store.heartbeat(all->workers[0], report);
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_EQ(beat->lease_kbps, report.lease_kbps);
  auto raw = client_->get_item(store.table_name(), [] {
    Item k;
    k.emplace("key", AttributeValue::S("kcl-cpp/worker/w1"));
    return k;
  }());
  ASSERT_TRUE(raw.ok() && raw->has_value()) << raw.status();
  EXPECT_FALSE((**raw).count("leaseKbps"));
  ASSERT_TRUE((**raw).count("leaseLoad"));
  EXPECT_LT((**raw).at("leaseLoad").s().size(), 700u) << "50 leases' figures";
}

// One worker entry the leader cannot read (written by hand, or by another version) does not
// stop the fleet's leader: an entry whose identity is unreadable is skipped, one whose other
// attributes are is read with them at their defaults; each logged once per series.
TEST_F(DynamoDbLeaseStoreTest, AnUnreadableWorkerEntryIsSkippedNotTheWholeRead) {
  LeaseConfig c = config(kcl::testing::unique_name("coordbad"));
  tables_.push_back(c.effective_coordinator_table_name());
  kcl::testing::CapturedLog log;
  coordination::DynamoDbCoordinationStore store(client_, c, {}, &log);
  ASSERT_TRUE(store.create_table_if_not_exists().ok());
  for (const char* item : {
           R"({"key": {"S": "kcl-cpp/worker/good"}, "workerId": {"S": "good"},
               "incarnation": {"S": "i1"}, "heartbeat": {"N": "4"}, "leaseCount": {"N": "2"}})",
           R"({"key": {"S": "kcl-cpp/worker/newer"}, "workerId": {"S": "newer"},
               "incarnation": {"S": "i2"}, "heartbeat": {"N": "7"}, "leaseCount": {"N": "1"},
               "draining": {"N": "1"}, "leaseLoad": {"M": {}}})",
           R"({"key": {"S": "kcl-cpp/worker/broken"}, "workerId": {"S": "broken"},
               "incarnation": {"S": "i3"}, "heartbeat": {"S": "soon"}})"}) {
    auto parsed = dynamodb::item_from_json(nlohmann::json::parse(item));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    ASSERT_TRUE(client_->put_item(store.table_name(), *parsed).ok());
  }
  for (int read = 0; read < 2; ++read) {
    auto all = store.read_all(coordination::Consistency::kStrong);
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_EQ(all->workers.size(), 2u);
    EXPECT_EQ(all->workers[0].worker_id, "good");
    EXPECT_EQ(all->workers[0].lease_count, 2);
    EXPECT_EQ(all->workers[1].worker_id, "newer");
    EXPECT_EQ(all->workers[1].heartbeat, 7);
    EXPECT_FALSE(all->workers[1].draining);
    EXPECT_TRUE(all->workers[1].lease_kbps.empty());
  }
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 1u) << "the second read with the same entries logs nothing";
  EXPECT_NE(lines[0].find("3 items are not a readable worker entry"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("kcl-cpp/worker/broken"), std::string::npos) << lines[0];
}

// A lease renewal (worker-takes) has a deadline of half the renew interval and one attempt: a
// DynamoDB connection that stalls costs that renewal, not every lease held while the call
// waits out the request timeout (30 s) and its retries.
TEST(DynamoDbLeaseStoreRenewTest, ARenewalThatStallsEndsAtItsDeadline) {
  kcl::testing::LocalHttpServer stalled([](const kcl::testing::ServedRequest&) {
    kcl::testing::CannedResponse r;
    r.delay = std::chrono::minutes(2);  // ends early when the server stops
    return r;
  });
  AwsConfig config;
  config.region = "us-east-1";
  config.dynamodb_endpoint_url = stalled.url();
  config.credentials = StaticCredentials{"AKIDEXAMPLE", "secret", ""};
  auto raw = aws::make_aws_json_client(aws::dynamodb_service(), config,
                                       aws::make_curl_transport(config.http),
                                       aws::make_static_provider(*config.credentials));
  auto client = std::make_shared<dynamodb::DynamoDbClient>(std::move(raw));
  LeaseConfig lc;
  lc.application_name = "stalled";
  lc.assignment = LeaseAssignment::kWorkerTakes;
  lc.failover_time = 1500ms;  // renew interval 500 ms: each renewal's deadline 250 ms
  DynamoDbLeaseStore store(client, lc);
  Lease held;
  held.lease_key = "shardId-000000000000";
  held.lease_owner = "w1";
  held.lease_counter = 4;
  const auto start = std::chrono::steady_clock::now();
  auto renewed = store.renew_lease(held);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(renewed.ok());
  EXPECT_LT(took, 5s) << "the renewal waited "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                      << " ms: " << renewed.status();
  EXPECT_EQ(stalled.requests().size(), 1u) << "one attempt";
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

// A lease table in the Java KCL 3.5 single-table layout: the leader lock, migration state,
// worker metrics and a stream entry live beside the leases, each with its entityType. Only
// leases are listed; the others are counted, never read as leases, never written; the
// table is known to use entityType, so a lease kcl-cpp creates carries "LEASE"; writes to a
// lease keep the attributes kcl-cpp does not know (throughputKBps, entityType); and one
// unreadable lease is skipped and reported once, not failing the scan.
TEST_F(DynamoDbLeaseStoreTest, TheJava35SingleTableLayoutIsReadAndItsOtherItemsLeftAlone) {
  const std::string table = kcl::testing::unique_name("leases35");
  auto logger = std::make_shared<kcl::testing::CapturedLog>();
  DynamoDbLeaseStoreOptions options = DynamoDbLeaseStoreOptions::from_config(config(table));
  options.logger = logger;
  DynamoDbLeaseStore store(client_, options);
  ASSERT_TRUE(store.create_table_if_not_exists().ok());
  auto fresh = store.uses_entity_types();
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_FALSE(*fresh);

  const char* others[] = {
      R"({"leaseKey": {"S": "Leader"}, "entityType": {"S": "LEADER"}, "ownerName": {"S": "java-1"},
          "leaseDuration": {"S": "120000"}, "recordVersionNumber": {"S": "5b1c1b0e"}})",
      R"({"leaseKey": {"S": "Migration3.0"}, "entityType": {"S": "CLIENT_VERSION_MIGRATION"},
          "cv": {"S": "CLIENT_VERSION_3X"}, "mb": {"S": "java-1"}, "mts": {"N": "1764000000000"},
          "h": {"L": [{"M": {"cv": {"S": "CLIENT_VERSION_3X"}, "mb": {"S": "java-1"},
                             "mts": {"N": "1764000000000"}}}]}})",
      R"({"leaseKey": {"S": "java-1"}, "entityType": {"S": "WORKER_METRIC_STATS"},
          "lut": {"N": "1764000000"}, "sts": {"M": {"C": {"L": [{"N": "12.5"}, {"N": "-1"}]}}},
          "opr": {"M": {"C": {"L": [{"N": "100"}]}}}, "sup": {"N": "1"}, "slu": {"N": "1764000000"}})",
      R"({"leaseKey": {"S": "123456789012:orders:1700000000"}, "entityType": {"S": "STREAM"},
          "streamId": {"S": "123456789012:orders:1700000000"}})",
  };
  std::vector<Item> written_others;
  for (const char* text : others) {
    auto item = dynamodb::item_from_json(nlohmann::json::parse(text));
    ASSERT_TRUE(item.ok()) << item.status();
    ASSERT_TRUE(client_->put_item(table, *item).ok());
    written_others.push_back(*item);
  }
  auto lease_item = dynamodb::item_from_json(nlohmann::json::parse(
      R"({"leaseKey": {"S": "shardId-000000000000"}, "entityType": {"S": "LEASE"},
          "leaseOwner": {"S": "java-1"}, "leaseCounter": {"N": "40"},
          "ownerSwitchesSinceCheckpoint": {"N": "0"}, "checkpoint": {"S": "TRIM_HORIZON"},
          "checkpointSubSequenceNumber": {"N": "0"}, "throughputKBps": {"N": "1.25E-1"}})"));
  ASSERT_TRUE(lease_item.ok());
  ASSERT_TRUE(client_->put_item(table, *lease_item).ok());
  auto broken = dynamodb::item_from_json(nlohmann::json::parse(
      R"({"leaseKey": {"S": "shardId-000000000001"}, "checkpoint": {"S": "TRIM_HORIZON"}})"));
  ASSERT_TRUE(broken.ok());
  ASSERT_TRUE(client_->put_item(table, *broken).ok());

  for (int scan = 0; scan < 4; ++scan) {
    auto leases = store.list_leases();
    ASSERT_TRUE(leases.ok()) << leases.status();
    ASSERT_EQ(leases->size(), 1u);
    EXPECT_EQ(leases->front().lease_key, "shardId-000000000000");
  }
  const LeaseScanSummary summary = store.last_scan();
  EXPECT_EQ(summary.other_entities, (std::map<std::string, int>{{"CLIENT_VERSION_MIGRATION", 1},
                                                                {"LEADER", 1},
                                                                {"STREAM", 1},
                                                                {"WORKER_METRIC_STATS", 1}}));
  ASSERT_EQ(summary.unreadable.size(), 1u);
  EXPECT_NE(summary.unreadable[0].find("shardId-000000000001: attribute leaseCounter is missing"),
            std::string::npos)
      << summary.unreadable[0];
  // Four scans found it: reported at the 1st and the 3rd only, with the count.
  const auto lines = logger->lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("1 item is not a readable lease"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("3 reads in a row"), std::string::npos) << lines[1];

  auto leader = store.get_lease("Leader");
  ASSERT_TRUE(leader.ok()) << leader.status();
  EXPECT_FALSE(leader->has_value()) << "the leader lock read as a lease";
  auto tagged = store.uses_entity_types();
  ASSERT_TRUE(tagged.ok() && *tagged);

  // A new lease carries entityType LEASE; writes to the Java lease keep what kcl-cpp does
  // not know.
  Lease created;
  created.lease_key = "shardId-000000000002";
  created.checkpoint = ExtendedSequenceNumber::trim_horizon();
  ASSERT_TRUE(store.create_lease_if_not_exists(created).ok());
  auto made = client_->get_item(table, lease_key_item("shardId-000000000002"));
  ASSERT_TRUE(made.ok() && made->has_value());
  EXPECT_EQ((**made).at("entityType"), AttributeValue::S("LEASE"));
  auto java = store.get_lease("shardId-000000000000");
  ASSERT_TRUE(java.ok() && java->has_value());
  auto taken = store.take_lease(**java, "cpp-1");
  ASSERT_TRUE(taken.ok()) << taken.status();
  CheckpointFields f;
  f.checkpoint = ExtendedSequenceNumber("49590338271490256608559692538361571095921575989136599999");
  auto checkpointed = store.update_checkpoint(*taken, f);
  ASSERT_TRUE(checkpointed.ok()) << checkpointed.status();
  ASSERT_TRUE(store.evict_lease(*checkpointed).ok());
  auto after = client_->get_item(table, lease_key_item("shardId-000000000000"));
  ASSERT_TRUE(after.ok() && after->has_value());
  EXPECT_EQ((**after).at("entityType"), AttributeValue::S("LEASE"));
  EXPECT_EQ((**after).at("throughputKBps"), AttributeValue::N("0.125"));  // as stored: 1.25E-1
  EXPECT_EQ((**after).count("leaseOwner"), 0u);
  EXPECT_EQ((**after).count("checkpointOwner"), 0u);

  // Every other item as written, attribute for attribute.
  for (const Item& want : written_others) {
    auto now = client_->get_item(table, lease_key_item(want.at("leaseKey").s()));
    ASSERT_TRUE(now.ok() && now->has_value());
    EXPECT_EQ(**now, want) << want.at("leaseKey").s();
  }
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
