#include "dynamodb/dynamodb_client.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "base/status_macros.h"

namespace kcl::dynamodb {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr milliseconds kFirstPollInterval{50};
constexpr milliseconds kMaxPollInterval{1000};

std::string op_name(std::string_view op) { return "DynamoDB." + std::string(op); }

Status invalid(std::string_view op, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, op_name(op) + ": " + what);
}

Status malformed(std::string_view op, const std::string& what) {
  return Status(StatusCode::kInternal, op_name(op) + ": malformed response: " + what);
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Makes sure the failure of `op` reads as what it means to the caller: a failed condition is
// kConditionFailed whatever the generic mapping said, and the message names the operation
// and the endpoint even when the layer below left them to the details.
Status refine_error(std::string_view op, const std::string& endpoint, const Status& s) {
  StatusCode code = s.code();
  if (s.aws() && ends_with(s.aws()->error_type, "ConditionalCheckFailedException")) {
    code = StatusCode::kConditionFailed;
  }
  std::string message = s.message();
  const std::string name = op_name(op);
  const bool names_op = message.find(name) != std::string::npos;
  const bool names_endpoint = endpoint.empty() || message.find(endpoint) != std::string::npos;
  if (!names_endpoint && message.rfind(name + ": ", 0) == 0) {
    // "DynamoDB.GetItem: ResourceNotFoundException: ..." -> "DynamoDB.GetItem at <url>: ..."
    message.insert(name.size(), " at " + endpoint);
  } else if (!names_op || !names_endpoint) {
    message = name + (names_endpoint ? "" : " at " + endpoint) + ": " + message;
  }
  if (code == s.code() && message == s.message()) return s;
  if (s.aws()) return Status(code, std::move(message), *s.aws());
  return Status(code, std::move(message));
}

const char* return_values_name(ReturnValues rv) {
  switch (rv) {
    case ReturnValues::kNone:
      return "NONE";
    case ReturnValues::kAllOld:
      return "ALL_OLD";
    case ReturnValues::kAllNew:
      return "ALL_NEW";
    case ReturnValues::kUpdatedOld:
      return "UPDATED_OLD";
    case ReturnValues::kUpdatedNew:
      return "UPDATED_NEW";
  }
  return "NONE";
}

Status check_table(std::string_view op, std::string_view table) {
  if (table.empty()) return invalid(op, "table name is empty");
  return Status::Ok();
}

// Collects the placeholders of one or two expressions into one ExpressionAttributeNames /
// ExpressionAttributeValues pair, refusing a placeholder given two different meanings.
class Placeholders {
 public:
  explicit Placeholders(std::string_view op) : op_(op) {}

  Status add(const Expression& e, std::string_view role) {
    if (e.expression.empty()) {
      if (!e.names.empty() || !e.values.empty()) {
        return invalid(
            op_, std::string(role) + " expression is empty but has attribute names or values");
      }
      return Status::Ok();
    }
    for (const auto& [placeholder, name] : e.names) {
      if (placeholder.size() < 2 || placeholder[0] != '#') {
        return invalid(
            op_, "ExpressionAttributeNames placeholder '" + placeholder + "' must start with '#'");
      }
      if (name.empty()) {
        return invalid(op_, "ExpressionAttributeNames '" + placeholder + "' names nothing");
      }
      auto [it, inserted] = names_.emplace(placeholder, std::make_pair(name, std::string(role)));
      if (!inserted && it->second.first != name) {
        return invalid(op_, "ExpressionAttributeNames '" + placeholder + "' clashes: '" +
                                it->second.first + "' in the " + it->second.second +
                                " expression, '" + name + "' in the " + std::string(role) +
                                " expression");
      }
    }
    for (const auto& [placeholder, value] : e.values) {
      if (placeholder.size() < 2 || placeholder[0] != ':') {
        return invalid(
            op_, "ExpressionAttributeValues placeholder '" + placeholder + "' must start with ':'");
      }
      auto [it, inserted] = values_.emplace(placeholder, std::make_pair(value, std::string(role)));
      if (!inserted && !(it->second.first == value)) {
        return invalid(op_, "ExpressionAttributeValues '" + placeholder +
                                "' clashes: defined differently by the " + it->second.second +
                                " and the " + std::string(role) + " expressions");
      }
    }
    return Status::Ok();
  }

  void write(json& body) const {
    if (!names_.empty()) {
      json n = json::object();
      for (const auto& [placeholder, entry] : names_) n[placeholder] = entry.first;
      body["ExpressionAttributeNames"] = std::move(n);
    }
    if (!values_.empty()) {
      json v = json::object();
      for (const auto& [placeholder, entry] : values_) v[placeholder] = entry.first.to_json();
      body["ExpressionAttributeValues"] = std::move(v);
    }
  }

 private:
  std::string_view op_;
  std::map<std::string, std::pair<std::string, std::string>> names_;
  std::map<std::string, std::pair<AttributeValue, std::string>> values_;
};

// A member of a response object, or nullptr when it is absent or null (AWS SDKs read a
// null member as absent; so does kcl-cpp).
const json* member_of(const json& obj, const char* name) {
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// Reads an optional item-valued member ("Item", "Attributes", "LastEvaluatedKey").
Result<std::optional<Item>> optional_item(std::string_view op, const json& response,
                                          const char* member) {
  auto it = response.find(member);
  if (it == response.end() || it->is_null()) return std::optional<Item>();
  if (!it->is_object()) return malformed(op, std::string(member) + " is not an object");
  auto item = item_from_json(*it);
  if (!item.ok()) return malformed(op, std::string(member) + ": " + item.status().message());
  return std::optional<Item>(std::move(item).value());
}

Result<std::string> required_string(std::string_view op, const json& obj, const char* member,
                                    std::string_view where) {
  const json* it = member_of(obj, member);
  if (!it) return malformed(op, std::string(where) + " has no " + member);
  if (!it->is_string())
    return malformed(op, std::string(where) + "." + member + " is not a string");
  return it->get<std::string>();
}

Result<long long> optional_count(std::string_view op, const json& obj, const char* member,
                                 std::string_view where) {
  const json* it = member_of(obj, member);
  if (!it) return 0LL;
  if (it->is_number_unsigned() || it->is_number_integer()) {
    if (it->is_number_unsigned() && it->get<unsigned long long>() > 0x7fffffffffffffffULL) {
      return malformed(op, std::string(where) + "." + member + " is out of range");
    }
    const long long v = it->get<long long>();
    if (v < 0) return malformed(op, std::string(where) + "." + member + " is negative");
    return v;
  }
  return malformed(op, std::string(where) + "." + member + " is not an integer");
}

// A key schema's elements; `where` names an element in errors.
Result<std::vector<KeySchemaElement>> parse_key_schema(std::string_view op, const json& ks,
                                                       const std::string& where) {
  std::vector<KeySchemaElement> out;
  for (const auto& e : ks) {
    if (!e.is_object()) return malformed(op, where + " is not an object");
    KeySchemaElement k;
    KCL_ASSIGN_OR_RETURN(k.attribute_name, required_string(op, e, "AttributeName", where));
    KCL_ASSIGN_OR_RETURN(k.key_type, required_string(op, e, "KeyType", where));
    out.push_back(std::move(k));
  }
  return out;
}

Result<std::vector<AttributeDefinition>> parse_attribute_definitions(std::string_view op,
                                                                     const json& ad) {
  constexpr const char* where = "Table.AttributeDefinitions element";
  if (!ad.is_array()) return malformed(op, "Table.AttributeDefinitions is not an array");
  std::vector<AttributeDefinition> out;
  for (const auto& e : ad) {
    if (!e.is_object()) return malformed(op, std::string(where) + " is not an object");
    AttributeDefinition a;
    KCL_ASSIGN_OR_RETURN(a.attribute_name, required_string(op, e, "AttributeName", where));
    KCL_ASSIGN_OR_RETURN(a.attribute_type, required_string(op, e, "AttributeType", where));
    out.push_back(std::move(a));
  }
  return out;
}

Result<std::vector<GlobalSecondaryIndex>> parse_indexes(std::string_view op, const json& gsis) {
  constexpr const char* where = "Table.GlobalSecondaryIndexes element";
  if (!gsis.is_array()) return malformed(op, "Table.GlobalSecondaryIndexes is not an array");
  std::vector<GlobalSecondaryIndex> out;
  for (const auto& g : gsis) {
    if (!g.is_object()) return malformed(op, std::string(where) + " is not an object");
    GlobalSecondaryIndex index;
    KCL_ASSIGN_OR_RETURN(index.index_name, required_string(op, g, "IndexName", where));
    if (member_of(g, "IndexStatus")) {
      KCL_ASSIGN_OR_RETURN(index.index_status, required_string(op, g, "IndexStatus", where));
    }
    if (const json* ks = member_of(g, "KeySchema"); ks && ks->is_array()) {
      KCL_ASSIGN_OR_RETURN(index.key_schema,
                           parse_key_schema(op, *ks, std::string(where) + " key"));
    }
    out.push_back(std::move(index));
  }
  return out;
}

Result<TableDescription> parse_table(std::string_view op, const json& t) {
  TableDescription d;
  KCL_ASSIGN_OR_RETURN(d.table_name, required_string(op, t, "TableName", "Table"));
  KCL_ASSIGN_OR_RETURN(d.table_status, required_string(op, t, "TableStatus", "Table"));
  if (const json* ks = member_of(t, "KeySchema")) {
    if (!ks->is_array()) return malformed(op, "Table.KeySchema is not an array");
    KCL_ASSIGN_OR_RETURN(d.key_schema, parse_key_schema(op, *ks, "Table.KeySchema element"));
  }
  if (const json* ad = member_of(t, "AttributeDefinitions")) {
    KCL_ASSIGN_OR_RETURN(d.attribute_definitions, parse_attribute_definitions(op, *ad));
  }
  // A table that was always provisioned has no BillingModeSummary.
  d.billing_mode = "PROVISIONED";
  if (const json* bm = member_of(t, "BillingModeSummary")) {
    if (!bm->is_object()) return malformed(op, "Table.BillingModeSummary is not an object");
    if (member_of(*bm, "BillingMode")) {
      KCL_ASSIGN_OR_RETURN(d.billing_mode,
                           required_string(op, *bm, "BillingMode", "Table.BillingModeSummary"));
    }
  }
  KCL_ASSIGN_OR_RETURN(d.item_count, optional_count(op, t, "ItemCount", "Table"));
  if (const json* gsis = member_of(t, "GlobalSecondaryIndexes")) {
    KCL_ASSIGN_OR_RETURN(d.global_secondary_indexes, parse_indexes(op, *gsis));
  }
  return d;
}

}  // namespace

DynamoDbClient::DynamoDbClient(std::shared_ptr<aws::AwsJsonClient> client)
    : DynamoDbClient(std::move(client), SystemClock::instance(),
                     [](milliseconds d) { SystemClock::instance().idle_for(d); }) {}

DynamoDbClient::DynamoDbClient(std::shared_ptr<aws::AwsJsonClient> client, const Clock& clock,
                               Sleeper sleep)
    : client_(std::move(client)), clock_(&clock), sleep_(std::move(sleep)) {}

std::shared_ptr<DynamoDbClient> DynamoDbClient::with_call_options(
    const aws::CallOptions& options) const {
  auto copy = std::make_shared<DynamoDbClient>(*this);
  copy->options_ = options;
  return copy;
}

namespace {

// Operations that read or write items: they are billed in capacity units, and kcl-cpp asks
// each answer to say how many (ReturnConsumedCapacity TOTAL).
bool billed_per_item(std::string_view op) {
  return op == "GetItem" || op == "PutItem" || op == "UpdateItem" || op == "DeleteItem" ||
         op == "Scan" || op == "Query";
}

bool reads_items(std::string_view op) { return op == "GetItem" || op == "Scan" || op == "Query"; }

// Reports what one call cost as DynamoDB bills it: the units its answer names (a malformed or
// missing ConsumedCapacity reports nothing: the figure is advisory). A write refused by its
// condition is billed too, but its answer names no units: it is counted as one write unit
// (the least DynamoDB bills; an item over 1 KB costs more) with outcome condition_failed.
void report_capacity(MetricsSink* metrics, std::string_view op, std::string_view table,
                     const Result<json>& response) {
  if (metrics == nullptr || !billed_per_item(op)) return;
  double units = 0;
  std::string_view outcome = "ok";
  if (response.ok()) {
    const json* cc = member_of(*response, "ConsumedCapacity");
    const json* cu = cc != nullptr && cc->is_object() ? member_of(*cc, "CapacityUnits") : nullptr;
    if (cu == nullptr || !cu->is_number() || cu->get<double>() < 0) return;
    units = cu->get<double>();
  } else if (response.status().code() == StatusCode::kConditionFailed) {
    units = 1;
    outcome = "condition_failed";
  } else {
    return;
  }
  const MetricTag tags[] = {{"table", table}, {"operation", op}, {"outcome", outcome}};
  metrics->count(reads_items(op) ? "dynamodb.read_units" : "dynamodb.write_units", units,
                 MetricTags(tags, 3));
}

// Sends one request and returns the response as a JSON object.
Result<json> send(aws::AwsJsonClient& client, const aws::CallOptions& options, std::string_view op,
                  const json& body) {
  std::string text;
  try {
    text = body.dump();
  } catch (const json::exception&) {
    return invalid(op, "the request holds a string that is not valid UTF-8");
  }
  auto response = client.call(op, std::move(text), options);
  if (!response.ok()) return refine_error(op, client.endpoint(), response.status());
  json parsed = json::parse(*response, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return malformed(op, "not JSON");
  if (!parsed.is_object()) return malformed(op, "not a JSON object");
  return parsed;
}

// send(), asking an item operation's answer for its consumed capacity and reporting it.
Result<json> invoke(const CallContext& call, std::string_view op, json body) {
  std::string table;
  if (billed_per_item(op)) {
    body["ReturnConsumedCapacity"] = "TOTAL";
    if (auto it = body.find("TableName"); it != body.end() && it->is_string()) table = *it;
  }
  Result<json> response = send(call.client, call.options, op, body);
  report_capacity(call.metrics, op, table, response);
  return response;
}

Result<WriteResult> write_result(std::string_view op, const json& response) {
  WriteResult w;
  KCL_ASSIGN_OR_RETURN(w.attributes, optional_item(op, response, "Attributes"));
  return w;
}

// PutItem and DeleteItem can return only the old item.
Status check_old_values_only(std::string_view op, ReturnValues return_values) {
  if (return_values == ReturnValues::kNone || return_values == ReturnValues::kAllOld) {
    return Status::Ok();
  }
  return invalid(op, std::string("ReturnValues ") + return_values_name(return_values) +
                         " is not allowed (only NONE or ALL_OLD)");
}

// The common tail of PutItem, UpdateItem and DeleteItem: the expressions (update first, as
// their placeholders are numbered in that order), ReturnValues, the call and its result.
Result<WriteResult> conditional_write(const CallContext& call, std::string_view op, json body,
                                      const Expression* update, const Expression& condition,
                                      ReturnValues return_values) {
  Placeholders placeholders(op);
  if (update != nullptr) {
    KCL_RETURN_IF_ERROR(placeholders.add(*update, "update"));
    if (!update->expression.empty()) body["UpdateExpression"] = update->expression;
  }
  KCL_RETURN_IF_ERROR(placeholders.add(condition, "condition"));
  if (!condition.expression.empty()) body["ConditionExpression"] = condition.expression;
  placeholders.write(body);
  if (return_values != ReturnValues::kNone) {
    body["ReturnValues"] = return_values_name(return_values);
  }
  KCL_ASSIGN_OR_RETURN(json response, invoke(call, op, std::move(body)));
  return write_result(op, response);
}

}  // namespace

Status DynamoDbClient::create_table(const CreateTableRequest& request) {
  constexpr std::string_view op = "CreateTable";
  KCL_RETURN_IF_ERROR(check_table(op, request.table_name));
  if (request.key_schema.empty()) return invalid(op, "key schema is empty");
  json body{{"TableName", request.table_name}};
  json ks = json::array();
  for (const auto& k : request.key_schema) {
    ks.push_back({{"AttributeName", k.attribute_name}, {"KeyType", k.key_type}});
  }
  body["KeySchema"] = std::move(ks);
  json ad = json::array();
  for (const auto& a : request.attribute_definitions) {
    ad.push_back({{"AttributeName", a.attribute_name}, {"AttributeType", a.attribute_type}});
  }
  body["AttributeDefinitions"] = std::move(ad);
  const bool provisioned = request.billing_mode == "PROVISIONED";
  const json throughput = {{"ReadCapacityUnits", request.read_capacity_units},
                           {"WriteCapacityUnits", request.write_capacity_units}};
  if (!request.global_secondary_indexes.empty()) {
    json gsis = json::array();
    for (const auto& g : request.global_secondary_indexes) {
      if (g.index_name.empty() || g.key_schema.empty()) {
        return invalid(op, "a global secondary index needs a name and a key schema");
      }
      json keys = json::array();
      for (const auto& k : g.key_schema) {
        keys.push_back({{"AttributeName", k.attribute_name}, {"KeyType", k.key_type}});
      }
      json index{{"IndexName", g.index_name},
                 {"KeySchema", std::move(keys)},
                 {"Projection", {{"ProjectionType", g.projection_type}}}};
      if (provisioned) index["ProvisionedThroughput"] = throughput;
      gsis.push_back(std::move(index));
    }
    body["GlobalSecondaryIndexes"] = std::move(gsis);
  }
  if (request.billing_mode == "PAY_PER_REQUEST" || request.billing_mode.empty()) {
    body["BillingMode"] = "PAY_PER_REQUEST";
  } else if (provisioned) {
    if (request.read_capacity_units < 1 || request.write_capacity_units < 1) {
      return invalid(op, "PROVISIONED billing needs read and write capacity units of at least 1");
    }
    body["BillingMode"] = "PROVISIONED";
    body["ProvisionedThroughput"] = throughput;
  } else {
    return invalid(op, "billing mode must be PAY_PER_REQUEST or PROVISIONED, not '" +
                           request.billing_mode + "'");
  }
  auto response = invoke(context(), op, body);
  return response.ok() ? Status::Ok() : response.status();
}

Result<TableDescription> DynamoDbClient::describe_table(std::string_view table) {
  constexpr std::string_view op = "DescribeTable";
  KCL_RETURN_IF_ERROR(check_table(op, table));
  KCL_ASSIGN_OR_RETURN(json response, invoke(context(), op, json{{"TableName", table}}));
  const json* t = member_of(response, "Table");
  if (!t) return malformed(op, "no Table");
  if (!t->is_object()) return malformed(op, "Table is not an object");
  return parse_table(op, *t);
}

Result<TableDescription> DynamoDbClient::wait_until_active(std::string_view table,
                                                           milliseconds deadline) {
  const auto end = clock_->now() + deadline;
  milliseconds interval = kFirstPollInterval;
  std::string last = "never described";
  while (true) {
    auto d = describe_table(table);
    if (d.ok()) {
      if (d->table_status == "ACTIVE") return d;
      if (d->table_status == "DELETING") {
        return Status(
            StatusCode::kFailedPrecondition,
            "DynamoDB table '" + std::string(table) + "' is DELETING; it will not become ACTIVE");
      }
      last = d->table_status;
    } else if (d.status().code() == StatusCode::kNotFound) {
      // Right after CreateTable, DescribeTable may not see the table yet (it is eventually
      // consistent); keep polling until the deadline.
      last = "not found";
    } else if (d.status().code() == StatusCode::kUnavailable) {
      last = "unavailable: " + d.status().message();
    } else {
      return d.status();
    }
    const auto now = clock_->now();
    if (now >= end) {
      return Status(StatusCode::kDeadlineExceeded,
                    "DynamoDB table '" + std::string(table) + "' not ACTIVE within " +
                        std::to_string(deadline.count()) + " ms (last status: " + last + ")");
    }
    const auto left = std::chrono::ceil<milliseconds>(end - now);
    sleep_(std::min(interval, left));
    interval = std::min(interval * 2, kMaxPollInterval);
  }
}

Status DynamoDbClient::delete_table(std::string_view table) {
  constexpr std::string_view op = "DeleteTable";
  KCL_RETURN_IF_ERROR(check_table(op, table));
  auto response = invoke(context(), op, json{{"TableName", table}});
  return response.ok() ? Status::Ok() : response.status();
}

Result<std::optional<Item>> DynamoDbClient::get_item(std::string_view table, const Item& key,
                                                     bool consistent_read) {
  constexpr std::string_view op = "GetItem";
  KCL_RETURN_IF_ERROR(check_table(op, table));
  if (key.empty()) return invalid(op, "key is empty");
  json body{{"TableName", table}, {"Key", item_to_json(key)}, {"ConsistentRead", consistent_read}};
  KCL_ASSIGN_OR_RETURN(json response, invoke(context(), op, body));
  return optional_item(op, response, "Item");
}

Result<WriteResult> DynamoDbClient::put_item(std::string_view table, const Item& item,
                                             const Expression& condition,
                                             ReturnValues return_values) {
  constexpr std::string_view op = "PutItem";
  KCL_RETURN_IF_ERROR(check_table(op, table));
  if (item.empty()) return invalid(op, "item is empty");
  KCL_RETURN_IF_ERROR(check_old_values_only(op, return_values));
  json body{{"TableName", table}, {"Item", item_to_json(item)}};
  return conditional_write(context(), op, std::move(body), nullptr, condition, return_values);
}

Result<WriteResult> DynamoDbClient::update_item(std::string_view table, const Item& key,
                                                const Expression& update,
                                                const Expression& condition,
                                                ReturnValues return_values) {
  constexpr std::string_view op = "UpdateItem";
  KCL_RETURN_IF_ERROR(check_table(op, table));
  if (key.empty()) return invalid(op, "key is empty");
  json body{{"TableName", table}, {"Key", item_to_json(key)}};
  return conditional_write(context(), op, std::move(body), &update, condition, return_values);
}

Result<WriteResult> DynamoDbClient::delete_item(std::string_view table, const Item& key,
                                                const Expression& condition,
                                                ReturnValues return_values) {
  constexpr std::string_view op = "DeleteItem";
  KCL_RETURN_IF_ERROR(check_table(op, table));
  if (key.empty()) return invalid(op, "key is empty");
  KCL_RETURN_IF_ERROR(check_old_values_only(op, return_values));
  json body{{"TableName", table}, {"Key", item_to_json(key)}};
  return conditional_write(context(), op, std::move(body), nullptr, condition, return_values);
}

Result<ScanPage> DynamoDbClient::scan_page(std::string_view table,
                                           const std::optional<Item>& exclusive_start_key,
                                           int limit, bool consistent_read) {
  constexpr std::string_view op = "Scan";
  KCL_RETURN_IF_ERROR(check_table(op, table));
  if (limit < 0) return invalid(op, "limit must not be negative");
  json body{{"TableName", table}, {"ConsistentRead", consistent_read}};
  if (limit > 0) body["Limit"] = limit;
  return read_page(op, std::move(body), exclusive_start_key);
}

Result<ScanPage> DynamoDbClient::scan_page_filtered(std::string_view table,
                                                    const std::optional<Item>& exclusive_start_key,
                                                    const Expression& filter,
                                                    std::string_view projection) {
  constexpr std::string_view op = "Scan";
  KCL_RETURN_IF_ERROR(check_table(op, table));
  if (filter.expression.empty()) return invalid(op, "the filter expression is empty");
  Placeholders placeholders(op);
  KCL_RETURN_IF_ERROR(placeholders.add(filter, "filter"));
  json body{{"TableName", table}, {"FilterExpression", filter.expression}};
  if (!projection.empty()) body["ProjectionExpression"] = projection;
  placeholders.write(body);
  return read_page(op, std::move(body), exclusive_start_key);
}

Result<ScanPage> DynamoDbClient::query_page(std::string_view table, std::string_view index,
                                            const Expression& key_condition,
                                            const std::optional<Item>& exclusive_start_key) {
  constexpr std::string_view op = "Query";
  KCL_RETURN_IF_ERROR(check_table(op, table));
  if (index.empty()) return invalid(op, "the index name is empty");
  if (key_condition.expression.empty()) return invalid(op, "the key condition is empty");
  Placeholders placeholders(op);
  KCL_RETURN_IF_ERROR(placeholders.add(key_condition, "key condition"));
  json body{{"TableName", table},
            {"IndexName", index},
            {"KeyConditionExpression", key_condition.expression}};
  placeholders.write(body);
  return read_page(op, std::move(body), exclusive_start_key);
}

Result<ScanPage> DynamoDbClient::read_page(std::string_view op, json body,
                                           const std::optional<Item>& exclusive_start_key) {
  if (exclusive_start_key) {
    if (exclusive_start_key->empty()) return invalid(op, "exclusive start key is empty");
    body["ExclusiveStartKey"] = item_to_json(*exclusive_start_key);
  }
  KCL_ASSIGN_OR_RETURN(json response, invoke(context(), op, body));

  ScanPage page;
  const json* items = member_of(response, "Items");
  if (!items) return malformed(op, "no Items");
  if (!items->is_array()) return malformed(op, "Items is not an array");
  page.items.reserve(items->size());
  std::size_t index = 0;
  for (const auto& j : *items) {
    auto item = item_from_json(j);
    if (!item.ok()) {
      return malformed(op, "Items[" + std::to_string(index) + "]: " + item.status().message());
    }
    page.items.push_back(std::move(item).value());
    ++index;
  }
  KCL_ASSIGN_OR_RETURN(page.last_evaluated_key, optional_item(op, response, "LastEvaluatedKey"));
  if (page.last_evaluated_key && page.last_evaluated_key->empty()) {
    return malformed(op, "LastEvaluatedKey is empty");
  }
  if (member_of(response, "ScannedCount")) {
    KCL_ASSIGN_OR_RETURN(page.scanned_count, optional_count(op, response, "ScannedCount", op));
  } else {
    page.scanned_count = static_cast<long long>(page.items.size());
  }
  return page;
}

Result<std::vector<Item>> DynamoDbClient::scan_all(std::string_view table, bool consistent_read) {
  std::vector<Item> all;
  std::optional<Item> start;
  while (true) {
    KCL_ASSIGN_OR_RETURN(ScanPage page, scan_page(table, start, 0, consistent_read));
    for (auto& item : page.items) all.push_back(std::move(item));
    if (!page.last_evaluated_key) return all;
    if (start && *start == *page.last_evaluated_key) {
      // A peer that hands back the key it was given would keep us here forever.
      return malformed("Scan", "LastEvaluatedKey repeats the ExclusiveStartKey");
    }
    start = std::move(page.last_evaluated_key);
  }
}

}  // namespace kcl::dynamodb
