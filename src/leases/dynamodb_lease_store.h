// DynamoDbLeaseStore: the lease table in DynamoDB, in the Java KCL 2.x format (see
// lease_serializer.h), with the semantics described in lease_store.h.
//
// Every write is one UpdateItem / PutItem / DeleteItem with a ConditionExpression on
// leaseCounter and leaseOwner, and ReturnValues ALL_NEW where the new lease is returned. A
// failed condition is kConditionFailed (create: kAlreadyExists); other failures keep the
// DynamoDB client's mapping (kUnavailable for throttling, 5xx and timeouts: the write may
// have been applied).
//
// Items that are not leases (the Java KCL 3.5's leader lock, migration state, worker metrics
// and stream entries: lease_serializer.h) are skipped by every read and never written. A
// lease item that cannot be read (a missing counter, a wrong type) is skipped too: the other
// leases are returned, and the store logs the unreadable ones once per change of that set
// (then at the 3rd, 10th, 100th... scan that still finds them, with the count), naming each
// item and attribute. The shard of such an item is not read until the item is fixed.
//
// Thread safety: all methods may be called from many threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/unreadable_items.h"
#include "dynamodb/dynamodb_client.h"
#include "kcl/lease_config.h"
#include "kcl/logging.h"
#include "leases/lease_store.h"

namespace kcl::leases {

struct DynamoDbLeaseStoreOptions {
  std::string table_name;
  BillingMode billing_mode = BillingMode::kPayPerRequest;
  long long read_capacity_units = 10;   // kProvisioned only
  long long write_capacity_units = 10;  // kProvisioned only
  // How long create_table_if_not_exists waits for the table to become ACTIVE.
  std::chrono::milliseconds table_active_timeout{300000};
  // Scans read eventually consistent data (half the cost), as the Java KCL does. A stale
  // scan is safe: takes are conditional, and expiry only needs the counter to stop moving.
  bool consistent_scan = false;
  // Where unreadable lease items are reported; null: nowhere (last_scan() still tells).
  std::shared_ptr<Logger> logger;
  // A lease renewal's deadline, one attempt (LeaseConfig::effective_renew_call_timeout()): a
  // stalled connection costs one renewal, not every lease held. 0: the client's own options.
  std::chrono::milliseconds renew_call_timeout{0};
  // While the table has no owner index that serves queries (none, or one a Java KCL 3.x
  // worker is still building: CREATING), how often owned_lease_keys() looks again: one
  // DescribeTable (not billed), and the index is queried from then on once it is ACTIVE.
  std::chrono::milliseconds owner_index_recheck{std::chrono::minutes(5)};

  static DynamoDbLeaseStoreOptions from_config(const LeaseConfig& config);
};

// What the last full scan found besides leases.
struct LeaseScanSummary {
  std::map<std::string, int> other_entities;  // entityType -> items (not leases)
  std::vector<std::string> unreadable;        // "<item>: attribute ... " per skipped lease
};

class DynamoDbLeaseStore final : public LeaseStore {
 public:
  DynamoDbLeaseStore(std::shared_ptr<dynamodb::DynamoDbClient> client,
                     DynamoDbLeaseStoreOptions options);
  // Table name, billing mode and the ACTIVE timeout from `config`.
  DynamoDbLeaseStore(std::shared_ptr<dynamodb::DynamoDbClient> client, const LeaseConfig& config);

  // Describes the table; creates it when missing (hash key leaseKey S, the configured billing
  // mode, and the Java KCL 3.x's index LeaseOwnerToLeaseKeyIndex: hash leaseOwner, range
  // leaseKey, keys only) and waits until ACTIVE. An existing table is used as it is: its
  // index, if it has one, is used and never changed; one without (a Java KCL 2.x table) is
  // not given one (owned_lease_keys() then scans). An existing table whose key schema is anything
  // but leaseKey (S) as the only key is kFailedPrecondition, before anything is written.
  Status create_table_if_not_exists() override;
  Result<std::vector<Lease>> list_leases() override;
  // A Query of LeaseOwnerToLeaseKeyIndex where the table has it serving (ACTIVE or UPDATING),
  // else a filtered scan (billed for every item it reads); without it, the table is looked at
  // again every owner_index_recheck, and a query answered "no such index" (it was deleted)
  // turns to the scan at once.
  Result<std::vector<std::string>> owned_lease_keys(std::string_view owner) override;
  bool has_owner_index() const override { return owner_index_.load(); }
  Result<std::optional<Lease>> get_lease(std::string_view lease_key) override;
  Status create_lease_if_not_exists(const Lease& lease) override;
  Result<Lease> take_lease(const Lease& seen, std::string_view new_owner) override;
  Result<Lease> renew_lease(const Lease& held) override;
  Result<Lease> evict_lease(const Lease& held) override;
  Result<Lease> initiate_handoff(const Lease& seen, std::string_view new_owner) override;
  Result<Lease> update_checkpoint(const Lease& held, const CheckpointFields& fields) override;
  Status update_child_shard_ids(std::string_view lease_key,
                                const std::vector<std::string>& child_shard_ids) override;
  Status delete_lease(std::string_view lease_key) override;

  // Whether the table holds items with an entityType (the Java KCL 3.5 single-table
  // layout): known from any earlier scan, else one filtered scan that stops at the first.
  Result<bool> uses_entity_types() override;

  const std::string& table_name() const { return options_.table_name; }
  LeaseScanSummary last_scan() const;

 private:
  Status verify_key_schema(const dynamodb::TableDescription& table) const;
  // Through `through` when given (renewals), else the store's client.
  Result<Lease> conditional_update(std::string_view operation, const Lease& expected,
                                   dynamodb::Expression update, Lease locally_expected,
                                   dynamodb::DynamoDbClient* through = nullptr);
  Result<Lease> write_update(std::string_view operation, std::string_view lease_key,
                             dynamodb::Expression update, const dynamodb::Expression& condition,
                             Lease locally_expected, dynamodb::DynamoDbClient* through = nullptr);
  // Logs the unreadable leases of a scan when worth it (see the header comment).
  void report_unreadable(const std::vector<std::string>& unreadable);

  std::shared_ptr<dynamodb::DynamoDbClient> client_;
  std::shared_ptr<dynamodb::DynamoDbClient> renew_client_;  // client_ with the renewal deadline
  DynamoDbLeaseStoreOptions options_;
  // Set once an item with an entityType was seen: new leases carry entityType "LEASE".
  std::atomic<bool> uses_entity_type_{false};
  // Reads the keys of `owner`'s leases, by the owner index or by a filtered scan.
  Result<std::vector<std::string>> read_owned_keys(std::string_view owner, bool indexed);
  // Whether a look at the table, when one is due, finds the owner index serving (and notes it).
  bool owner_index_now_serves();
  // What a description of the table said of the owner index, now.
  void note_index(bool serves);

  // The table has LeaseOwnerToLeaseKeyIndex, ACTIVE or UPDATING (create_table_if_not_exists,
  // then owner_index_now_serves(); false again when a query says the index is gone).
  std::atomic<bool> owner_index_{false};
  std::mutex index_mu_;  // guards the one below
  std::chrono::steady_clock::time_point index_looked_at_{};
  mutable std::mutex scan_mu_;  // guards last_scan_
  LeaseScanSummary last_scan_;
  base::UnreadableItems unreadable_{"a readable lease", "their shards are not read until fixed"};
};

}  // namespace kcl::leases
