// DynamoDbClient against dynalite: the operations the lease table needs, end to end through
// the real AWS JSON client (SigV4, curl, error mapping).
#include "dynamodb/dynamodb_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "aws/aws_json_client.h"
#include "aws/credentials.h"
#include "aws/http_transport.h"
#include "support/aws_clients.h"
#include "support/emulators.h"

namespace kcl::dynamodb {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kActiveDeadline{30000};

AttributeValue S(std::string s) { return AttributeValue::S(std::move(s)); }
AttributeValue N(long long n) { return AttributeValue::N(n); }

class DynamoDbIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& emulators = kcl::testing::shared_emulators();
    endpoint_ = emulators.dynamodb_url();
    ASSERT_FALSE(endpoint_.empty());
    AwsConfig config = emulators.aws_config();
    ASSERT_TRUE(config.credentials.has_value());
    client_ = kcl::testing::dynamodb_client(config);
    ASSERT_TRUE(client_);
  }

  void TearDown() override {
    for (const auto& t : tables_) (void)client_->delete_table(t);
  }

  // A fresh ACTIVE table with hash key leaseKey (S), as the lease table has.
  std::string make_table(std::string_view prefix = "ddb") {
    std::string name = kcl::testing::unique_name(prefix);
    CreateTableRequest req;
    req.table_name = name;
    req.key_schema = {{"leaseKey", "HASH"}};
    req.attribute_definitions = {{"leaseKey", "S"}};
    Status s = client_->create_table(req);
    EXPECT_TRUE(s.ok()) << s;
    tables_.push_back(name);
    auto active = client_->wait_until_active(name, kActiveDeadline);
    EXPECT_TRUE(active.ok()) << active.status();
    return name;
  }

  static Item key_of(const std::string& k) { return Item{{"leaseKey", S(k)}}; }

  std::optional<Item> get(const std::string& table, const std::string& key) {
    auto r = client_->get_item(table, key_of(key));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::nullopt;
  }

  std::string endpoint_;
  std::shared_ptr<DynamoDbClient> client_;
  std::vector<std::string> tables_;
};

TEST_F(DynamoDbIntegrationTest, CreateTableWaitsActiveAndDescribesKeySchema) {
  std::string table = make_table("lease");
  auto d = client_->describe_table(table);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->table_name, table);
  EXPECT_EQ(d->table_status, "ACTIVE");
  ASSERT_EQ(d->key_schema.size(), 1u);
  EXPECT_EQ(d->key_schema[0].attribute_name, "leaseKey");
  EXPECT_EQ(d->key_schema[0].key_type, "HASH");
  ASSERT_EQ(d->attribute_definitions.size(), 1u);
  EXPECT_EQ(d->attribute_definitions[0].attribute_name, "leaseKey");
  EXPECT_EQ(d->attribute_definitions[0].attribute_type, "S");
  EXPECT_EQ(d->billing_mode, "PAY_PER_REQUEST");
  EXPECT_EQ(d->item_count, 0);
}

TEST_F(DynamoDbIntegrationTest, ProvisionedTableWithRangeKey) {
  std::string name = kcl::testing::unique_name("prov");
  CreateTableRequest req;
  req.table_name = name;
  req.key_schema = {{"h", "HASH"}, {"r", "RANGE"}};
  req.attribute_definitions = {{"h", "S"}, {"r", "N"}};
  req.billing_mode = "PROVISIONED";
  req.read_capacity_units = 2;
  req.write_capacity_units = 3;
  ASSERT_TRUE(client_->create_table(req).ok());
  tables_.push_back(name);
  auto d = client_->wait_until_active(name, kActiveDeadline);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->key_schema.size(), 2u);
  EXPECT_EQ(d->key_schema[0].attribute_name, "h");
  EXPECT_EQ(d->key_schema[0].key_type, "HASH");
  EXPECT_EQ(d->key_schema[1].attribute_name, "r");
  EXPECT_EQ(d->key_schema[1].key_type, "RANGE");
  EXPECT_EQ(d->billing_mode, "PROVISIONED");
}

TEST_F(DynamoDbIntegrationTest, CreatingAnExistingTableIsAlreadyExists) {
  std::string table = make_table();
  CreateTableRequest req;
  req.table_name = table;
  req.key_schema = {{"leaseKey", "HASH"}};
  req.attribute_definitions = {{"leaseKey", "S"}};
  Status s = client_->create_table(req);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s;
}

TEST_F(DynamoDbIntegrationTest, PutGetRoundTripsEveryAttributeType) {
  std::string table = make_table();
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  Item item{
      {"leaseKey", S("shardId-000000000001")},
      {"leaseCounter", N(42)},
      {"checkpointSubSequenceNumber", AttributeValue::N("12345678901234567890")},
      {"fraction", AttributeValue::N("-1.50")},  // dynalite normalizes to -1.5: still equal
      {"pendingCheckpointState", AttributeValue::B(bytes)},
      {"parentShardId", AttributeValue::SS({"shardId-000000000000", "shardId-000000000002"})},
      {"numbers", AttributeValue::NS({"1", "2.5", "-3"})},
      {"blobs", AttributeValue::BS({std::string("\0\1", 2), "xyz"})},
      {"flag", AttributeValue::Bool(true)},
      {"off", AttributeValue::Bool(false)},
      {"nothing", AttributeValue::Null()},
      {"text", S("ünïcødé ✓ \"quoted\"")},
      {"map",
       AttributeValue::M({{"inner", S("v")},
                          {"list", AttributeValue::L({N(1), S("two"), AttributeValue::Null()})}})},
      {"list", AttributeValue::L({AttributeValue::M({{"a", N(1)}}), AttributeValue::L({}),
                                  AttributeValue::Bool(true)})},
  };
  auto put = client_->put_item(table, item);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_FALSE(put->attributes.has_value());

  auto got = get(table, "shardId-000000000001");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->size(), item.size());
  for (const auto& [name, value] : item) {
    auto it = got->find(name);
    ASSERT_NE(it, got->end()) << name;
    EXPECT_EQ(it->second, value) << name;
  }
  EXPECT_EQ(got->at("pendingCheckpointState").s(), bytes);

  auto eventual = client_->get_item(table, key_of("shardId-000000000001"), false);
  ASSERT_TRUE(eventual.ok()) << eventual.status();
  EXPECT_TRUE(eventual->has_value());
}

TEST_F(DynamoDbIntegrationTest, MissingItemIsAnEmptyOptional) {
  std::string table = make_table();
  auto r = client_->get_item(table, key_of("nobody"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_value());
}

TEST_F(DynamoDbIntegrationTest, ConditionalPutAttributeNotExists) {
  std::string table = make_table();
  Expression absent{"attribute_not_exists(leaseKey)", {}, {}};
  Item first{{"leaseKey", S("shard-1")}, {"leaseOwner", S("worker-a")}};
  auto ok = client_->put_item(table, first, absent);
  ASSERT_TRUE(ok.ok()) << ok.status();

  Item second{{"leaseKey", S("shard-1")}, {"leaseOwner", S("worker-b")}};
  auto lost = client_->put_item(table, second, absent);
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), StatusCode::kConditionFailed) << lost.status();
  EXPECT_FALSE(lost.status().retryable());
  ASSERT_TRUE(lost.status().aws().has_value());
  EXPECT_NE(lost.status().aws()->error_type.find("ConditionalCheckFailedException"),
            std::string::npos);
  EXPECT_EQ(lost.status().aws()->http_status, 400);

  auto got = get(table, "shard-1");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->at("leaseOwner"), S("worker-a"));

  // Unconditional put with ALL_OLD returns what it replaced.
  auto replaced = client_->put_item(table, second, {}, ReturnValues::kAllOld);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  ASSERT_TRUE(replaced->attributes.has_value());
  EXPECT_EQ(replaced->attributes->at("leaseOwner"), S("worker-a"));
}

TEST_F(DynamoDbIntegrationTest, ConditionalCounterUpdate) {
  std::string table = make_table();
  ASSERT_TRUE(
      client_->put_item(table, Item{{"leaseKey", S("shard-1")}, {"leaseCounter", N(0)}}).ok());

  const Expression increment{"SET #c = #c + :one", {{"#c", "leaseCounter"}}, {{":one", N(1)}}};
  auto expect_counter = [](long long v) {
    return Expression{"#c = :expected", {{"#c", "leaseCounter"}}, {{":expected", N(v)}}};
  };

  auto first = client_->update_item(table, key_of("shard-1"), increment, expect_counter(0),
                                    ReturnValues::kAllNew);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->attributes.has_value());
  EXPECT_EQ(first->attributes->at("leaseCounter"), N(1));
  EXPECT_EQ(first->attributes->at("leaseKey"), S("shard-1"));

  // A writer that still believes the counter is 0 loses.
  auto stale = client_->update_item(table, key_of("shard-1"), increment, expect_counter(0));
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), StatusCode::kConditionFailed) << stale.status();

  auto second = client_->update_item(table, key_of("shard-1"), increment, expect_counter(1),
                                     ReturnValues::kUpdatedNew);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(second->attributes.has_value());
  EXPECT_EQ(*second->attributes, (Item{{"leaseCounter", N(2)}}));

  auto got = get(table, "shard-1");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->at("leaseCounter"), N(2));

  // A condition on an item that does not exist fails the same way.
  auto missing = client_->update_item(table, key_of("shard-404"), increment, expect_counter(0));
  EXPECT_EQ(missing.status().code(), StatusCode::kConditionFailed) << missing.status();
}

TEST_F(DynamoDbIntegrationTest, UpdateRemovesAnAttribute) {
  std::string table = make_table();
  ASSERT_TRUE(client_
                  ->put_item(table, Item{{"leaseKey", S("shard-1")},
                                         {"leaseOwner", S("worker-a")},
                                         {"leaseCounter", N(7)}})
                  .ok());
  auto r = client_->update_item(
      table, key_of("shard-1"), Expression{"REMOVE #o", {{"#o", "leaseOwner"}}, {}},
      Expression{"#o = :owner", {{"#o", "leaseOwner"}}, {{":owner", S("worker-a")}}},
      ReturnValues::kUpdatedOld);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->attributes.has_value());
  EXPECT_EQ(r->attributes->at("leaseOwner"), S("worker-a"));

  auto got = get(table, "shard-1");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->count("leaseOwner"), 0u);
  EXPECT_EQ(got->at("leaseCounter"), N(7));

  // Now that there is no owner, attribute_exists fails.
  auto again =
      client_->update_item(table, key_of("shard-1"), Expression{"REMOVE leaseOwner", {}, {}},
                           Expression{"attribute_exists(leaseOwner)", {}, {}});
  EXPECT_EQ(again.status().code(), StatusCode::kConditionFailed) << again.status();
}

TEST_F(DynamoDbIntegrationTest, DeleteWithCondition) {
  std::string table = make_table();
  ASSERT_TRUE(
      client_->put_item(table, Item{{"leaseKey", S("shard-1")}, {"checkpoint", S("SHARD_END")}})
          .ok());
  auto wrong = client_->delete_item(table, key_of("shard-1"),
                                    Expression{"checkpoint = :c", {}, {{":c", S("TRIM_HORIZON")}}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kConditionFailed) << wrong.status();
  EXPECT_TRUE(get(table, "shard-1").has_value());

  auto right = client_->delete_item(table, key_of("shard-1"),
                                    Expression{"checkpoint = :c", {}, {{":c", S("SHARD_END")}}},
                                    ReturnValues::kAllOld);
  ASSERT_TRUE(right.ok()) << right.status();
  ASSERT_TRUE(right->attributes.has_value());
  EXPECT_EQ(right->attributes->at("checkpoint"), S("SHARD_END"));
  EXPECT_FALSE(get(table, "shard-1").has_value());

  // Deleting what is not there is fine without a condition, a condition failure with one.
  EXPECT_TRUE(client_->delete_item(table, key_of("shard-1")).ok());
  auto gone = client_->delete_item(table, key_of("shard-1"),
                                   Expression{"attribute_exists(leaseKey)", {}, {}});
  EXPECT_EQ(gone.status().code(), StatusCode::kConditionFailed) << gone.status();
}

TEST_F(DynamoDbIntegrationTest, ScanPagingReturnsEveryItemExactlyOnce) {
  std::string table = make_table();
  constexpr int kItems = 25;
  std::set<std::string> want;
  for (int i = 0; i < kItems; ++i) {
    std::string key = "shardId-" + std::to_string(1000 + i);
    want.insert(key);
    ASSERT_TRUE(client_->put_item(table, Item{{"leaseKey", S(key)}, {"n", N(i)}}).ok());
  }

  std::multiset<std::string> seen;
  std::optional<Item> start;
  int pages = 0;
  do {
    auto page = client_->scan_page(table, start, 7, /*consistent_read=*/true);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_LE(page->items.size(), 7u);
    for (const auto& item : page->items) seen.insert(item.at("leaseKey").s());
    start = page->last_evaluated_key;
    ASSERT_LT(++pages, 20) << "scan does not end";
  } while (start);
  EXPECT_GE(pages, 4);
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(kItems));
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()), want);

  auto all = client_->scan_all(table, true);
  ASSERT_TRUE(all.ok()) << all.status();
  std::multiset<std::string> all_keys;
  for (const auto& item : *all) all_keys.insert(item.at("leaseKey").s());
  EXPECT_EQ(all_keys, std::multiset<std::string>(want.begin(), want.end()));
}

TEST_F(DynamoDbIntegrationTest, MissingTableIsNotFoundNamingOperationAndEndpoint) {
  const std::string missing = kcl::testing::unique_name("missing");
  auto d = client_->describe_table(missing);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound) << d.status();
  EXPECT_NE(d.status().message().find("DynamoDB.DescribeTable"), std::string::npos) << d.status();
  EXPECT_NE(d.status().message().find(endpoint_), std::string::npos) << d.status();

  auto g = client_->get_item(missing, key_of("k"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kNotFound) << g.status();
  EXPECT_NE(g.status().message().find("DynamoDB.GetItem"), std::string::npos) << g.status();
  EXPECT_NE(g.status().message().find(endpoint_), std::string::npos) << g.status();

  auto p = client_->put_item(missing, key_of("k"));
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound) << p.status();
  EXPECT_NE(p.status().message().find("DynamoDB.PutItem"), std::string::npos) << p.status();

  auto s = client_->scan_page(missing, std::nullopt);
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound) << s.status();

  auto w = client_->wait_until_active(missing, milliseconds(300));
  EXPECT_EQ(w.status().code(), StatusCode::kDeadlineExceeded) << w.status();
  EXPECT_NE(w.status().message().find(missing), std::string::npos) << w.status();
  EXPECT_NE(w.status().message().find("not found"), std::string::npos) << w.status();
}

TEST_F(DynamoDbIntegrationTest, DeleteTableMakesItGo) {
  std::string table = make_table();
  ASSERT_TRUE(client_->delete_table(table).ok());
  // Deletion may take a moment (DELETING); wait for the condition, bounded.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  StatusCode code = StatusCode::kOk;
  while (std::chrono::steady_clock::now() < until) {
    auto d = client_->describe_table(table);
    code = d.ok() ? StatusCode::kOk : d.status().code();
    if (code != StatusCode::kOk) break;
    EXPECT_EQ(d->table_status, "DELETING");
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(code, StatusCode::kNotFound);
  EXPECT_EQ(client_->delete_table(table).code(), StatusCode::kNotFound);
}

TEST_F(DynamoDbIntegrationTest, ValidationErrorsAreInvalidArgument) {
  std::string table = make_table();
  // Wrong key type (N for an S hash key): the service rejects it.
  auto r = client_->get_item(table, Item{{"leaseKey", N(1)}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_FALSE(r.status().retryable());
}

}  // namespace
}  // namespace kcl::dynamodb
