// LeaseStore: the lease table, as the operations the lease logic needs. Two implementations
// with identical semantics: DynamoDbLeaseStore (the real table) and InMemoryLeaseStore
// (deterministic tests and simulations).
//
// Every write that changes who holds a lease, or writes on behalf of its holder, is
// conditional on the leaseCounter, leaseOwner and checkpointOwner the writer last saw (an
// absent owner as absent), and bumps the counter. The one exception is initiate_handoff,
// which (as the Java KCL 3.x) is conditional on the owners only and leaves the counter alone.
// A failed condition is the expected outcome kConditionFailed: someone else wrote first
// (re-read and decide). Other failures keep their meaning: kUnavailable (throttled, timeout,
// unreachable: the write may or may not have been applied; retry later), kNotFound (no table),
// kInternal (an item that is not a lease).
//
// Counter semantics (the Java KCL's): take, renew, release and checkpoint updates all set
// leaseCounter to the expected value + 1. A checkpoint write therefore also counts as a
// renewal, and the holder must remember the counter it wrote (HeldLeases does).
//
// Thread safety: implementations are safe to call from many threads at once.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/lease.h"
#include "kcl/status.h"

namespace kcl::leases {

// The checkpoint part of a lease, as written by update_checkpoint (all fields are written:
// an absent pending checkpoint / state removes the attribute).
struct CheckpointFields {
  ExtendedSequenceNumber checkpoint;
  std::optional<ExtendedSequenceNumber> pending_checkpoint;
  std::optional<std::string> pending_checkpoint_state;
  std::int64_t owner_switches_since_checkpoint = 0;
};

class LeaseStore {
 public:
  virtual ~LeaseStore() = default;

  // Creates the table if it does not exist (hash key leaseKey, type S) and waits until it is
  // ACTIVE. An existing table with any other key schema is kFailedPrecondition, and nothing
  // is written to it.
  virtual Status create_table_if_not_exists() = 0;

  // Every lease in the table (a full scan; may lag recent writes by a moment in DynamoDB).
  virtual Result<std::vector<Lease>> list_leases() = 0;

  // The keys of the leases whose leaseOwner is `owner`, sorted: how a worker finds the
  // leases the table gives it. May lag recent writes by a moment (DynamoDB: a Query of the
  // lease table's LeaseOwnerToLeaseKeyIndex where it has one, else a filtered scan). This
  // default filters list_leases().
  virtual Result<std::vector<std::string>> owned_lease_keys(std::string_view owner) {
    auto all = list_leases();
    if (!all.ok()) return all.status();
    std::vector<std::string> keys;
    for (const Lease& l : *all) {
      if (l.lease_owner && *l.lease_owner == owner) keys.push_back(l.lease_key);
    }
    std::sort(keys.begin(), keys.end());
    return keys;
  }
  // Whether owned_lease_keys() reads an index (a few small items) rather than the whole
  // table: a worker looks for its leases more often when it is cheap.
  virtual bool has_owner_index() const { return true; }

  // One lease, read consistently; an empty optional when there is no such lease.
  virtual Result<std::optional<Lease>> get_lease(std::string_view lease_key) = 0;

  // Writes `lease` as a new item. kAlreadyExists when an item with that key exists (the
  // existing item is left as it was).
  virtual Status create_lease_if_not_exists(const Lease& lease) = 0;

  // Makes `new_owner` the owner: conditional on the counter and owners of `seen`; bumps the
  // counter; removes checkpointOwner (a pending handoff ends: the new owner reads from the
  // checkpoint); adds 1 to ownerSwitchesSinceCheckpoint when the lease had a different owner.
  // Returns the lease as written.
  virtual Result<Lease> take_lease(const Lease& seen, std::string_view new_owner) = 0;

  // Bumps the counter, conditional on the counter and owner of `held`. Returns the lease as
  // written.
  virtual Result<Lease> renew_lease(const Lease& held) = 0;

  // Hands a lease back, conditional on the counter and owners of `held`, and bumps the
  // counter. Without a pending handoff the owner is removed (the lease is free); with one,
  // only checkpointOwner is removed, which completes the handoff: leaseOwner (the worker the
  // lease was handed to) may start reading from the checkpoint. Returns the lease as written.
  virtual Result<Lease> evict_lease(const Lease& held) = 0;

  // Starts a graceful handoff (the Java KCL 3.x's representation): leaseOwner := `new_owner`,
  // checkpointOwner := the owner of `seen`. Conditional on leaseOwner being the owner of
  // `seen` and on no handoff being pending; the counter is left alone, so the current owner's
  // next write re-reads the lease and learns of the handoff. Returns the lease as written.
  virtual Result<Lease> initiate_handoff(const Lease& seen, std::string_view new_owner) = 0;

  // Writes the checkpoint fields and bumps the counter, conditional on the counter and owner
  // of `held`. Returns the lease as written.
  virtual Result<Lease> update_checkpoint(const Lease& held, const CheckpointFields& fields) = 0;

  // Sets childShardIds (sorted) on an existing lease, without touching the counter (the
  // shard syncer of any worker may do this while another worker holds the lease).
  // kNotFound when the lease does not exist.
  virtual Status update_child_shard_ids(std::string_view lease_key,
                                        const std::vector<std::string>& child_shard_ids) = 0;

  // Deletes a lease (unconditionally). Deleting a lease that does not exist is not an error.
  virtual Status delete_lease(std::string_view lease_key) = 0;

  // Whether the table also holds items that are not leases, tagged by an entityType (the Java
  // KCL 3.5 single-table layout). A store that holds only leases answers false.
  virtual Result<bool> uses_entity_types() { return false; }
};

}  // namespace kcl::leases
