// DynamoDbClient against a scripted AwsJsonClient: the requests it builds, the responses it
// accepts and rejects, and how it reports failures.
#include "dynamodb/dynamodb_client.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "coordination/dynamodb_coordination_store.h"
#include "leases/dynamodb_lease_store.h"

namespace kcl::dynamodb {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr const char* kEndpoint = "http://127.0.0.1:4567";

class ScriptedAwsClient : public aws::AwsJsonClient {
 public:
  struct Call {
    std::string operation;
    json body;
  };

  Result<std::string> call(std::string_view operation, std::string json_body,
                           const aws::CallOptions& /*options*/) override {
    calls.push_back({std::string(operation), json::parse(json_body)});
    if (responses.empty()) return Status(StatusCode::kInternal, "test: no scripted response");
    auto r = std::move(responses.front());
    responses.pop_front();
    return r;
  }
  const std::string& endpoint() const override { return endpoint_; }
  const std::string& region() const override { return region_; }

  void respond(json body) { responses.emplace_back(body.dump()); }
  void respond_text(std::string body) { responses.emplace_back(std::move(body)); }
  void fail(StatusCode code, std::string message, std::string error_type, int http = 400) {
    AwsErrorDetails d;
    d.operation = "DynamoDB.?";
    d.endpoint = endpoint_;
    d.http_status = http;
    d.error_type = std::move(error_type);
    d.attempts = 1;
    responses.emplace_back(Status(code, std::move(message), std::move(d)));
  }

  std::vector<Call> calls;
  std::deque<Result<std::string>> responses;

 private:
  std::string endpoint_ = kEndpoint;
  std::string region_ = "us-east-1";
};

class DynamoDbClientTest : public ::testing::Test {
 protected:
  DynamoDbClientTest()
      : fake_(std::make_shared<ScriptedAwsClient>()),
        client_(fake_, clock_, [this](milliseconds d) {
          sleeps_.push_back(d);
          clock_.advance(d);
        }) {}

  const json& last_body() const { return fake_->calls.back().body; }

  ManualClock clock_;
  std::vector<milliseconds> sleeps_;
  std::shared_ptr<ScriptedAwsClient> fake_;
  DynamoDbClient client_;
};

Item key_of(const std::string& k) { return Item{{"leaseKey", AttributeValue::S(k)}}; }

json table_json(const std::string& status) {
  return json{{"Table",
               {{"TableName", "leases"},
                {"TableStatus", status},
                {"KeySchema", {{{"AttributeName", "leaseKey"}, {"KeyType", "HASH"}}}},
                {"AttributeDefinitions", {{{"AttributeName", "leaseKey"}, {"AttributeType", "S"}}}},
                {"BillingModeSummary", {{"BillingMode", "PAY_PER_REQUEST"}}},
                {"ItemCount", 12}}}};
}

// --- tables ---

TEST_F(DynamoDbClientTest, CreateTableDefaultsToPayPerRequest) {
  fake_->respond(json{{"TableDescription", {{"TableName", "leases"}}}});
  CreateTableRequest req;
  req.table_name = "leases";
  req.key_schema = {{"leaseKey", "HASH"}};
  req.attribute_definitions = {{"leaseKey", "S"}};
  ASSERT_TRUE(client_.create_table(req).ok());
  ASSERT_EQ(fake_->calls.size(), 1u);
  EXPECT_EQ(fake_->calls[0].operation, "CreateTable");
  EXPECT_EQ(
      last_body(),
      (json{{"TableName", "leases"},
            {"KeySchema", {{{"AttributeName", "leaseKey"}, {"KeyType", "HASH"}}}},
            {"AttributeDefinitions", {{{"AttributeName", "leaseKey"}, {"AttributeType", "S"}}}},
            {"BillingMode", "PAY_PER_REQUEST"}}));
}

TEST_F(DynamoDbClientTest, CreateTableProvisionedSendsThroughput) {
  fake_->respond(json::object());
  CreateTableRequest req;
  req.table_name = "t";
  req.key_schema = {{"h", "HASH"}, {"r", "RANGE"}};
  req.attribute_definitions = {{"h", "S"}, {"r", "N"}};
  req.billing_mode = "PROVISIONED";
  req.read_capacity_units = 5;
  req.write_capacity_units = 7;
  ASSERT_TRUE(client_.create_table(req).ok());
  EXPECT_EQ(last_body()["BillingMode"], "PROVISIONED");
  EXPECT_EQ(last_body()["ProvisionedThroughput"],
            (json{{"ReadCapacityUnits", 5}, {"WriteCapacityUnits", 7}}));
  EXPECT_EQ(last_body()["KeySchema"][1]["KeyType"], "RANGE");
}

TEST_F(DynamoDbClientTest, CreateTableRejectsBadRequestsWithoutCalling) {
  CreateTableRequest req;
  req.table_name = "t";
  req.key_schema = {{"h", "HASH"}};
  req.billing_mode = "PROVISIONED";  // but no capacity
  auto s = client_.create_table(req);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("capacity"), std::string::npos) << s;
  req.billing_mode = "ON_DEMAND";
  EXPECT_EQ(client_.create_table(req).code(), StatusCode::kInvalidArgument);
  req.billing_mode = "PAY_PER_REQUEST";
  req.key_schema.clear();
  EXPECT_EQ(client_.create_table(req).code(), StatusCode::kInvalidArgument);
  req.key_schema = {{"h", "HASH"}};
  req.table_name.clear();
  EXPECT_EQ(client_.create_table(req).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(fake_->calls.empty());
}

TEST_F(DynamoDbClientTest, CreateTableInUseIsAlreadyExists) {
  fake_->fail(StatusCode::kAlreadyExists, "Table already exists: t", "ResourceInUseException");
  CreateTableRequest req;
  req.table_name = "t";
  req.key_schema = {{"h", "HASH"}};
  EXPECT_EQ(client_.create_table(req).code(), StatusCode::kAlreadyExists);
}

TEST_F(DynamoDbClientTest, DescribeTableParsesTheDescription) {
  fake_->respond(table_json("ACTIVE"));
  auto d = client_.describe_table("leases");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(fake_->calls[0].operation, "DescribeTable");
  EXPECT_EQ(last_body(), (json{{"TableName", "leases"}}));
  EXPECT_EQ(d->table_name, "leases");
  EXPECT_EQ(d->table_status, "ACTIVE");
  ASSERT_EQ(d->key_schema.size(), 1u);
  EXPECT_EQ(d->key_schema[0].attribute_name, "leaseKey");
  EXPECT_EQ(d->key_schema[0].key_type, "HASH");
  ASSERT_EQ(d->attribute_definitions.size(), 1u);
  EXPECT_EQ(d->attribute_definitions[0].attribute_type, "S");
  EXPECT_EQ(d->billing_mode, "PAY_PER_REQUEST");
  EXPECT_EQ(d->item_count, 12);
}

TEST_F(DynamoDbClientTest, DescribeTableWithoutBillingSummaryIsProvisioned) {
  json t = table_json("ACTIVE");
  t["Table"].erase("BillingModeSummary");
  t["Table"].erase("ItemCount");
  fake_->respond(t);
  auto d = client_.describe_table("leases");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->billing_mode, "PROVISIONED");
  EXPECT_EQ(d->item_count, 0);
}

// AWS SDKs read a member whose value is null as absent; so does the client, for every
// optional member of the responses it parses, and a required one that is null is missing.
TEST_F(DynamoDbClientTest, NullMembersAreAbsent) {
  json t = table_json("ACTIVE");
  t["Table"]["BillingModeSummary"] = nullptr;
  t["Table"]["ItemCount"] = nullptr;
  t["Table"]["KeySchema"] = nullptr;
  t["Table"]["AttributeDefinitions"] = nullptr;
  fake_->respond(t);
  auto d = client_.describe_table("leases");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->billing_mode, "PROVISIONED");
  EXPECT_EQ(d->item_count, 0);
  EXPECT_TRUE(d->key_schema.empty());

  json b = table_json("ACTIVE");
  b["Table"]["BillingModeSummary"] = {{"BillingMode", nullptr}};
  fake_->respond(b);
  d = client_.describe_table("leases");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->billing_mode, "PROVISIONED");

  fake_->respond(json{{"Item", nullptr}});
  auto g = client_.get_item("t", key_of("k"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(g->has_value());

  fake_->respond(json{{"Items", json::array()},
                      {"LastEvaluatedKey", nullptr},
                      {"ScannedCount", nullptr},
                      {"Count", nullptr}});
  auto page = client_.scan_page("t", std::nullopt);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_FALSE(page->last_evaluated_key.has_value());
  EXPECT_EQ(page->scanned_count, 0);

  json n = table_json("ACTIVE");
  n["Table"]["TableStatus"] = nullptr;
  fake_->respond(n);
  d = client_.describe_table("leases");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("has no TableStatus"), std::string::npos) << d.status();
  fake_->respond(json{{"Table", nullptr}});
  EXPECT_NE(client_.describe_table("leases").status().message().find("no Table"),
            std::string::npos);
  fake_->respond(json{{"Items", nullptr}});
  EXPECT_NE(client_.scan_page("t", std::nullopt).status().message().find("no Items"),
            std::string::npos);
}

TEST_F(DynamoDbClientTest, DescribeTableRejectsMalformedResponses) {
  struct Case {
    std::string body;
    std::string message;
  };
  json no_status = table_json("ACTIVE");
  no_status["Table"].erase("TableStatus");
  json status_number = table_json("ACTIVE");
  status_number["Table"]["TableStatus"] = 3;
  json bad_schema = table_json("ACTIVE");
  bad_schema["Table"]["KeySchema"] = {{{"AttributeName", "leaseKey"}}};
  json bad_count = table_json("ACTIVE");
  bad_count["Table"]["ItemCount"] = "many";
  const Case cases[] = {
      {"not json", "DynamoDB.DescribeTable: malformed response: not JSON"},
      {"[1,2]", "DynamoDB.DescribeTable: malformed response: not a JSON object"},
      {"{}", "DynamoDB.DescribeTable: malformed response: no Table"},
      {R"({"Table": 1})", "DynamoDB.DescribeTable: malformed response: Table is not an object"},
      {no_status.dump(), "DynamoDB.DescribeTable: malformed response: Table has no TableStatus"},
      {status_number.dump(),
       "DynamoDB.DescribeTable: malformed response: Table.TableStatus is not a string"},
      {bad_schema.dump(),
       "DynamoDB.DescribeTable: malformed response: Table.KeySchema element has no KeyType"},
      {bad_count.dump(),
       "DynamoDB.DescribeTable: malformed response: Table.ItemCount is not an integer"},
  };
  for (const auto& c : cases) {
    fake_->respond_text(c.body);
    auto d = client_.describe_table("leases");
    ASSERT_FALSE(d.ok()) << c.body;
    EXPECT_EQ(d.status().code(), StatusCode::kInternal) << c.body;
    EXPECT_EQ(d.status().message(), c.message);
  }
}

TEST_F(DynamoDbClientTest, WaitUntilActivePollsWithGrowingInterval) {
  fake_->respond(table_json("CREATING"));
  fake_->respond(table_json("CREATING"));
  fake_->respond(table_json("CREATING"));
  fake_->respond(table_json("ACTIVE"));
  auto d = client_.wait_until_active("leases", milliseconds(10000));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->table_status, "ACTIVE");
  EXPECT_EQ(fake_->calls.size(), 4u);
  EXPECT_EQ(sleeps_,
            (std::vector<milliseconds>{milliseconds(50), milliseconds(100), milliseconds(200)}));
}

TEST_F(DynamoDbClientTest, WaitUntilActiveToleratesNotFoundRightAfterCreate) {
  fake_->fail(StatusCode::kNotFound, "Requested resource not found", "ResourceNotFoundException");
  fake_->respond(table_json("ACTIVE"));
  auto d = client_.wait_until_active("leases", milliseconds(10000));
  ASSERT_TRUE(d.ok()) << d.status();
}

TEST_F(DynamoDbClientTest, WaitUntilActiveDeadlineNamesTableAndLastStatus) {
  for (int i = 0; i < 100; ++i) fake_->respond(table_json("CREATING"));
  auto d = client_.wait_until_active("leases", milliseconds(3000));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(d.status().message().find("'leases'"), std::string::npos) << d.status();
  EXPECT_NE(d.status().message().find("CREATING"), std::string::npos) << d.status();
  EXPECT_NE(d.status().message().find("3000 ms"), std::string::npos) << d.status();
  // 50+100+200+400+800+1000 = 2550, then 450 to the deadline, then one last look.
  milliseconds slept{0};
  for (auto s : sleeps_) {
    EXPECT_LE(s, milliseconds(1000));
    slept += s;
  }
  EXPECT_EQ(slept, milliseconds(3000));
  EXPECT_EQ(fake_->calls.size(), sleeps_.size() + 1);
}

TEST_F(DynamoDbClientTest, WaitUntilActiveStopsOnHardErrors) {
  fake_->fail(StatusCode::kPermissionDenied, "no", "AccessDeniedException", 403);
  auto d = client_.wait_until_active("leases", milliseconds(10000));
  EXPECT_EQ(d.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(fake_->calls.size(), 1u);

  fake_->respond(table_json("DELETING"));
  auto deleting = client_.wait_until_active("leases", milliseconds(10000));
  EXPECT_EQ(deleting.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(DynamoDbClientTest, DeleteTable) {
  fake_->respond(table_json("DELETING"));
  ASSERT_TRUE(client_.delete_table("leases").ok());
  EXPECT_EQ(fake_->calls[0].operation, "DeleteTable");
  EXPECT_EQ(last_body(), (json{{"TableName", "leases"}}));
}

// --- errors ---

TEST_F(DynamoDbClientTest, ErrorMessagesNameOperationAndEndpoint) {
  fake_->fail(StatusCode::kNotFound, "Requested resource not found", "ResourceNotFoundException");
  auto d = client_.describe_table("missing");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("DynamoDB.DescribeTable"), std::string::npos) << d.status();
  EXPECT_NE(d.status().message().find(kEndpoint), std::string::npos) << d.status();
  ASSERT_TRUE(d.status().aws().has_value());
  EXPECT_EQ(d.status().aws()->error_type, "ResourceNotFoundException");

  // The AWS client's usual form "<op>: <type>: <message>" gets the endpoint after the op.
  fake_->fail(
      StatusCode::kNotFound,
      "DynamoDB.GetItem: ResourceNotFoundException: Requested resource not found (HTTP 400)",
      "ResourceNotFoundException");
  auto n = client_.get_item("t", key_of("k"));
  EXPECT_EQ(n.status().message(), std::string("DynamoDB.GetItem at ") + kEndpoint +
                                      ": ResourceNotFoundException: Requested resource not "
                                      "found (HTTP 400)");

  // A message that already names both is left alone.
  std::string full = std::string("DynamoDB.GetItem at ") + kEndpoint + ": boom";
  fake_->fail(StatusCode::kUnavailable, full, "InternalServerError", 500);
  auto g = client_.get_item("t", key_of("k"));
  EXPECT_EQ(g.status().message(), full);
  EXPECT_TRUE(g.status().retryable());
}

TEST_F(DynamoDbClientTest, ConditionalCheckFailureIsConditionFailed) {
  // Whatever the generic mapping said, the error type decides.
  fake_->fail(StatusCode::kInvalidArgument, "The conditional request failed",
              "ConditionalCheckFailedException");
  auto r = client_.put_item("t", key_of("k"), Expression{"attribute_not_exists(leaseKey)", {}, {}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kConditionFailed);
  ASSERT_TRUE(r.status().aws().has_value());
  EXPECT_EQ(r.status().aws()->http_status, 400);

  fake_->fail(StatusCode::kInvalidArgument, "The conditional request failed",
              "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException");
  auto u = client_.update_item("t", key_of("k"),
                               Expression{"SET a = :a", {}, {{":a", AttributeValue::N(1)}}});
  EXPECT_EQ(u.status().code(), StatusCode::kConditionFailed);

  fake_->fail(StatusCode::kConditionFailed, "The conditional request failed",
              "ConditionalCheckFailedException");
  auto d = client_.delete_item("t", key_of("k"), Expression{"attribute_exists(leaseKey)", {}, {}});
  EXPECT_EQ(d.status().code(), StatusCode::kConditionFailed);
}

TEST_F(DynamoDbClientTest, TransportErrorsWithoutAwsDetailsPassThrough) {
  fake_->responses.emplace_back(Status(StatusCode::kUnavailable, "connection refused"));
  auto g = client_.get_item("t", key_of("k"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(g.status().message().find("DynamoDB.GetItem"), std::string::npos);
  EXPECT_NE(g.status().message().find("connection refused"), std::string::npos);
}

TEST_F(DynamoDbClientTest, InvalidUtf8IsRejectedBeforeSending) {
  auto r = client_.put_item("t", Item{{"leaseKey", AttributeValue::S("bad \xff\xfe")}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("UTF-8"), std::string::npos);
  EXPECT_TRUE(fake_->calls.empty());
}

// --- items ---

TEST_F(DynamoDbClientTest, GetItemIsConsistentByDefault) {
  fake_->respond(json{{"Item", {{"leaseKey", {{"S", "k"}}}, {"leaseCounter", {{"N", "3"}}}}}});
  auto r = client_.get_item("t", key_of("k"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((**r).at("leaseCounter"), AttributeValue::N(3));
  EXPECT_EQ(fake_->calls[0].operation, "GetItem");
  EXPECT_EQ(last_body(), (json{{"TableName", "t"},
                               {"ReturnConsumedCapacity", "TOTAL"},
                               {"Key", {{"leaseKey", {{"S", "k"}}}}},
                               {"ConsistentRead", true}}));

  fake_->respond(json::object());
  auto missing = client_.get_item("t", key_of("nope"), /*consistent_read=*/false);
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_FALSE(missing->has_value());
  EXPECT_EQ(last_body()["ConsistentRead"], false);
}

TEST_F(DynamoDbClientTest, GetItemRejectsMalformedItem) {
  fake_->respond(json{{"Item", {{"leaseCounter", {{"N", "x"}}}}}});
  auto r = client_.get_item("t", key_of("k"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(r.status().message(),
            "DynamoDB.GetItem: malformed response: Item: attribute 'leaseCounter': N value is "
            "not a number: \"x\"");

  fake_->respond(json{{"Item", "x"}});
  auto s = client_.get_item("t", key_of("k"));
  EXPECT_EQ(s.status().message(), "DynamoDB.GetItem: malformed response: Item is not an object");

  EXPECT_EQ(client_.get_item("t", Item{}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client_.get_item("", key_of("k")).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(DynamoDbClientTest, PutItemWithConditionAndReturnValues) {
  fake_->respond(json{{"Attributes", {{"leaseKey", {{"S", "k"}}}, {"leaseOwner", {{"S", "w1"}}}}}});
  Item item{{"leaseKey", AttributeValue::S("k")}, {"leaseCounter", AttributeValue::N(0)}};
  Expression cond{"attribute_not_exists(#k) OR #o = :o",
                  {{"#k", "leaseKey"}, {"#o", "leaseOwner"}},
                  {{":o", AttributeValue::S("w1")}}};
  auto r = client_.put_item("t", item, cond, ReturnValues::kAllOld);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->attributes.has_value());
  EXPECT_EQ(r->attributes->at("leaseOwner"), AttributeValue::S("w1"));
  EXPECT_EQ(fake_->calls[0].operation, "PutItem");
  EXPECT_EQ(last_body(),
            (json{{"TableName", "t"},
                  {"ReturnConsumedCapacity", "TOTAL"},
                  {"Item", {{"leaseKey", {{"S", "k"}}}, {"leaseCounter", {{"N", "0"}}}}},
                  {"ConditionExpression", "attribute_not_exists(#k) OR #o = :o"},
                  {"ExpressionAttributeNames", {{"#k", "leaseKey"}, {"#o", "leaseOwner"}}},
                  {"ExpressionAttributeValues", {{":o", {{"S", "w1"}}}}},
                  {"ReturnValues", "ALL_OLD"}}));
}

TEST_F(DynamoDbClientTest, PutItemWithoutConditionSendsOnlyTheItem) {
  fake_->respond(json::object());
  auto r = client_.put_item("t", key_of("k"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->attributes.has_value());
  EXPECT_EQ(last_body(), (json{{"TableName", "t"},
                               {"ReturnConsumedCapacity", "TOTAL"},
                               {"Item", {{"leaseKey", {{"S", "k"}}}}}}));
}

TEST_F(DynamoDbClientTest, PutAndDeleteAllowOnlyNoneOrAllOld) {
  auto p = client_.put_item("t", key_of("k"), {}, ReturnValues::kAllNew);
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("ALL_NEW"), std::string::npos);
  auto d = client_.delete_item("t", key_of("k"), {}, ReturnValues::kUpdatedOld);
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(fake_->calls.empty());
}

TEST_F(DynamoDbClientTest, UpdateItemMergesPlaceholdersOfBothExpressions) {
  fake_->respond(json{{"Attributes", {{"leaseCounter", {{"N", "6"}}}}}});
  Expression update{"SET #c = #c + :one, #o = :owner",
                    {{"#c", "leaseCounter"}, {"#o", "leaseOwner"}},
                    {{":one", AttributeValue::N(1)}, {":owner", AttributeValue::S("w2")}}};
  Expression cond{"#c = :expected AND #o = :prev",
                  {{"#c", "leaseCounter"}, {"#o", "leaseOwner"}},  // same meaning: fine
                  {{":expected", AttributeValue::N(5)}, {":prev", AttributeValue::S("w1")}}};
  auto r = client_.update_item("t", key_of("k"), update, cond, ReturnValues::kUpdatedNew);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->attributes->at("leaseCounter"), AttributeValue::N(6));
  EXPECT_EQ(fake_->calls[0].operation, "UpdateItem");
  EXPECT_EQ(last_body(),
            (json{{"TableName", "t"},
                  {"ReturnConsumedCapacity", "TOTAL"},
                  {"Key", {{"leaseKey", {{"S", "k"}}}}},
                  {"UpdateExpression", "SET #c = #c + :one, #o = :owner"},
                  {"ConditionExpression", "#c = :expected AND #o = :prev"},
                  {"ExpressionAttributeNames", {{"#c", "leaseCounter"}, {"#o", "leaseOwner"}}},
                  {"ExpressionAttributeValues",
                   {{":one", {{"N", "1"}}},
                    {":owner", {{"S", "w2"}}},
                    {":expected", {{"N", "5"}}},
                    {":prev", {{"S", "w1"}}}}},
                  {"ReturnValues", "UPDATED_NEW"}}));
}

TEST_F(DynamoDbClientTest, UpdateItemReturnValueNames) {
  const std::pair<ReturnValues, const char*> cases[] = {{ReturnValues::kAllOld, "ALL_OLD"},
                                                        {ReturnValues::kAllNew, "ALL_NEW"},
                                                        {ReturnValues::kUpdatedOld, "UPDATED_OLD"},
                                                        {ReturnValues::kUpdatedNew, "UPDATED_NEW"}};
  Expression update{"REMOVE leaseOwner", {}, {}};
  for (const auto& [rv, name] : cases) {
    fake_->respond(json::object());
    ASSERT_TRUE(client_.update_item("t", key_of("k"), update, {}, rv).ok());
    EXPECT_EQ(last_body()["ReturnValues"], name);
    EXPECT_FALSE(last_body().contains("ConditionExpression"));
    EXPECT_FALSE(last_body().contains("ExpressionAttributeNames"));
  }
  fake_->respond(json::object());
  ASSERT_TRUE(client_.update_item("t", key_of("k"), update).ok());
  EXPECT_FALSE(last_body().contains("ReturnValues"));
}

TEST_F(DynamoDbClientTest, UpdateItemRejectsClashingPlaceholders) {
  Expression update{"SET #a = :v", {{"#a", "leaseOwner"}}, {{":v", AttributeValue::S("w")}}};
  Expression name_clash{"#a = :x", {{"#a", "checkpoint"}}, {{":x", AttributeValue::S("w")}}};
  auto r = client_.update_item("t", key_of("k"), update, name_clash);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'#a'"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("DynamoDB.UpdateItem"), std::string::npos) << r.status();

  Expression value_clash{"#a = :v", {{"#a", "leaseOwner"}}, {{":v", AttributeValue::S("other")}}};
  auto v = client_.update_item("t", key_of("k"), update, value_clash);
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(v.status().message().find("':v'"), std::string::npos) << v.status();

  Expression type_clash{"#a = :v", {{"#a", "leaseOwner"}}, {{":v", AttributeValue::N(1)}}};
  EXPECT_EQ(client_.update_item("t", key_of("k"), update, type_clash).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(fake_->calls.empty());
}

TEST_F(DynamoDbClientTest, RejectsBadPlaceholders) {
  Expression bad_name{"SET x = :v", {{"x", "leaseOwner"}}, {{":v", AttributeValue::S("w")}}};
  EXPECT_EQ(client_.update_item("t", key_of("k"), bad_name).status().code(),
            StatusCode::kInvalidArgument);
  Expression bad_value{"SET #x = v", {{"#x", "leaseOwner"}}, {{"v", AttributeValue::S("w")}}};
  EXPECT_EQ(client_.update_item("t", key_of("k"), bad_value).status().code(),
            StatusCode::kInvalidArgument);
  Expression empty_target{"SET #x = :v", {{"#x", ""}}, {{":v", AttributeValue::S("w")}}};
  EXPECT_EQ(client_.update_item("t", key_of("k"), empty_target).status().code(),
            StatusCode::kInvalidArgument);
  Expression no_expression{"", {}, {{":v", AttributeValue::S("w")}}};
  auto r = client_.put_item("t", key_of("k"), no_expression);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("condition expression is empty"), std::string::npos)
      << r.status();
  EXPECT_TRUE(fake_->calls.empty());
}

TEST_F(DynamoDbClientTest, DeleteItemWithCondition) {
  fake_->respond(json{{"Attributes", {{"leaseKey", {{"S", "k"}}}}}});
  Expression cond{"leaseCounter = :c", {}, {{":c", AttributeValue::N(9)}}};
  auto r = client_.delete_item("t", key_of("k"), cond, ReturnValues::kAllOld);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(fake_->calls[0].operation, "DeleteItem");
  EXPECT_EQ(last_body(), (json{{"TableName", "t"},
                               {"ReturnConsumedCapacity", "TOTAL"},
                               {"Key", {{"leaseKey", {{"S", "k"}}}}},
                               {"ConditionExpression", "leaseCounter = :c"},
                               {"ExpressionAttributeValues", {{":c", {{"N", "9"}}}}},
                               {"ReturnValues", "ALL_OLD"}}));
  EXPECT_EQ(r->attributes->at("leaseKey"), AttributeValue::S("k"));
}

TEST_F(DynamoDbClientTest, WriteRejectsMalformedAttributes) {
  fake_->respond(json{{"Attributes", {{"x", {{"BOOL", "yes"}}}}}});
  auto r = client_.update_item("t", key_of("k"), Expression{"REMOVE x", {}, {}}, {},
                               ReturnValues::kAllOld);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(r.status().message(),
            "DynamoDB.UpdateItem: malformed response: Attributes: attribute 'x': BOOL value must "
            "be a boolean, got a string");
}

// --- scan ---

json scan_response(std::vector<std::string> keys, std::optional<std::string> last) {
  json items = json::array();
  for (const auto& k : keys) items.push_back({{"leaseKey", {{"S", k}}}});
  json r{{"Items", items}, {"Count", keys.size()}, {"ScannedCount", keys.size()}};
  if (last) r["LastEvaluatedKey"] = {{"leaseKey", {{"S", *last}}}};
  return r;
}

TEST_F(DynamoDbClientTest, ScanPageSendsPagingParameters) {
  fake_->respond(scan_response({"b", "c"}, "c"));
  auto p = client_.scan_page("t", key_of("a"), 2, true);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(fake_->calls[0].operation, "Scan");
  EXPECT_EQ(last_body(), (json{{"TableName", "t"},
                               {"ReturnConsumedCapacity", "TOTAL"},
                               {"ConsistentRead", true},
                               {"ExclusiveStartKey", {{"leaseKey", {{"S", "a"}}}}},
                               {"Limit", 2}}));
  ASSERT_EQ(p->items.size(), 2u);
  EXPECT_EQ(p->items[1].at("leaseKey"), AttributeValue::S("c"));
  ASSERT_TRUE(p->last_evaluated_key.has_value());
  EXPECT_EQ(*p->last_evaluated_key, key_of("c"));
  EXPECT_EQ(p->scanned_count, 2);

  fake_->respond(scan_response({}, std::nullopt));
  auto last = client_.scan_page("t", std::nullopt);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_TRUE(last->items.empty());
  EXPECT_FALSE(last->last_evaluated_key.has_value());
  EXPECT_EQ(
      last_body(),
      (json{{"TableName", "t"}, {"ReturnConsumedCapacity", "TOTAL"}, {"ConsistentRead", false}}));
}

TEST_F(DynamoDbClientTest, ScanPageRejectsMalformedResponses) {
  const std::pair<std::string, std::string> cases[] = {
      {"{}", "DynamoDB.Scan: malformed response: no Items"},
      {R"({"Items": {}})", "DynamoDB.Scan: malformed response: Items is not an array"},
      {R"({"Items": [{"k": {"S": "a"}}, {"k": {"Q": "b"}}]})",
       "DynamoDB.Scan: malformed response: Items[1]: attribute 'k': unknown type key \"Q\""},
      {R"({"Items": [], "LastEvaluatedKey": []})",
       "DynamoDB.Scan: malformed response: LastEvaluatedKey is not an object"},
      {R"({"Items": [], "LastEvaluatedKey": {}})",
       "DynamoDB.Scan: malformed response: LastEvaluatedKey is empty"},
      {R"({"Items": [], "ScannedCount": -1})",
       "DynamoDB.Scan: malformed response: Scan.ScannedCount is negative"},
  };
  for (const auto& [body, message] : cases) {
    fake_->respond_text(body);
    auto p = client_.scan_page("t", std::nullopt);
    ASSERT_FALSE(p.ok()) << body;
    EXPECT_EQ(p.status().code(), StatusCode::kInternal);
    EXPECT_EQ(p.status().message(), message);
  }
  EXPECT_EQ(client_.scan_page("t", std::nullopt, -1).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(DynamoDbClientTest, ScanAllFollowsLastEvaluatedKey) {
  fake_->respond(scan_response({"a", "b"}, "b"));
  fake_->respond(scan_response({"c"}, "c"));
  fake_->respond(scan_response({}, "c2"));  // an empty page that still has a key: keep going
  fake_->respond(scan_response({"d"}, std::nullopt));
  auto all = client_.scan_all("t", true);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[3].at("leaseKey"), AttributeValue::S("d"));
  ASSERT_EQ(fake_->calls.size(), 4u);
  EXPECT_FALSE(fake_->calls[0].body.contains("ExclusiveStartKey"));
  EXPECT_EQ(fake_->calls[1].body["ExclusiveStartKey"], (json{{"leaseKey", {{"S", "b"}}}}));
  EXPECT_EQ(fake_->calls[2].body["ExclusiveStartKey"], (json{{"leaseKey", {{"S", "c"}}}}));
  EXPECT_EQ(fake_->calls[3].body["ExclusiveStartKey"], (json{{"leaseKey", {{"S", "c2"}}}}));
  for (const auto& c : fake_->calls) {
    EXPECT_EQ(c.body["ConsistentRead"], true);
    EXPECT_FALSE(c.body.contains("Limit"));
  }
}

TEST_F(DynamoDbClientTest, ScanAllStopsOnErrorsAndOnARepeatedKey) {
  fake_->respond(scan_response({"a"}, "a"));
  fake_->fail(StatusCode::kUnavailable, "throttled", "ProvisionedThroughputExceededException");
  auto e = client_.scan_all("t");
  EXPECT_EQ(e.status().code(), StatusCode::kUnavailable);

  fake_->respond(scan_response({"a"}, "a"));
  fake_->respond(scan_response({}, "a"));
  auto loop = client_.scan_all("t");
  EXPECT_EQ(loop.status().code(), StatusCode::kInternal);
  EXPECT_NE(loop.status().message().find("repeats"), std::string::npos) << loop.status();
}

// --- consumed capacity ---

// Keeps every count as "name table operation outcome" -> total.
class CountingSink final : public MetricsSink {
 public:
  void count(std::string_view name, double value, MetricTags tags) override {
    std::string key(name);
    for (const MetricTag& t : tags) key += " " + std::string(t.value);
    totals[key] += value;
  }
  void gauge(std::string_view, double, MetricTags) override {}
  void timing(std::string_view, std::chrono::nanoseconds, MetricTags) override {}
  std::map<std::string, double> totals;
};

TEST_F(DynamoDbClientTest, ItemOperationsReportTheCapacityTheirAnswersName) {
  auto sink = std::make_shared<CountingSink>();
  client_.report_capacity_to(sink);
  fake_->respond(json{{"ConsumedCapacity", {{"TableName", "t"}, {"CapacityUnits", 0.5}}}});
  ASSERT_TRUE(client_.get_item("t", key_of("k"), false).ok());
  fake_->respond(json{{"ConsumedCapacity", {{"TableName", "t"}, {"CapacityUnits", 2.0}}}});
  ASSERT_TRUE(client_
                  .update_item("t", key_of("k"),
                               Expression{"SET a = :a", {}, {{":a", AttributeValue::N(1)}}})
                  .ok());
  fake_->respond(json{{"Items", json::array()},
                      {"ConsumedCapacity", {{"TableName", "t"}, {"CapacityUnits", 1.5}}}});
  ASSERT_TRUE(client_.scan_page("t", std::nullopt).ok());
  fake_->fail(StatusCode::kFailedPrecondition, "The conditional request failed",
              "ConditionalCheckFailedException");
  EXPECT_EQ(client_.delete_item("t", key_of("k"), Expression{"attribute_exists(a)", {}, {}})
                .status()
                .code(),
            StatusCode::kConditionFailed);
  // An answer without the figure, or with a malformed one, reports nothing.
  fake_->respond(json::object());
  ASSERT_TRUE(client_.put_item("t", key_of("k")).ok());
  fake_->respond(json{{"ConsumedCapacity", {{"CapacityUnits", "lots"}}}});
  ASSERT_TRUE(client_.put_item("t", key_of("k")).ok());

  EXPECT_EQ(sink->totals, (std::map<std::string, double>{
                              {"dynamodb.read_units t GetItem ok", 0.5},
                              {"dynamodb.write_units t UpdateItem ok", 2.0},
                              {"dynamodb.read_units t Scan ok", 1.5},
                              {"dynamodb.write_units t DeleteItem condition_failed", 1.0}}));
  EXPECT_EQ(last_body()["ReturnConsumedCapacity"], "TOTAL");
}

TEST_F(DynamoDbClientTest, TableOperationsDoNotAskForConsumedCapacity) {
  fake_->respond(json{{"Table", {{"TableName", "t"}, {"TableStatus", "ACTIVE"}}}});
  ASSERT_TRUE(client_.describe_table("t").ok());
  EXPECT_FALSE(last_body().contains("ReturnConsumedCapacity"));
}

// The coordination table's name: a role allowed only the tables the Java KCL 3.x's policy
// names may not describe kcl-cpp's own "-KclCppCoordinatorState"; that is taken as absent and
// the shared "-CoordinatorState" used. An own name past 255 characters is not looked for.
TEST_F(DynamoDbClientTest, TheCoordinationTableResolvesPastAnOwnNameItMayNotDescribe) {
  auto shared = std::make_shared<DynamoDbClient>(fake_, clock_, [](milliseconds) {});
  LeaseConfig config;
  config.application_name = "orders";
  coordination::DynamoDbCoordinationStore store(shared, config);
  fake_->fail(StatusCode::kPermissionDenied,
              "User is not authorized to perform: dynamodb:DescribeTable", "AccessDeniedException");
  fake_->respond(table_json("ACTIVE"));
  Status s = store.resolve_table();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(store.table_name(), "orders-CoordinatorState");
  ASSERT_EQ(fake_->calls.size(), 2u);
  EXPECT_EQ(fake_->calls[0].body["TableName"], "orders-KclCppCoordinatorState");
  EXPECT_EQ(fake_->calls[1].body["TableName"], "orders-CoordinatorState");

  // Any other failure of the look is the start's failure, named.
  coordination::DynamoDbCoordinationStore again(shared, config);
  fake_->fail(StatusCode::kInternal, "boom", "InternalServerError", 500);
  s = again.resolve_table();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.to_string().find("orders-KclCppCoordinatorState"), std::string::npos) << s;

  fake_->calls.clear();
  config.application_name = std::string(235, 'a');  // + "-CoordinatorState" fits in 255
  coordination::DynamoDbCoordinationStore long_name(shared, config);
  fake_->respond(table_json("ACTIVE"));
  s = long_name.resolve_table();
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(fake_->calls.size(), 1u) << "the own name (258 characters) is not looked for";
  EXPECT_EQ(fake_->calls[0].body["TableName"], config.application_name + "-CoordinatorState");
}

// The owner index (LeaseOwnerToLeaseKeyIndex) as the lease table describes it over time: one
// a Java KCL 3.x worker is still building (CREATING) at start is looked at again and queried
// once ACTIVE (the worker scanned the whole table for its leases for good before); one that
// went away ("no such index") turns the read to a scan at once (every read failed before).
TEST_F(DynamoDbClientTest, TheOwnerIndexIsLookedAtAgainUntilItServesAndLeftWhenItIsGone) {
  auto table_with_index = [](const std::string& index_status) {
    json t = table_json("ACTIVE");
    t["Table"]["GlobalSecondaryIndexes"] =
        json::array({{{"IndexName", "LeaseOwnerToLeaseKeyIndex"},
                      {"KeySchema",
                       {{{"AttributeName", "leaseOwner"}, {"KeyType", "HASH"}},
                        {{"AttributeName", "leaseKey"}, {"KeyType", "RANGE"}}}},
                      {"IndexStatus", index_status}}});
    return t;
  };
  const json owned = {{"Items", {{{"leaseKey", {{"S", "shardId-1"}}}}}}};
  leases::DynamoDbLeaseStoreOptions options;
  options.table_name = "leases";
  options.owner_index_recheck = milliseconds(0);  // look at every read
  leases::DynamoDbLeaseStore store(
      std::make_shared<DynamoDbClient>(fake_, clock_, [](milliseconds) {}), options);
  fake_->respond(table_with_index("CREATING"));
  ASSERT_TRUE(store.create_table_if_not_exists().ok());
  EXPECT_FALSE(store.has_owner_index());

  // Still CREATING: a scan.
  fake_->respond(table_with_index("CREATING"));
  fake_->respond(owned);
  auto keys = store.owned_lease_keys("w1");
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(*keys, std::vector<std::string>{"shardId-1"});
  EXPECT_EQ(fake_->calls.back().operation, "Scan");

  // ACTIVE: the index from then on.
  fake_->respond(table_with_index("ACTIVE"));
  fake_->respond(owned);
  keys = store.owned_lease_keys("w1");
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(fake_->calls.back().operation, "Query");
  EXPECT_TRUE(store.has_owner_index());
  const std::size_t before = fake_->calls.size();
  fake_->respond(owned);
  ASSERT_TRUE(store.owned_lease_keys("w1").ok());
  EXPECT_EQ(fake_->calls.size(), before + 1) << "a query alone, no look at the table";

  // Deleted: the query is refused; the same read scans.
  fake_->fail(StatusCode::kInvalidArgument,
              "The table does not have the specified index: LeaseOwnerToLeaseKeyIndex",
              "ValidationException");
  fake_->respond(owned);
  keys = store.owned_lease_keys("w1");
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(*keys, std::vector<std::string>{"shardId-1"});
  EXPECT_EQ(fake_->calls.back().operation, "Scan");
  EXPECT_FALSE(store.has_owner_index());
}

}  // namespace
}  // namespace kcl::dynamodb
