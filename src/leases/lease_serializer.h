// The Java KCL 2.x lease item format, attribute for attribute, so that a table written by one
// can be used by the other:
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
//
// Reading is lenient where the Java KCL is: missing ownerSwitchesSinceCheckpoint /
// checkpointSubSequenceNumber read as 0, an empty pendingCheckpoint as none, a
// pendingCheckpointState that is not binary (some Java versions wrote a number there when
// creating a lease) as none, and attributes it does not know (e.g. those of newer Java KCL
// versions) are ignored and left untouched by every write.
#pragma once

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
}  // namespace attr

// The full item for a new lease.
dynamodb::Item lease_to_item(const Lease& lease);

// Errors: kInternal naming the item and the attribute (missing leaseKey, leaseCounter or
// checkpoint, a wrong type, a number that is not an integer, an invalid checkpoint).
Result<Lease> lease_from_item(const dynamodb::Item& item);

// The key of a lease item: {leaseKey: S}.
dynamodb::Item lease_key_item(std::string_view lease_key);

}  // namespace kcl::leases
