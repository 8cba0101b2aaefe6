#include "leases/dynamodb_lease_store.h"

#include <algorithm>
#include <utility>

#include "base/repeat_report.h"
#include "base/status_macros.h"
#include "leases/lease_serializer.h"

namespace kcl::leases {
namespace {

using dynamodb::AttributeValue;
using dynamodb::Expression;

// The Java KCL 3.x's index of leases by owner (DynamoDBLeaseRefresher): every 3.x and 3.5
// table has it; kcl-cpp creates it with every new table.
constexpr std::string_view kOwnerIndex = "LeaseOwnerToLeaseKeyIndex";

bool describes_owner_index(const dynamodb::TableDescription& t) {
  for (const auto& g : t.global_secondary_indexes) {
    if (g.index_name != kOwnerIndex) continue;
    const bool keyed = !g.key_schema.empty() &&
                       g.key_schema[0].attribute_name == attr::kLeaseOwner &&
                       g.key_schema[0].key_type == "HASH";
    // UPDATING (a throughput change) still serves queries; CREATING (backfilling) does not.
    return keyed &&
           (g.index_status.empty() || g.index_status == "ACTIVE" || g.index_status == "UPDATING");
  }
  return false;
}

// The lease keys of a page of items holding at least leaseKey (S).
void collect_lease_keys(const std::vector<dynamodb::Item>& items, std::vector<std::string>& keys) {
  for (const auto& item : items) {
    auto it = item.find(std::string(attr::kLeaseKey));
    if (it != item.end() && it->second.type() == AttributeValue::Type::kS) {
      keys.push_back(it->second.s());
    }
  }
}

std::string describe_key_schema(const dynamodb::TableDescription& t) {
  std::string out;
  for (const auto& k : t.key_schema) {
    if (!out.empty()) out += ", ";
    std::string type = "?";
    for (const auto& d : t.attribute_definitions) {
      if (d.attribute_name == k.attribute_name) type = d.attribute_type;
    }
    out += k.attribute_name + " (" + k.key_type + ", " + type + ")";
  }
  return out.empty() ? "(none)" : out;
}

// "<attribute> = <seen>", or its absence when nothing was seen.
void expect_owner(Expression& c, std::string_view placeholder, std::string_view attribute,
                  const std::optional<std::string>& seen) {
  const std::string name = "#" + std::string(placeholder);
  c.names[name] = std::string(attribute);
  if (!c.expression.empty()) c.expression += " AND ";
  if (seen) {
    const std::string value = ":seen_" + std::string(placeholder);
    c.values[value] = AttributeValue::S(*seen);
    c.expression += name + " = " + value;
  } else {
    c.expression += "attribute_not_exists(" + name + ")";
  }
}

// The condition every write of a holder (or taker) carries: the counter it saw, and the
// owners it saw (leaseOwner, and checkpointOwner while a handoff is pending; each absent when
// it saw none).
Expression fence(const Lease& expected) {
  Expression c;
  c.names["#c"] = std::string(attr::kLeaseCounter);
  c.values[":expected"] = AttributeValue::N(static_cast<long long>(expected.lease_counter));
  c.expression = "#c = :expected";
  expect_owner(c, "o", attr::kLeaseOwner, expected.lease_owner);
  expect_owner(c, "co", attr::kCheckpointOwner, expected.checkpoint_owner);
  return c;
}

// "SET #c = :new" plus the caller's clauses.
Expression bump(const Lease& expected) {
  Expression u;
  u.names["#c"] = std::string(attr::kLeaseCounter);
  u.values[":new"] = AttributeValue::N(static_cast<long long>(expected.lease_counter + 1));
  u.expression = "SET #c = :new";
  return u;
}

}  // namespace

DynamoDbLeaseStoreOptions DynamoDbLeaseStoreOptions::from_config(const LeaseConfig& config) {
  DynamoDbLeaseStoreOptions o;
  o.table_name = config.effective_table_name();
  o.billing_mode = config.billing_mode;
  o.read_capacity_units = config.read_capacity_units;
  o.write_capacity_units = config.write_capacity_units;
  o.table_active_timeout = config.table_active_timeout;
  o.renew_call_timeout = config.effective_renew_call_timeout();
  return o;
}

DynamoDbLeaseStore::DynamoDbLeaseStore(std::shared_ptr<dynamodb::DynamoDbClient> client,
                                       DynamoDbLeaseStoreOptions options)
    : client_(std::move(client)), options_(std::move(options)) {
  renew_client_ = client_;
  if (options_.renew_call_timeout.count() > 0) {
    aws::CallOptions renew;
    renew.max_attempts = 1;
    renew.request_timeout = options_.renew_call_timeout;
    renew.deadline = options_.renew_call_timeout;
    renew_client_ = client_->with_call_options(renew);
  }
}

DynamoDbLeaseStore::DynamoDbLeaseStore(std::shared_ptr<dynamodb::DynamoDbClient> client,
                                       const LeaseConfig& config)
    : DynamoDbLeaseStore(std::move(client), DynamoDbLeaseStoreOptions::from_config(config)) {}

Status DynamoDbLeaseStore::verify_key_schema(const dynamodb::TableDescription& t) const {
  bool ok = t.key_schema.size() == 1 && t.key_schema[0].attribute_name == attr::kLeaseKey &&
            t.key_schema[0].key_type == "HASH";
  if (ok) {
    ok = std::any_of(t.attribute_definitions.begin(), t.attribute_definitions.end(),
                     [](const dynamodb::AttributeDefinition& d) {
                       return d.attribute_name == attr::kLeaseKey && d.attribute_type == "S";
                     });
  }
  if (ok) return Status::Ok();
  return Status(StatusCode::kFailedPrecondition,
                "table " + options_.table_name + " exists with key schema " +
                    describe_key_schema(t) +
                    ", but a lease table has the single hash key leaseKey (S); nothing was "
                    "written to it. Use another table name (LeaseConfig::table_name) or remove "
                    "that table.");
}

Status DynamoDbLeaseStore::create_table_if_not_exists() {
  const std::string& table = options_.table_name;
  auto described = client_->describe_table(table);
  if (described.ok()) {
    KCL_RETURN_IF_ERROR(verify_key_schema(*described));
    note_index(describes_owner_index(*described));
    if (described->table_status == "ACTIVE") return Status::Ok();
    if (described->table_status == "DELETING") {
      return Status(StatusCode::kFailedPrecondition,
                    "lease table " + table + " is being deleted; start again once it is gone");
    }
  } else if (described.status().code() == StatusCode::kNotFound) {
    dynamodb::CreateTableRequest request;
    request.table_name = table;
    request.key_schema = {{std::string(attr::kLeaseKey), "HASH"}};
    request.attribute_definitions = {{std::string(attr::kLeaseKey), "S"},
                                     {std::string(attr::kLeaseOwner), "S"}};
    dynamodb::GlobalSecondaryIndex by_owner;
    by_owner.index_name = std::string(kOwnerIndex);
    by_owner.key_schema = {{std::string(attr::kLeaseOwner), "HASH"},
                           {std::string(attr::kLeaseKey), "RANGE"}};
    request.global_secondary_indexes.push_back(std::move(by_owner));
    if (options_.billing_mode == BillingMode::kProvisioned) {
      request.billing_mode = "PROVISIONED";
      request.read_capacity_units = options_.read_capacity_units;
      request.write_capacity_units = options_.write_capacity_units;
    } else {
      request.billing_mode = "PAY_PER_REQUEST";
    }
    Status created = client_->create_table(request);
    // kAlreadyExists: another worker created it at the same moment; check it like any other.
    if (!created.ok() && created.code() != StatusCode::kAlreadyExists) {
      return created.with_context("creating lease table " + table + ": ");
    }
  } else {
    return described.status().with_context("describing lease table " + table + ": ");
  }
  auto active = client_->wait_until_active(table, options_.table_active_timeout);
  if (!active.ok()) return active.status().with_context("waiting for lease table " + table + ": ");
  note_index(describes_owner_index(*active));
  return verify_key_schema(*active);
}

Result<std::vector<Lease>> DynamoDbLeaseStore::list_leases() {
  auto items = client_->scan_all(options_.table_name, options_.consistent_scan);
  if (!items.ok()) return items.status();
  std::vector<Lease> out;
  out.reserve(items->size());
  LeaseScanSummary summary;
  for (const auto& item : *items) {
    if (has_entity_type(item)) uses_entity_type_.store(true);
    if (auto other = other_entity(item)) {
      ++summary.other_entities[*other];
      continue;
    }
    auto lease = lease_from_item(item);
    if (!lease.ok()) {
      summary.unreadable.push_back(lease.status().message());
      continue;
    }
    out.push_back(std::move(lease).value());
  }
  report_unreadable(summary.unreadable);
  std::lock_guard<std::mutex> lock(scan_mu_);
  last_scan_ = std::move(summary);
  return out;
}

Result<std::vector<std::string>> DynamoDbLeaseStore::owned_lease_keys(std::string_view owner) {
  const bool indexed = owner_index_.load() || owner_index_now_serves();
  auto keys = read_owned_keys(owner, indexed);
  if (!keys.ok() && indexed && keys.status().code() == StatusCode::kInvalidArgument) {
    // The index is gone (ValidationException: no such index): scan, and look again later.
    note_index(false);
    if (options_.logger && options_.logger->enabled(LogLevel::kWarn)) {
      options_.logger->log(LogLevel::kWarn, "lease table " + options_.table_name,
                           keys.status().to_string() + "; reading owned leases by a scan until " +
                               std::string(kOwnerIndex) + " serves again");
    }
    keys = read_owned_keys(owner, false);
  }
  return keys;
}

void DynamoDbLeaseStore::note_index(bool serves) {
  owner_index_.store(serves);
  std::lock_guard<std::mutex> lock(index_mu_);
  index_looked_at_ = std::chrono::steady_clock::now();
}

bool DynamoDbLeaseStore::owner_index_now_serves() {
  {
    std::lock_guard<std::mutex> lock(index_mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now - index_looked_at_ < options_.owner_index_recheck) return false;
    index_looked_at_ = now;
  }
  auto described = client_->describe_table(options_.table_name);
  if (!described.ok() || !describes_owner_index(*described)) return false;
  owner_index_.store(true);
  return true;
}

Result<std::vector<std::string>> DynamoDbLeaseStore::read_owned_keys(std::string_view owner,
                                                                     bool indexed) {
  Expression match;
  match.expression = "#o = :o";
  match.names["#o"] = std::string(attr::kLeaseOwner);
  match.values[":o"] = AttributeValue::S(std::string(owner));
  if (!indexed) {
    match.names["#k"] = std::string(attr::kLeaseKey);
  }
  std::vector<std::string> keys;
  std::optional<dynamodb::Item> start;
  do {
    auto page = indexed ? client_->query_page(options_.table_name, kOwnerIndex, match, start)
                        : client_->scan_page_filtered(options_.table_name, start, match, "#k, #o");
    if (!page.ok()) {
      return page.status().with_context(
          indexed ? "querying the leases of " + std::string(owner) + " by index: "
                  : "scanning for the leases of " + std::string(owner) + ": ");
    }
    collect_lease_keys(page->items, keys);
    if (page->last_evaluated_key && start && *page->last_evaluated_key == *start) {
      return Status(StatusCode::kInternal, "reading the leases of " + std::string(owner) +
                                               ": LastEvaluatedKey repeats the start key");
    }
    start = std::move(page->last_evaluated_key);
  } while (start);
  std::sort(keys.begin(), keys.end());
  return keys;
}

void DynamoDbLeaseStore::report_unreadable(const std::vector<std::string>& unreadable) {
  auto line = unreadable_.read(unreadable);
  if (line && options_.logger && options_.logger->enabled(line->level)) {
    options_.logger->log(line->level, "lease table " + options_.table_name, line->text);
  }
}

LeaseScanSummary DynamoDbLeaseStore::last_scan() const {
  std::lock_guard<std::mutex> lock(scan_mu_);
  return last_scan_;
}

Result<bool> DynamoDbLeaseStore::uses_entity_types() {
  if (uses_entity_type_.load()) return true;
  Expression filter;
  filter.expression = "attribute_exists(#et)";
  filter.names["#et"] = std::string(attr::kEntityType);
  std::optional<dynamodb::Item> start;
  do {
    auto page = client_->scan_page_filtered(options_.table_name, start, filter, "#et");
    if (!page.ok()) return page.status().with_context("looking for entityType items: ");
    if (!page->items.empty()) {
      uses_entity_type_.store(true);
      return true;
    }
    start = std::move(page->last_evaluated_key);
  } while (start);
  return false;
}

Result<std::optional<Lease>> DynamoDbLeaseStore::get_lease(std::string_view lease_key) {
  auto item = client_->get_item(options_.table_name, lease_key_item(lease_key), true);
  if (!item.ok()) return item.status();
  if (!item->has_value()) return std::optional<Lease>();
  if (other_entity(**item)) return std::optional<Lease>();  // not a lease
  auto lease = lease_from_item(**item);
  if (!lease.ok()) return lease.status();
  return std::optional<Lease>(std::move(lease).value());
}

Status DynamoDbLeaseStore::create_lease_if_not_exists(const Lease& lease) {
  Lease sorted = lease;
  std::sort(sorted.parent_shard_ids.begin(), sorted.parent_shard_ids.end());
  std::sort(sorted.child_shard_ids.begin(), sorted.child_shard_ids.end());
  Expression condition;
  condition.expression = "attribute_not_exists(#k)";
  condition.names["#k"] = std::string(attr::kLeaseKey);
  auto written = client_->put_item(options_.table_name,
                                   lease_to_item(sorted, uses_entity_type_.load()), condition);
  if (written.ok()) return Status::Ok();
  if (written.status().code() == StatusCode::kConditionFailed) {
    return Status(StatusCode::kAlreadyExists, "lease " + lease.lease_key + " already exists");
  }
  return written.status();
}

Result<Lease> DynamoDbLeaseStore::conditional_update(std::string_view operation,
                                                     const Lease& expected, Expression update,
                                                     Lease locally_expected,
                                                     dynamodb::DynamoDbClient* through) {
  return write_update(operation, expected.lease_key, std::move(update), fence(expected),
                      std::move(locally_expected), through);
}

Result<Lease> DynamoDbLeaseStore::write_update(std::string_view operation,
                                               std::string_view lease_key, Expression update,
                                               const Expression& condition, Lease locally_expected,
                                               dynamodb::DynamoDbClient* through) {
  dynamodb::DynamoDbClient& client = through != nullptr ? *through : *client_;
  auto written = client.update_item(options_.table_name, lease_key_item(lease_key), update,
                                    condition, dynamodb::ReturnValues::kAllNew);
  if (!written.ok()) {
    return written.status().with_context(std::string(operation) + " of lease " +
                                         std::string(lease_key) + ": ");
  }
  if (!written->attributes) return locally_expected;
  auto lease = lease_from_item(*written->attributes);
  if (!lease.ok()) return lease.status();
  return std::move(lease).value();
}

Result<Lease> DynamoDbLeaseStore::take_lease(const Lease& seen, std::string_view new_owner) {
  if (new_owner.empty()) {
    return Status(StatusCode::kInvalidArgument, "take_lease: the new owner is empty");
  }
  Lease result = seen;
  result.lease_counter += 1;
  Expression u = bump(seen);
  u.names["#o"] = std::string(attr::kLeaseOwner);
  u.values[":new_owner"] = AttributeValue::S(std::string(new_owner));
  u.expression += ", #o = :new_owner";
  if (seen.lease_owner && *seen.lease_owner != new_owner) {
    // As the Java KCL: a switch from one owner to a different one.
    u.names["#s"] = std::string(attr::kOwnerSwitches);
    u.values[":one"] = AttributeValue::N(1LL);
    u.expression += " ADD #s :one";
    result.owner_switches_since_checkpoint += 1;
  }
  if (seen.checkpoint_owner) {
    u.names["#co"] = std::string(attr::kCheckpointOwner);
    u.expression += " REMOVE #co";
  }
  result.lease_owner = std::string(new_owner);
  result.checkpoint_owner.reset();
  return conditional_update("take", seen, std::move(u), std::move(result));
}

Result<Lease> DynamoDbLeaseStore::renew_lease(const Lease& held) {
  if (!held.lease_owner) {
    return Status(StatusCode::kInvalidArgument,
                  "renew_lease: lease " + held.lease_key + " has no owner to renew for");
  }
  Lease result = held;
  result.lease_counter += 1;
  return conditional_update("renew", held, bump(held), std::move(result), renew_client_.get());
}

Result<Lease> DynamoDbLeaseStore::evict_lease(const Lease& held) {
  if (!held.lease_owner) {
    return Status(StatusCode::kInvalidArgument,
                  "evict_lease: lease " + held.lease_key + " has no owner to evict");
  }
  Lease result = held;
  result.lease_counter += 1;
  Expression u = bump(held);
  if (held.checkpoint_owner) {
    // A pending handoff completes: the worker it was handed to reads from the checkpoint.
    result.checkpoint_owner.reset();
    u.names["#co"] = std::string(attr::kCheckpointOwner);
    u.expression += " REMOVE #co";
    return conditional_update("handoff", held, std::move(u), std::move(result));
  }
  result.lease_owner.reset();
  u.names["#o"] = std::string(attr::kLeaseOwner);
  u.expression += " REMOVE #o";
  return conditional_update("release", held, std::move(u), std::move(result));
}

Result<Lease> DynamoDbLeaseStore::initiate_handoff(const Lease& seen, std::string_view new_owner) {
  if (!seen.lease_owner || new_owner.empty() || *seen.lease_owner == new_owner) {
    return Status(StatusCode::kInvalidArgument, "initiate_handoff: lease " + seen.lease_key +
                                                    " needs an owner and a different new owner");
  }
  Lease result = seen;
  result.checkpoint_owner = seen.lease_owner;
  result.lease_owner = std::string(new_owner);
  Expression u;
  u.names["#o"] = std::string(attr::kLeaseOwner);
  u.names["#co"] = std::string(attr::kCheckpointOwner);
  u.values[":new_owner"] = AttributeValue::S(std::string(new_owner));
  u.values[":old_owner"] = AttributeValue::S(*seen.lease_owner);
  u.expression = "SET #o = :new_owner, #co = :old_owner";
  Expression c;
  expect_owner(c, "o", attr::kLeaseOwner, seen.lease_owner);
  expect_owner(c, "co", attr::kCheckpointOwner, std::nullopt);
  // The update and the condition share "#o" and "#co", naming the same attributes.
  return write_update("handoff start", seen.lease_key, std::move(u), c, std::move(result));
}

Result<Lease> DynamoDbLeaseStore::update_checkpoint(const Lease& held,
                                                    const CheckpointFields& fields) {
  if (!held.lease_owner) {
    return Status(StatusCode::kInvalidArgument,
                  "update_checkpoint: lease " + held.lease_key + " has no owner to write for");
  }
  Lease result = held;
  result.lease_counter += 1;
  result.checkpoint = fields.checkpoint;
  result.pending_checkpoint = fields.pending_checkpoint;
  result.pending_checkpoint_state = fields.pending_checkpoint_state;
  result.owner_switches_since_checkpoint = fields.owner_switches_since_checkpoint;

  Expression u = bump(held);
  auto set = [&](std::string_view placeholder, std::string_view name, AttributeValue value) {
    u.names["#" + std::string(placeholder)] = std::string(name);
    u.values[":" + std::string(placeholder)] = std::move(value);
    u.expression += ", #" + std::string(placeholder) + " = :" + std::string(placeholder);
  };
  set("cp", attr::kCheckpoint, AttributeValue::S(fields.checkpoint.sequence_number()));
  set("cps", attr::kCheckpointSubSequence,
      AttributeValue::N(static_cast<long long>(fields.checkpoint.sub_sequence_number())));
  set("osc", attr::kOwnerSwitches,
      AttributeValue::N(static_cast<long long>(fields.owner_switches_since_checkpoint)));
  std::vector<std::string> removes;
  if (fields.pending_checkpoint) {
    set("pcp", attr::kPendingCheckpoint,
        AttributeValue::S(fields.pending_checkpoint->sequence_number()));
    set("pcps", attr::kPendingCheckpointSubSequence,
        AttributeValue::N(
            static_cast<long long>(fields.pending_checkpoint->sub_sequence_number())));
  } else {
    u.names["#pcp"] = std::string(attr::kPendingCheckpoint);
    u.names["#pcps"] = std::string(attr::kPendingCheckpointSubSequence);
    removes.push_back("#pcp");
    removes.push_back("#pcps");
  }
  if (fields.pending_checkpoint_state) {
    set("pcst", attr::kPendingCheckpointState, AttributeValue::B(*fields.pending_checkpoint_state));
  } else {
    u.names["#pcst"] = std::string(attr::kPendingCheckpointState);
    removes.push_back("#pcst");
  }
  if (!removes.empty()) {
    u.expression += " REMOVE ";
    for (std::size_t i = 0; i < removes.size(); ++i) {
      if (i) u.expression += ", ";
      u.expression += removes[i];
    }
  }
  return conditional_update("checkpoint", held, std::move(u), std::move(result));
}

Status DynamoDbLeaseStore::update_child_shard_ids(std::string_view lease_key,
                                                  const std::vector<std::string>& child_ids) {
  Expression u;
  u.names["#ch"] = std::string(attr::kChildShardIds);
  if (child_ids.empty()) {
    u.expression = "REMOVE #ch";  // a DynamoDB set cannot be empty
  } else {
    std::vector<std::string> sorted = child_ids;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    u.expression = "SET #ch = :ch";
    u.values[":ch"] = AttributeValue::SS(std::move(sorted));
  }
  Expression condition;
  condition.expression = "attribute_exists(#k)";
  condition.names["#k"] = std::string(attr::kLeaseKey);
  auto written = client_->update_item(options_.table_name, lease_key_item(lease_key), u, condition);
  if (written.ok()) return Status::Ok();
  if (written.status().code() == StatusCode::kConditionFailed) {
    return Status(StatusCode::kNotFound, "lease " + std::string(lease_key) + " does not exist");
  }
  return written.status();
}

Status DynamoDbLeaseStore::delete_lease(std::string_view lease_key) {
  auto deleted = client_->delete_item(options_.table_name, lease_key_item(lease_key));
  return deleted.status();
}

}  // namespace kcl::leases
