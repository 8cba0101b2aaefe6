// The Java KCL lease item format, attribute for attribute, so that a table written by one
// can be used by the other (every layout: docs/lease-table-layouts.md):
//
//   leaseKey                            S   shard id (hash key)
//   leaseOwner                          S   absent when free
//   checkpointOwner                     S   only while a graceful handoff is pending (Java
//                                           KCL 3.x): the worker finishing with the shard
//   leaseCounter                        N
//   ownerSwitchesSinceCheckpoint        N
//   checkpoint                          S   sequence number or TRIM_HORIZON / LATEST /
//                                           AT_TIMESTAMP / SHARD_END
//   checkpointSubSequenceNumber         N
//   pendingCheckpoint                   S   absent when none
//   pendingCheckpointSubSequenceNumber  N   absent when none
//   pendingCheckpointState              B   absent when none
//   parentShardId                       SS  absent when no parents (a set cannot be empty)
//   childShardIds                       SS  absent when no children
//   startingHashKey, endingHashKey      S   decimal 128-bit numbers
//   streamName, shardId                 S   multi-stream leases only: the stream identifier
//                                           "<account>:<stream>:<epoch>" and the shard id
//   entityType                          S   Java KCL 3.5: "LEASE" on leases it created; other
//                                           values mark items that are not leases
//
// Reading is lenient where the Java KCL is: missing ownerSwitchesSinceCheckpoint /
// checkpointSubSequenceNumber read as 0, an empty pendingCheckpoint as none, a
// pendingCheckpointState that is not binary (some Java versions wrote a number there when
// creating a lease) as none, and attributes it does not know (e.g. those of newer Java KCL
// versions, such as throughputKBps) are ignored and left untouched by every write.
//
// Only leases are leases: the Java KCL 3.5 keeps its leader lock, migration state, worker
// metrics and stream entries in the lease table too, each with an entityType other than
// "LEASE" (an item without entityType is a lease, as the Java KCL reads it).
// other_entity() tells them apart; every reader skips them and no write touches them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "dynamodb/attribute_value.h"
#include "kcl/lease.h"
#include "kcl/status.h"

namespace kcl::leases {

namespace attr {
inline constexpr std::string_view kLeaseKey = "leaseKey";
inline constexpr std::string_view kLeaseOwner = "leaseOwner";
inline constexpr std::string_view kCheckpointOwner = "checkpointOwner";
inline constexpr std::string_view kLeaseCounter = "leaseCounter";
inline constexpr std::string_view kOwnerSwitches = "ownerSwitchesSinceCheckpoint";
inline constexpr std::string_view kCheckpoint = "checkpoint";
inline constexpr std::string_view kCheckpointSubSequence = "checkpointSubSequenceNumber";
inline constexpr std::string_view kPendingCheckpoint = "pendingCheckpoint";
inline constexpr std::string_view kPendingCheckpointSubSequence =
    "pendingCheckpointSubSequenceNumber";
inline constexpr std::string_view kPendingCheckpointState = "pendingCheckpointState";
inline constexpr std::string_view kParentShardId = "parentShardId";
inline constexpr std::string_view kChildShardIds = "childShardIds";
inline constexpr std::string_view kStartingHashKey = "startingHashKey";
inline constexpr std::string_view kEndingHashKey = "endingHashKey";
inline constexpr std::string_view kEntityType = "entityType";
inline constexpr std::string_view kStreamName = "streamName";
inline constexpr std::string_view kShardId = "shardId";
}  // namespace attr

// The entityType of a lease (Java KCL 3.5).
inline constexpr std::string_view kLeaseEntityType = "LEASE";

// What a lease-table item that is not a lease is: its entityType (e.g. "LEADER",
// "WORKER_METRIC_STATS"), or, for the keys the Java KCL's coordinator state uses ("Leader",
// "Migration3.0", "TableMigration3.5") without one, "coordinator state". Empty for a lease.
std::optional<std::string> other_entity(const dynamodb::Item& item);

// Whether the item carries an entityType (a table in the Java KCL 3.5 single-table layout).
bool has_entity_type(const dynamodb::Item& item);

// The full item for a new lease; with `tag_entity_type`, entityType "LEASE" too (a table in
// the 3.5 layout, whose leases the Java KCL 3.5 creates so).
dynamodb::Item lease_to_item(const Lease& lease, bool tag_entity_type = false);

// Errors: kInternal naming the item and the attribute (missing leaseKey, leaseCounter or
// checkpoint, a wrong type, a number that is not an integer, an invalid checkpoint).
Result<Lease> lease_from_item(const dynamodb::Item& item);

// The key of a lease item: {leaseKey: S}.
dynamodb::Item lease_key_item(std::string_view lease_key);

}  // namespace kcl::leases
