// DynamoDbLeaseStore: the lease table in DynamoDB, in the Java KCL 2.x format (see
// lease_serializer.h), with the semantics described in lease_store.h.
//
// Every write is one UpdateItem / PutItem / DeleteItem with a ConditionExpression on
// leaseCounter and leaseOwner, and ReturnValues ALL_NEW where the new lease is returned. A
// failed condition is kConditionFailed (create: kAlreadyExists); other failures keep the
// DynamoDB client's mapping (kUnavailable for throttling, 5xx and timeouts: the write may
// have been applied).
//
// Thread safety: all methods may be called from many threads at once.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "dynamodb/dynamodb_client.h"
#include "kcl/lease_config.h"
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

  static DynamoDbLeaseStoreOptions from_config(const LeaseConfig& config);
};

class DynamoDbLeaseStore final : public LeaseStore {
 public:
  DynamoDbLeaseStore(std::shared_ptr<dynamodb::DynamoDbClient> client,
                     DynamoDbLeaseStoreOptions options);
  // Table name, billing mode and the ACTIVE timeout from `config`.
  DynamoDbLeaseStore(std::shared_ptr<dynamodb::DynamoDbClient> client, const LeaseConfig& config);

  // Describes the table; creates it when missing (hash key leaseKey S, the configured billing
  // mode) and waits until ACTIVE. An existing table whose key schema is anything but
  // leaseKey (S) as the only key is kFailedPrecondition, before anything is written.
  Status create_table_if_not_exists() override;
  Result<std::vector<Lease>> list_leases() override;
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

  const std::string& table_name() const { return options_.table_name; }

 private:
  Status verify_key_schema(const dynamodb::TableDescription& table) const;
  Result<Lease> conditional_update(std::string_view operation, const Lease& expected,
                                   dynamodb::Expression update, Lease locally_expected);
  Result<Lease> write_update(std::string_view operation, std::string_view lease_key,
                             dynamodb::Expression update, const dynamodb::Expression& condition,
                             Lease locally_expected);

  std::shared_ptr<dynamodb::DynamoDbClient> client_;
  DynamoDbLeaseStoreOptions options_;
};

}  // namespace kcl::leases
