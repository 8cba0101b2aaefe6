#include "coordination/dynamodb_coordination_store.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "base/status_macros.h"
#include "coordination/lease_load_text.h"

namespace kcl::coordination {
namespace {

using dynamodb::AttributeValue;
using dynamodb::Expression;
using dynamodb::Item;
using Type = AttributeValue::Type;

constexpr std::string_view kKey = "key";
constexpr std::string_view kLeaderKey = "kcl-cpp/leader";
constexpr std::string_view kWorkerPrefix = "kcl-cpp/worker/";
constexpr std::size_t kMaxTableName = 255;

std::string worker_key(std::string_view worker_id) {
  return std::string(kWorkerPrefix) + std::string(worker_id);
}

Item key_item(std::string_view key) {
  Item k;
  k.emplace(std::string(kKey), AttributeValue::S(std::string(key)));
  return k;
}

Status bad(std::string_view key, std::string_view attribute, const std::string& what) {
  return Status(StatusCode::kInternal, "coordination table entry " + std::string(key) +
                                           ": attribute " + std::string(attribute) + " " + what);
}

Result<std::optional<std::string>> get_s(const Item& item, std::string_view key,
                                         std::string_view name) {
  auto it = item.find(std::string(name));
  if (it == item.end()) return std::optional<std::string>();
  if (it->second.type() != Type::kS) return bad(key, name, "is not a string");
  return std::optional<std::string>(it->second.s());
}

Result<std::int64_t> get_n(const Item& item, std::string_view key, std::string_view name) {
  auto it = item.find(std::string(name));
  if (it == item.end()) return std::int64_t{0};
  if (it->second.type() != Type::kN) return bad(key, name, "is not a number");
  const std::string& text = it->second.s();
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return bad(key, name, "is \"" + text + "\", not a 64-bit integer");
  }
  return v;
}

// A worker entry. Its identity (workerId, incarnation, heartbeat) must be readable; what it
// reports beside (leaseCount, statusUrl, its load, draining) is read where it can be, and
// what cannot be read is left at its default and named in `unreadable` (an entry written by
// another version of kcl-cpp still counts as a live worker).
Result<WorkerEntry> worker_from_item(const Item& item, std::string_view key,
                                     std::vector<std::string>& unreadable) {
  WorkerEntry w;
  KCL_ASSIGN_OR_RETURN(auto id, get_s(item, key, "workerId"));
  KCL_ASSIGN_OR_RETURN(auto inc, get_s(item, key, "incarnation"));
  if (!id || !inc) return bad(key, id ? "incarnation" : "workerId", "is missing");
  w.worker_id = std::move(*id);
  w.incarnation = std::move(*inc);
  KCL_ASSIGN_OR_RETURN(w.heartbeat, get_n(item, key, "heartbeat"));
  auto advisory = [&](const Status& s) {
    if (!s.ok()) unreadable.push_back(s.message());
  };
  auto count = get_n(item, key, "leaseCount");
  advisory(count.status());
  if (count.ok()) w.lease_count = *count;
  auto url = get_s(item, key, "statusUrl");
  advisory(url.status());
  if (url.ok()) w.status_url = url->value_or("");
  if (auto it = item.find("leaseLoad"); it != item.end()) {
    if (it->second.type() != Type::kS) {
      advisory(bad(key, "leaseLoad", "is not a string"));
    } else if (auto load = decode_lease_load(it->second.s()); load.ok()) {
      w.lease_kbps = std::move(*load);
    } else {
      advisory(bad(key, "leaseLoad", load.status().message()));
    }
  } else if (auto old = item.find("leaseKbps"); old != item.end()) {
    // As written before leaseLoad (a map of lease key -> KB/s).
    if (old->second.type() != Type::kM) {
      advisory(bad(key, "leaseKbps", "is not a map"));
    } else {
      for (const auto& [lease, v] : old->second.m()) {
        if (v.type() == Type::kN) w.lease_kbps[lease] = std::strtod(v.s().c_str(), nullptr);
      }
    }
  }
  if (auto it = item.find("draining"); it != item.end()) {
    if (it->second.type() == Type::kBool) {
      w.draining = it->second.boolean();
    } else {
      advisory(bad(key, "draining", "is not a boolean"));
    }
  }
  return w;
}

Result<LeaderEntry> leader_from_item(const Item& item) {
  LeaderEntry l;
  KCL_ASSIGN_OR_RETURN(l.owner, get_s(item, kLeaderKey, "ownerName"));
  KCL_ASSIGN_OR_RETURN(auto inc, get_s(item, kLeaderKey, "ownerIncarnation"));
  l.owner_incarnation = inc.value_or("");
  KCL_ASSIGN_OR_RETURN(l.counter, get_n(item, kLeaderKey, "leaderCounter"));
  KCL_ASSIGN_OR_RETURN(l.leases_version, get_n(item, kLeaderKey, "leasesVersion"));
  KCL_ASSIGN_OR_RETURN(l.attention, get_n(item, kLeaderKey, "attention"));
  return l;
}

// "incarnation = :inc" (and "heartbeat = :hb" when `with_heartbeat`).
Expression same_incarnation(const WorkerEntry& w, bool with_heartbeat) {
  Expression c;
  c.names["#inc"] = "incarnation";
  c.values[":inc"] = AttributeValue::S(w.incarnation);
  c.expression = "#inc = :inc";
  if (with_heartbeat) {
    c.names["#hb"] = "heartbeat";
    c.values[":hb"] = AttributeValue::N(static_cast<long long>(w.heartbeat));
    c.expression += " AND #hb = :hb";
  }
  return c;
}

// "ownerName = :own AND ownerIncarnation = :oi": the holder's own writes (renew, release),
// whatever the counter (its renewals whose answers were lost moved it).
Expression same_holder(const LeaderEntry& l) {
  Expression c;
  c.names["#own"] = "ownerName";
  c.names["#oi"] = "ownerIncarnation";
  c.values[":own"] = AttributeValue::S(l.owner.value_or(""));
  c.values[":oi"] = AttributeValue::S(l.owner_incarnation);
  c.expression = "#own = :own AND #oi = :oi";
  return c;
}

Expression same_leader(const LeaderEntry& l) {
  Expression c;
  c.names["#lc"] = "leaderCounter";
  c.names["#own"] = "ownerName";
  c.values[":lc"] = AttributeValue::N(static_cast<long long>(l.counter));
  if (l.counter == 0) {
    // Created by note_leases_changed: no counter yet.
    c.expression = "(attribute_not_exists(#lc) OR #lc = :lc)";
  } else {
    c.expression = "#lc = :lc";
  }
  if (l.owner) {
    c.values[":own"] = AttributeValue::S(*l.owner);
    c.expression += " AND #own = :own";
  } else {
    c.expression += " AND attribute_not_exists(#own)";
  }
  return c;
}

}  // namespace

DynamoDbCoordinationStore::DynamoDbCoordinationStore(
    std::shared_ptr<dynamodb::DynamoDbClient> client, const LeaseConfig& config,
    LayoutProbe single_table_probe, Logger* logger)
    : client_(std::move(client)),
      table_(config.effective_coordinator_table_name()),
      config_(config),
      single_table_probe_(std::move(single_table_probe)),
      logger_(logger) {
  aws::CallOptions renew;
  renew.max_attempts = 1;
  renew.request_timeout = config.effective_renew_call_timeout();
  renew.deadline = renew.request_timeout;
  renew_client_ = client_->with_call_options(renew);
}

Status DynamoDbCoordinationStore::resolve_table() {
  if (resolved_ || !config_.coordinator_table_name.empty()) {
    resolved_ = true;
    return Status::Ok();
  }
  auto exists = [&](const std::string& name) -> Result<bool> {
    auto described = client_->describe_table(name);
    if (described.ok()) return true;
    if (described.status().code() == StatusCode::kNotFound) return false;
    return described.status().with_context("describing table " + name + ": ");
  };
  const std::string own = config_.effective_table_name() + "-KclCppCoordinatorState";
  const std::string shared = config_.effective_coordinator_table_name();
  // kcl-cpp's own name is looked for first. A name past DynamoDB's 255 characters cannot
  // exist; a role allowed only the tables the Java KCL 3.x documents (the lease table and
  // "-CoordinatorState") may not describe it: both are taken as absent.
  bool own_exists = false;
  if (own.size() <= kMaxTableName) {
    auto found = exists(own);
    if (found.ok()) {
      own_exists = *found;
    } else if (found.status().code() != StatusCode::kPermissionDenied) {
      return found.status();
    } else if (logger_ && logger_->enabled(LogLevel::kInfo)) {
      logger_->log(LogLevel::kInfo, "coordination table",
                   "not allowed to describe " + own + " (" + found.status().message() +
                       "): looking for " + shared);
    }
  }
  bool use_own = own_exists;
  if (!use_own) {
    KCL_ASSIGN_OR_RETURN(bool shared_exists, exists(shared));
    if (!shared_exists && single_table_probe_) {
      KCL_ASSIGN_OR_RETURN(use_own, single_table_probe_());
    }
  }
  if (use_own && own.size() > kMaxTableName) {
    return Status(StatusCode::kInvalidArgument,
                  "the coordination table's name " + own +
                      " is longer than DynamoDB's 255 "
                      "characters; set LeaseConfig::coordinator_table_name");
  }
  table_ = use_own ? own : shared;
  resolved_ = true;
  return Status::Ok();
}

Status DynamoDbCoordinationStore::create_table_if_not_exists() {
  KCL_RETURN_IF_ERROR(resolve_table());
  auto verify = [&](const dynamodb::TableDescription& t) -> Status {
    const bool ok = t.key_schema.size() == 1 && t.key_schema[0].attribute_name == kKey &&
                    t.key_schema[0].key_type == "HASH";
    if (ok) return Status::Ok();
    return Status(StatusCode::kFailedPrecondition,
                  "table " + table_ +
                      " exists, but not with the single hash key \"key\" (S) of a coordination "
                      "table; set LeaseConfig::coordinator_table_name to another name");
  };
  auto described = client_->describe_table(table_);
  if (described.ok()) {
    KCL_RETURN_IF_ERROR(verify(*described));
    if (described->table_status == "ACTIVE") return Status::Ok();
  } else if (described.status().code() == StatusCode::kNotFound) {
    dynamodb::CreateTableRequest request;
    request.table_name = table_;
    request.key_schema = {{std::string(kKey), "HASH"}};
    request.attribute_definitions = {{std::string(kKey), "S"}};
    if (config_.billing_mode == BillingMode::kProvisioned) {
      request.billing_mode = "PROVISIONED";
      request.read_capacity_units = config_.read_capacity_units;
      request.write_capacity_units = config_.write_capacity_units;
    }
    Status created = client_->create_table(request);
    if (!created.ok() && created.code() != StatusCode::kAlreadyExists) {
      return created.with_context("creating coordination table " + table_ + ": ");
    }
  } else {
    return described.status().with_context("describing coordination table " + table_ + ": ");
  }
  auto active = client_->wait_until_active(table_, config_.table_active_timeout);
  if (!active.ok()) {
    return active.status().with_context("waiting for coordination table " + table_ + ": ");
  }
  return verify(*active);
}

Result<CoordinationView> DynamoDbCoordinationStore::read_all(Consistency consistency) {
  KCL_ASSIGN_OR_RETURN(auto items, client_->scan_all(table_, consistency == Consistency::kStrong));
  CoordinationView v;
  std::vector<std::string> unreadable;
  for (const Item& item : items) {
    auto k = item.find(std::string(kKey));
    if (k == item.end() || k->second.type() != Type::kS) continue;
    const std::string& key = k->second.s();
    if (key == kLeaderKey) {
      KCL_ASSIGN_OR_RETURN(auto l, leader_from_item(item));
      v.leader = std::move(l);
    } else if (key.rfind(kWorkerPrefix, 0) == 0) {
      // An entry whose identity cannot be read is skipped (its worker is as absent; it
      // writes the entry anew when it registers again); the rest of the fleet goes on.
      auto w = worker_from_item(item, key, unreadable);
      if (w.ok()) {
        v.workers.push_back(std::move(*w));
      } else {
        unreadable.push_back(w.status().message() + " (the entry is skipped)");
      }
    }  // entries of others (the Java KCL's) are not ours
  }
  std::sort(unreadable.begin(), unreadable.end());  // a stable order: the scan's is not
  if (auto line = unreadable_.read(unreadable); line && logger_ && logger_->enabled(line->level)) {
    logger_->log(line->level, "coordination table " + table_, line->text);
  }
  std::sort(v.workers.begin(), v.workers.end(),
            [](const WorkerEntry& a, const WorkerEntry& b) { return a.worker_id < b.worker_id; });
  return v;
}

Result<std::optional<LeaderEntry>> DynamoDbCoordinationStore::read_leader(Consistency consistency) {
  KCL_ASSIGN_OR_RETURN(auto leader, client_->get_item(table_, key_item(kLeaderKey),
                                                      consistency == Consistency::kStrong));
  if (!leader) return std::optional<LeaderEntry>();
  KCL_ASSIGN_OR_RETURN(auto l, leader_from_item(*leader));
  return std::optional<LeaderEntry>(std::move(l));
}

Result<WorkerEntry> DynamoDbCoordinationStore::register_worker(const WorkerEntry& entry) {
  Item item = key_item(worker_key(entry.worker_id));
  item.emplace("workerId", AttributeValue::S(entry.worker_id));
  item.emplace("incarnation", AttributeValue::S(entry.incarnation));
  item.emplace("heartbeat", AttributeValue::N(0LL));
  item.emplace("leaseCount", AttributeValue::N(static_cast<long long>(entry.lease_count)));
  if (!entry.status_url.empty()) item.emplace("statusUrl", AttributeValue::S(entry.status_url));
  // A worker stopping that registers again (fenced during its stop) stays one to assign
  // nothing to.
  if (entry.draining) item.emplace("draining", AttributeValue::Bool(true));
  Expression not_yet;
  not_yet.names["#inc"] = "incarnation";
  not_yet.values[":inc"] = AttributeValue::S(entry.incarnation);
  not_yet.expression = "attribute_not_exists(#inc) OR #inc <> :inc";
  auto written = client_->put_item(table_, item, not_yet);
  if (!written.ok()) return written.status().with_context("registering worker: ");
  WorkerEntry fresh;
  fresh.worker_id = entry.worker_id;
  fresh.incarnation = entry.incarnation;
  fresh.lease_count = entry.lease_count;
  fresh.status_url = entry.status_url;
  fresh.draining = entry.draining;
  return fresh;
}

Result<dynamodb::WriteResult> DynamoDbCoordinationStore::update(std::string_view what,
                                                                const std::string& key,
                                                                Expression update,
                                                                const Expression& condition,
                                                                bool return_new) {
  dynamodb::DynamoDbClient& c = return_new ? *renew_client_ : *client_;
  auto written =
      c.update_item(table_, key_item(key), update, condition,
                    return_new ? dynamodb::ReturnValues::kAllNew : dynamodb::ReturnValues::kNone);
  if (!written.ok()) return written.status().with_context(std::string(what) + ": ");
  return written;
}

Result<WorkerEntry> DynamoDbCoordinationStore::heartbeat(const WorkerEntry& held,
                                                         const WorkerEntry& report) {
  Expression u;
  u.names["#hb"] = "heartbeat";
  u.names["#lc"] = "leaseCount";
  u.names["#dr"] = "draining";
  u.names["#old"] = "leaseKbps";   // the earlier form of leaseLoad
  u.names["#dg"] = "leaseDigest";  // written by earlier versions; no longer kept
  u.values[":one"] = AttributeValue::N(1LL);
  u.values[":count"] = AttributeValue::N(static_cast<long long>(report.lease_count));
  u.values[":dr"] = AttributeValue::Bool(report.draining);
  u.expression = "SET #lc = :count, #dr = :dr";
  std::string remove = " REMOVE #old, #dg";
  u.names["#ll"] = "leaseLoad";
  if (report.lease_kbps.empty()) {
    remove += ", #ll";
  } else {
    u.values[":ll"] = AttributeValue::S(encode_lease_load(report.lease_kbps));
    u.expression += ", #ll = :ll";
  }
  u.expression += remove + " ADD #hb :one";
  const std::string key = worker_key(held.worker_id);
  KCL_ASSIGN_OR_RETURN(auto written, update("heartbeat of worker " + held.worker_id, key,
                                            std::move(u), same_incarnation(held, false), true));
  if (!written.attributes) {
    WorkerEntry w = held;
    w.heartbeat += 1;
    w.lease_count = report.lease_count;
    w.draining = report.draining;
    w.lease_kbps = report.lease_kbps;
    return w;
  }
  std::vector<std::string> unread;  // the heartbeat wrote what it reports itself
  return worker_from_item(*written.attributes, key, unread);
}

Status DynamoDbCoordinationStore::fence_worker(const WorkerEntry& seen) {
  auto deleted = client_->delete_item(table_, key_item(worker_key(seen.worker_id)),
                                      same_incarnation(seen, true));
  return deleted.ok() ? Status::Ok()
                      : deleted.status().with_context("fencing worker " + seen.worker_id + ": ");
}

Status DynamoDbCoordinationStore::deregister_worker(const WorkerEntry& held) {
  auto deleted = client_->delete_item(table_, key_item(worker_key(held.worker_id)),
                                      same_incarnation(held, false));
  return deleted.ok()
             ? Status::Ok()
             : deleted.status().with_context("deregistering worker " + held.worker_id + ": ");
}

Result<LeaderEntry> DynamoDbCoordinationStore::acquire_leadership(
    const std::optional<LeaderEntry>& seen, std::string_view worker_id,
    std::string_view incarnation) {
  LeaderEntry next = seen.value_or(LeaderEntry{});
  next.owner = std::string(worker_id);
  next.owner_incarnation = std::string(incarnation);
  next.counter += 1;
  Expression u;
  u.names["#lc"] = "leaderCounter";
  u.names["#own"] = "ownerName";
  u.names["#oi"] = "ownerIncarnation";
  u.values[":next"] = AttributeValue::N(static_cast<long long>(next.counter));
  u.values[":me"] = AttributeValue::S(std::string(worker_id));
  u.values[":inc"] = AttributeValue::S(std::string(incarnation));
  u.expression = "SET #lc = :next, #own = :me, #oi = :inc";
  Expression c;
  if (seen) {
    c = same_leader(*seen);
  } else {
    c.names["#k"] = std::string(kKey);
    c.expression = "attribute_not_exists(#k)";
  }
  KCL_ASSIGN_OR_RETURN(auto written, update("taking the leader lock", std::string(kLeaderKey),
                                            std::move(u), c, true));
  if (!written.attributes) return next;
  return leader_from_item(*written.attributes);
}

Result<LeaderEntry> DynamoDbCoordinationStore::renew_lock(const LeaderEntry& held, bool attention) {
  Expression u;
  u.names["#lc"] = "leaderCounter";
  u.values[":one"] = AttributeValue::N(1LL);
  u.expression = "ADD #lc :one";
  if (attention) {
    u.names["#at"] = "attention";
    u.expression += ", #at :one";
  }
  KCL_ASSIGN_OR_RETURN(
      auto written,
      update(attention ? "calling the workers' attention" : "renewing the leader lock",
             std::string(kLeaderKey), std::move(u), same_holder(held), true));
  if (!written.attributes) {
    LeaderEntry l = held;
    l.counter += 1;
    if (attention) l.attention += 1;
    return l;
  }
  return leader_from_item(*written.attributes);
}

Result<LeaderEntry> DynamoDbCoordinationStore::renew_leadership(const LeaderEntry& held) {
  return renew_lock(held, false);
}

Result<LeaderEntry> DynamoDbCoordinationStore::call_attention(const LeaderEntry& held) {
  return renew_lock(held, true);
}

Status DynamoDbCoordinationStore::release_leadership(const LeaderEntry& held) {
  Expression u;
  u.names["#lc"] = "leaderCounter";
  u.names["#own"] = "ownerName";
  u.names["#oi"] = "ownerIncarnation";
  u.values[":one"] = AttributeValue::N(1LL);
  u.expression = "ADD #lc :one REMOVE #own, #oi";
  return update("releasing the leader lock", std::string(kLeaderKey), std::move(u),
                same_holder(held), false)
      .status();
}

Status DynamoDbCoordinationStore::note_leases_changed() {
  Expression u;
  u.names["#lv"] = "leasesVersion";
  u.values[":one"] = AttributeValue::N(1LL);
  u.expression = "ADD #lv :one";
  return update("noting a lease table change", std::string(kLeaderKey), std::move(u), {}, false)
      .status();
}

}  // namespace kcl::coordination
