// InMemoryLeaseStore: a LeaseStore in a map, with the same conditions and results as the
// DynamoDB store, plus what tests and simulations need: operation counts (with an estimate of
// the DynamoDB capacity units they would consume), fault injection, and direct access to the
// items.
//
// Thread safety: all methods may be called from many threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "leases/lease_store.h"

namespace kcl::leases {

// What the store was asked to do. Capacity units follow DynamoDB's rules for the estimated
// item sizes: a write consumes ceil(size / 1 KB) WCU whether or not its condition holds; a
// consistent GetItem ceil(size / 4 KB) RCU; a Scan (eventually consistent) half an RCU per
// 4 KB of items read, and one Scan call returns at most 1 MB.
struct LeaseStoreStats {
  std::int64_t scans = 0;          // list_leases calls
  std::int64_t scan_pages = 0;     // Scan requests they would take (1 MB pages)
  std::int64_t items_scanned = 0;  // items returned by scans
  std::int64_t bytes_scanned = 0;  // estimated bytes of those items
  std::int64_t gets = 0;           // get_lease calls
  std::int64_t writes = 0;         // every write call (create, take, renew, evict, checkpoint,
                                   // child ids, delete), whatever the outcome
  std::int64_t takes = 0;          // take_lease calls
  std::int64_t renews = 0;         // renew_lease calls
  std::int64_t evicts = 0;         // evict_lease calls
  std::int64_t handoffs = 0;       // initiate_handoff calls
  std::int64_t checkpoints = 0;    // update_checkpoint calls
  std::int64_t failed_conditions = 0;
  std::int64_t owner_changes = 0;  // successful takes that changed the owner
  std::int64_t queries = 0;        // owned_lease_keys calls (a Query of the owner index)
  // Writes of the owner index (LeaseOwnerToLeaseKeyIndex): DynamoDB writes an index item
  // whenever leaseOwner is set, changed (a delete and a put: two) or removed; each is billed
  // as a write unit of the table (included in write_units).
  std::int64_t index_writes = 0;
  std::int64_t injected_faults = 0;
  double read_units = 0;   // estimated RCU
  double write_units = 0;  // estimated WCU

  // Requests DynamoDB would receive: scan pages + queries + gets + writes.
  std::int64_t requests() const { return scan_pages + queries + gets + writes; }
};

// DynamoDB's size of a lease item in bytes (attribute names plus values), as the serializer
// would write it.
std::size_t estimated_item_size(const Lease& lease);

class InMemoryLeaseStore final : public LeaseStore {
 public:
  InMemoryLeaseStore() = default;

  Status create_table_if_not_exists() override;
  Result<std::vector<Lease>> list_leases() override;
  // Counted as a Query of the owner index (keys only): half a read unit per 4 KB of the
  // index items it returns, at least half a unit.
  Result<std::vector<std::string>> owned_lease_keys(std::string_view owner) override;
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

  // --- tests and simulations ---

  LeaseStoreStats stats() const;
  void reset_stats();

  // The next `calls` calls of any LeaseStore method fail with `code`. With `after_apply`, a
  // write is applied before it fails (a timeout after DynamoDB did the work: the caller
  // cannot tell whether it happened). Replaces any fault still pending.
  void fail_next(int calls, StatusCode code = StatusCode::kUnavailable, bool after_apply = false);

  // Writes an item as it is, unconditionally (another writer, or a hand-made table).
  void put(const Lease& lease);
  // The item as stored, without counting a read.
  std::optional<Lease> peek(std::string_view lease_key) const;
  // Every item, in key order, without counting a read.
  std::vector<Lease> snapshot() const;
  std::size_t size() const;

 private:
  struct Fault {
    int remaining = 0;
    StatusCode code = StatusCode::kUnavailable;
    bool after_apply = false;
  };
  enum class FaultPoint { kNone, kBefore, kAfter };
  FaultPoint take_fault_locked(bool is_write);
  Status fault_status_locked(std::string_view operation) const;
  Status condition_failed(std::string_view operation, std::string_view key, std::string_view why);
  void count_write_locked(const Lease* item);
  // The owner index's writes when leaseOwner goes from `before` to `after`.
  void count_index_write_locked(const std::optional<std::string>& before,
                                const std::optional<std::string>& after);
  template <typename Mutate>
  Result<Lease> conditional_update(std::string_view operation, const Lease& expected,
                                   bool require_owner_match, Mutate mutate);

  mutable std::mutex mu_;
  std::map<std::string, Lease, std::less<>> items_;
  LeaseStoreStats stats_;
  Fault fault_;
};

}  // namespace kcl::leases
