// Lineage: the parent/child relations of shards after SplitShard (one parent, two children)
// and MergeShards (two parents, one child), and the pure decisions the shard syncer and the
// shard consumer take from them. Nothing here does I/O except the LeaseStore overload of
// parents_finished.
//
// Vocabulary.
//  - listing: the shards ListShards returned (open and closed shards still within the
//    retention period). Each names its parent (split or merge) and adjacent parent (merge).
//  - root: a shard of the listing none of whose parents is in the listing.
//  - started: a lease whose checkpoint has moved past its initial sentinel (it holds a
//    sequence number or SHARD_END): its consumer has passed the parent check and read.
//  - finished: a shard whose lease holds SHARD_END, or whose lease is gone (cleaned up after
//    its children started, or never created because the shard held nothing to read).
//
// The lease creation rules (leases_to_create) are one algorithm for an empty and a
// non-empty table, so two workers that sync at once, one seeing the table empty and one
// seeing it half filled by the other, take the same decisions.
//
// Thread safety: free functions are pure; a ShardGraph is immutable after construction and
// may be read from many threads.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/initial_position.h"
#include "kcl/lease.h"
#include "kcl/status.h"
#include "kinesis/kinesis_types.h"
#include "leases/lease_store.h"

namespace kcl::shardsync {

// The parent ids a shard names (0, 1 or 2; empty ids dropped), sorted and unique.
std::vector<std::string> parent_ids(const kinesis::Shard& shard);

// The parent/child graph of a listing, optionally completed by what the leases know
// (a lease's parentShardId and childShardIds), which matters for shards that are no longer
// in the listing (trimmed) but still have leases.
class ShardGraph {
 public:
  explicit ShardGraph(const std::vector<kinesis::Shard>& listing,
                      const std::vector<Lease>& leases = {});

  // The shard as listed; nullptr when it is not in the listing.
  const kinesis::Shard* shard(std::string_view id) const;
  bool in_listing(std::string_view id) const { return shard(id) != nullptr; }

  // Parent ids: from the listing when the shard is listed, else from its lease. May name
  // shards that are in neither. Sorted.
  const std::vector<std::string>& parents(std::string_view id) const;
  // Child ids: shards of the listing and leases that name `id` as a parent, plus the
  // childShardIds of its lease. Sorted, unique.
  const std::vector<std::string>& children(std::string_view id) const;
  // Children known from the listing alone (what a closed shard's childShardIds should be).
  const std::vector<std::string>& listed_children(std::string_view id) const;
  // Every descendant (children, their children, ...), sorted.
  std::vector<std::string> descendants(std::string_view id) const;

  // The ids of the listing, parents before children (ties in shard id order).
  const std::vector<std::string>& topological_order() const { return topo_; }
  // Shards of the listing none of whose parents is in the listing, sorted.
  std::vector<std::string> roots() const;
  std::size_t size() const { return shards_.size(); }

 private:
  using Ids = std::vector<std::string>;
  std::map<std::string, kinesis::Shard, std::less<>> shards_;
  std::map<std::string, Ids, std::less<>> parents_;
  std::map<std::string, Ids, std::less<>> children_;
  std::map<std::string, Ids, std::less<>> listed_children_;
  Ids topo_;
};

// True when the lease's checkpoint has moved past its initial sentinel (a sequence number
// or SHARD_END).
bool has_started(const Lease& lease);

// Looks a lease up by key; nullptr when there is none.
using LeaseLookup = std::function<const Lease*(std::string_view lease_key)>;

// True when every parent named in lease.parent_shard_ids is finished: its lease holds
// SHARD_END, or it has no lease at all (trimmed, cleaned up, or never needed reading).
// A lease without parents is trivially true.
bool parents_finished(const Lease& lease, const LeaseLookup& lookup);
bool parents_finished(const Lease& lease, const std::vector<Lease>& leases);
// The same with each parent's lease read consistently from the store (what the shard
// consumer uses before a child starts). Errors: those of LeaseStore::get_lease.
Result<bool> parents_finished(leases::LeaseStore& store, const Lease& lease);
// The first parent lease (read consistently) that is not finished; nothing when every parent
// is. Errors: those of LeaseStore::get_lease.
Result<std::optional<Lease>> unfinished_parent(leases::LeaseStore& store, const Lease& lease);

// The leases to create so that every shard that still needs reading has one, in creation
// order (parents before children: create them in this order, and stop at the first
// failure, so that a child's lease never exists while its parent's creation is still due).
//
// For each shard of the listing without a lease, parents first:
//  1. some descendant has a lease: skip. The shard was finished and its lease cleaned up;
//     recreating it would read it again. (Or, on LATEST, it held nothing to read.)
//  2. some parent has a lease or gets one in this pass: create with TRIM_HORIZON (with
//     AT_TIMESTAMP, that sentinel, as the Java KCL does: a child that began before the time
//     holds records before it). Nothing written to a child after the time is skipped; the
//     consumer waits for the parents anyway.
//  3. otherwise no parent has a lease (a root; a shard whose parents held nothing to read on
//     LATEST; a parent's lease is removed only once every child has a started lease, so a
//     cleaned-up parent cannot leave a child without one): with LATEST, a closed shard is
//     skipped (it will hold nothing new) and an open one gets LATEST; with TRIM_HORIZON /
//     AT_TIMESTAMP the shard gets that sentinel.
// On an empty table this gives: TRIM_HORIZON / AT_TIMESTAMP: every shard with the initial
// sentinel (the descendants wait for their parents); LATEST: the open shards only, with
// LATEST.
//
// Every lease: leaseCounter 0, no owner, ownerSwitchesSinceCheckpoint 0, parentShardId =
// the shard's parent and adjacent parent (sorted), childShardIds = its children in the
// listing (when closed), the shard's hash key range.
std::vector<Lease> leases_to_create(const std::vector<kinesis::Shard>& listing,
                                    const std::vector<Lease>& existing,
                                    const InitialPosition& initial_position);

// The keys of leases that may be removed, sorted. A child "no longer needs" a parent when
// its lease has started, or when it has no lease but a descendant of it has one (it was
// finished and cleaned up itself). A lease is removed when
//  (a) its checkpoint is SHARD_END, it has at least one known child (listing, leases naming
//      it as parent, its childShardIds), and no child needs it any more; or
//  (b) `listing_complete`, its shard is not in the listing (trimmed), and no known child
//      needs it any more (a child that has no lease yet still needs it: without it the child
//      would be created at the initial position instead of TRIM_HORIZON). Only a shard older
//      than the newest listed one counts as trimmed (shard ids grow with creation): a lease
//      another worker created from a newer listing is not mistaken for a trimmed one. For
//      the same reason, take the listing after reading the leases (ShardSyncer does).
// An empty listing is never taken as complete. A lease whose SHARD_END a child still needs
// is never removed.
std::vector<std::string> leases_to_delete(const std::vector<kinesis::Shard>& listing,
                                          const std::vector<Lease>& leases, bool listing_complete);

// The children of a shard according to the listing (sorted); empty for an open shard.
std::vector<std::string> child_shard_ids(const std::vector<kinesis::Shard>& listing,
                                         std::string_view shard_id);

struct ChildIdsUpdate {
  std::string lease_key;
  std::vector<std::string> child_shard_ids;  // sorted; the union of old and listed
  bool operator==(const ChildIdsUpdate&) const = default;
};

// The childShardIds writes needed: for each lease whose shard the listing shows with
// children, when the lease's childShardIds lack some of them (the new value is the union,
// so ids learnt elsewhere, e.g. from GetRecords, are kept). Sorted by lease key.
std::vector<ChildIdsUpdate> child_shard_id_updates(const std::vector<kinesis::Shard>& listing,
                                                   const std::vector<Lease>& leases);

}  // namespace kcl::shardsync
