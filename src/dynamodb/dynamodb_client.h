// DynamoDbClient: the DynamoDB operations kcl-cpp needs. A failed ConditionExpression is
// the distinct, expected outcome kConditionFailed (not a generic error). Other mappings:
// ResourceNotFoundException -> kNotFound, ResourceInUseException -> kAlreadyExists,
// ProvisionedThroughputExceeded / Throttling / RequestLimitExceeded / 5xx -> kUnavailable,
// ValidationException -> kInvalidArgument.
//
// Thread safety: all methods may be called from many threads at once.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aws/aws_json_client.h"
#include "dynamodb/attribute_value.h"
#include "kcl/clock.h"
#include "kcl/metrics.h"

namespace kcl::dynamodb {

struct KeySchemaElement {
  std::string attribute_name;
  std::string key_type;  // HASH or RANGE
};

struct AttributeDefinition {
  std::string attribute_name;
  std::string attribute_type;  // S, N, B
};

// A global secondary index, as created with a table (its attributes must be among the
// table's attribute_definitions) or as DescribeTable tells it.
struct GlobalSecondaryIndex {
  std::string index_name;
  std::vector<KeySchemaElement> key_schema;
  std::string projection_type = "KEYS_ONLY";  // KEYS_ONLY, INCLUDE or ALL
  std::string index_status;                   // described only: CREATING, ACTIVE, ...
};

struct CreateTableRequest {
  std::string table_name;
  std::vector<KeySchemaElement> key_schema;
  std::vector<AttributeDefinition> attribute_definitions;
  std::vector<GlobalSecondaryIndex> global_secondary_indexes;
  // PAY_PER_REQUEST (default) or PROVISIONED (then the capacities below are sent).
  std::string billing_mode = "PAY_PER_REQUEST";
  long long read_capacity_units = 0;
  long long write_capacity_units = 0;
};

struct TableDescription {
  std::string table_name;
  std::string table_status;  // CREATING, ACTIVE, DELETING, UPDATING
  std::vector<KeySchemaElement> key_schema;
  std::vector<AttributeDefinition> attribute_definitions;
  std::string billing_mode;
  long long item_count = 0;
  std::vector<GlobalSecondaryIndex> global_secondary_indexes;
};

// A condition or update expression with its placeholders.
struct Expression {
  std::string expression;                        // empty = none
  std::map<std::string, std::string> names;      // "#n" -> attribute name
  std::map<std::string, AttributeValue> values;  // ":v" -> value
};

enum class ReturnValues { kNone, kAllOld, kAllNew, kUpdatedOld, kUpdatedNew };

struct WriteResult {
  std::optional<Item> attributes;  // per ReturnValues
};

struct ScanPage {
  std::vector<Item> items;
  std::optional<Item> last_evaluated_key;  // absent on the last page
  long long scanned_count = 0;
};

// What one call needs besides its request: the connection, its options, and where to report
// the capacity it consumed (may be null).
struct CallContext {
  aws::AwsJsonClient& client;
  const aws::CallOptions& options;
  MetricsSink* metrics;
};

class DynamoDbClient {
 public:
  // Sleeps for (about) the given time; wait_until_active polls with it.
  using Sleeper = std::function<void(std::chrono::milliseconds)>;

  explicit DynamoDbClient(std::shared_ptr<aws::AwsJsonClient> client);
  // For tests: the clock that judges wait_until_active's deadline and the sleeper between
  // its polls (a ManualClock plus a sleeper that advances it makes waiting deterministic).
  // `clock` must outlive this client.
  DynamoDbClient(std::shared_ptr<aws::AwsJsonClient> client, const Clock& clock, Sleeper sleep);

  Status create_table(const CreateTableRequest& request);
  Result<TableDescription> describe_table(std::string_view table);
  // Polls DescribeTable (every 50 ms at first, backing off to 1 s) until ACTIVE or the
  // deadline passes: kDeadlineExceeded naming the table and its last status. kNotFound and
  // kUnavailable keep it polling (DescribeTable may not see a new table at once); DELETING
  // is kFailedPrecondition; other errors are returned as they come.
  Result<TableDescription> wait_until_active(std::string_view table,
                                             std::chrono::milliseconds deadline);
  Status delete_table(std::string_view table);

  // Consistent read by default. Absent item -> an empty optional (not an error).
  Result<std::optional<Item>> get_item(std::string_view table, const Item& key,
                                       bool consistent_read = true);
  Result<WriteResult> put_item(std::string_view table, const Item& item,
                               const Expression& condition = {},
                               ReturnValues return_values = ReturnValues::kNone);
  // `update` holds the UpdateExpression; `condition` its ConditionExpression. Names and
  // values of both are merged (they must not clash).
  Result<WriteResult> update_item(std::string_view table, const Item& key, const Expression& update,
                                  const Expression& condition = {},
                                  ReturnValues return_values = ReturnValues::kNone);
  Result<WriteResult> delete_item(std::string_view table, const Item& key,
                                  const Expression& condition = {},
                                  ReturnValues return_values = ReturnValues::kNone);
  Result<ScanPage> scan_page(std::string_view table, const std::optional<Item>& exclusive_start_key,
                             int limit = 0, bool consistent_read = false);
  // One page of the items that pass `filter` (a FilterExpression: the page still reads, and
  // is billed for, every item it scans), each holding only the attributes of `projection`
  // (a ProjectionExpression whose names are `filter`'s placeholders; empty = all).
  Result<ScanPage> scan_page_filtered(std::string_view table,
                                      const std::optional<Item>& exclusive_start_key,
                                      const Expression& filter, std::string_view projection = {});
  // Every item, following LastEvaluatedKey.
  Result<std::vector<Item>> scan_all(std::string_view table, bool consistent_read = false);
  // One page of a Query of the global secondary index `index` of `table` (always eventually
  // consistent: DynamoDB reads an index no other way) for the items that match
  // `key_condition` (a KeyConditionExpression).
  Result<ScanPage> query_page(std::string_view table, std::string_view index,
                              const Expression& key_condition,
                              const std::optional<Item>& exclusive_start_key);

  aws::AwsJsonClient& raw() { return *client_; }

  // Every item operation (GetItem, PutItem, UpdateItem, DeleteItem, Scan, Query) asks its
  // answer for the capacity it consumed (ReturnConsumedCapacity TOTAL) and, once this is
  // set, counts it in `metrics` as DynamoDB bills it: dynamodb.read_units and
  // dynamodb.write_units, tagged table, operation and outcome (ok, or condition_failed: a
  // write refused by its condition is billed but its answer names no units, so it counts as
  // one write unit). Set before the client is shared; copies made by with_call_options()
  // report to the same sink.
  void report_capacity_to(std::shared_ptr<MetricsSink> metrics) { metrics_ = std::move(metrics); }

  // A client on the same connection pool whose every call has `options` (e.g. a deadline
  // shorter than a renewal interval, one attempt).
  std::shared_ptr<DynamoDbClient> with_call_options(const aws::CallOptions& options) const;

 private:
  // Sends a Scan or Query request `body` (from `exclusive_start_key` on) and reads its page.
  Result<ScanPage> read_page(std::string_view op, nlohmann::json body,
                             const std::optional<Item>& exclusive_start_key);

  CallContext context() { return CallContext{*client_, options_, metrics_.get()}; }

  std::shared_ptr<aws::AwsJsonClient> client_;
  aws::CallOptions options_;
  std::shared_ptr<MetricsSink> metrics_;
  const Clock* clock_;
  Sleeper sleep_;
};

}  // namespace kcl::dynamodb
