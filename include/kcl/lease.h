// kcl/lease.h: a lease on one shard, as stored in the lease table, and the position type used
// by checkpoints.
//
// The lease table is the Java KCL 2.x table, attribute for attribute (see ARCHITECTURE.md), so
// an application can move between the Java KCL and kcl-cpp and keep its checkpoints.
//
// Thread safety: ExtendedSequenceNumber, HashKeyRange and Lease are values; distinct objects
// may be used from any thread.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/record.h"
#include "kcl/status.h"

namespace kcl {

// A position in a shard: a Kinesis sequence number (a decimal number of up to 128 bits, kept
// as text) plus a sub-sequence number (the index of a user record inside a KPL aggregated
// record; 0 for plain records), or one of the sentinels TRIM_HORIZON, LATEST, AT_TIMESTAMP
// (the start position of a lease that has never been checkpointed) and SHARD_END (the shard
// was read to its end and fully processed).
//
// Ordering (as the Java KCL's ExtendedSequenceNumber): AT_TIMESTAMP < TRIM_HORIZON < LATEST <
// every sequence number < SHARD_END. Sequence numbers compare as numbers (leading zeros
// ignored: shorter is smaller, equal lengths compare as text), then by sub-sequence number.
class ExtendedSequenceNumber {
 public:
  enum class Kind { kAtTimestamp, kTrimHorizon, kLatest, kSequenceNumber, kShardEnd, kInvalid };

  static constexpr std::string_view kTrimHorizonText = "TRIM_HORIZON";
  static constexpr std::string_view kLatestText = "LATEST";
  static constexpr std::string_view kAtTimestampText = "AT_TIMESTAMP";
  static constexpr std::string_view kShardEndText = "SHARD_END";

  // TRIM_HORIZON: a lease that was never checkpointed starts at the oldest record.
  ExtendedSequenceNumber() : ExtendedSequenceNumber(std::string(kTrimHorizonText)) {}
  // Holds any text; kind() says whether it is a sequence number, a sentinel or invalid. Use
  // parse() to reject invalid input with a message.
  explicit ExtendedSequenceNumber(std::string sequence_number,
                                  SubSequenceNumber sub_sequence_number = 0);

  static ExtendedSequenceNumber trim_horizon() { return ExtendedSequenceNumber(); }
  static ExtendedSequenceNumber latest() {
    return ExtendedSequenceNumber(std::string(kLatestText));
  }
  static ExtendedSequenceNumber at_timestamp() {
    return ExtendedSequenceNumber(std::string(kAtTimestampText));
  }
  static ExtendedSequenceNumber shard_end() {
    return ExtendedSequenceNumber(std::string(kShardEndText));
  }

  // Accepts a string of decimal digits or a sentinel.
  // Errors: kInvalidArgument ("sequence number \"abc\" is neither digits nor a sentinel").
  static Result<ExtendedSequenceNumber> parse(std::string_view sequence_number,
                                              SubSequenceNumber sub_sequence_number = 0);

  const std::string& sequence_number() const noexcept { return sequence_number_; }
  SubSequenceNumber sub_sequence_number() const noexcept { return sub_sequence_number_; }
  Kind kind() const noexcept { return kind_; }

  bool valid() const noexcept { return kind_ != Kind::kInvalid; }
  bool is_sequence_number() const noexcept { return kind_ == Kind::kSequenceNumber; }
  bool is_sentinel() const noexcept {
    return kind_ != Kind::kSequenceNumber && kind_ != Kind::kInvalid;
  }
  bool is_shard_end() const noexcept { return kind_ == Kind::kShardEnd; }

  // Total order described above. Invalid values order before everything (callers validate
  // first; the checkpointer never writes an invalid value).
  std::strong_ordering operator<=>(const ExtendedSequenceNumber& other) const noexcept;
  bool operator==(const ExtendedSequenceNumber& other) const noexcept {
    return (*this <=> other) == std::strong_ordering::equal;
  }

  // "49590338271490256608559692538361571095921575989136588898", or with a sub-sequence
  // number "4959...8898#3"; sentinels by name.
  std::string to_string() const;

 private:
  std::string sequence_number_;
  SubSequenceNumber sub_sequence_number_ = 0;
  Kind kind_ = Kind::kInvalid;
};

// The hash key range of a shard: two decimal 128-bit numbers, kept as text.
struct HashKeyRange {
  std::string starting_hash_key;
  std::string ending_hash_key;
  bool operator==(const HashKeyRange&) const = default;
};

// One item of the lease table. Field comments name the DynamoDB attribute and its type.
struct Lease {
  // leaseKey (S): the shard id, e.g. "shardId-000000000001". The table's hash key. In a
  // multi-stream table (the Java KCL's format): "<account>:<stream>:<creation epoch>:<shard
  // id>", e.g. "123456789012:orders:1700000000:shardId-000000000001".
  std::string lease_key;
  // Multi-stream leases only (absent in a one-stream table): streamName (S), the stream
  // identifier "<account>:<stream>:<creation epoch>" (the Java KCL keeps the name for it),
  // and shardId (S). Parent and child ids stay bare shard ids of the same stream.
  std::optional<std::string> stream_identifier;
  std::optional<std::string> shard_id;
  // leaseOwner (S): the worker id that holds the lease; absent when the lease is free. While a
  // graceful handoff is pending (checkpoint_owner set) it names the worker the lease goes to.
  std::optional<std::string> lease_owner;
  // checkpointOwner (S), as the Java KCL 3.x writes it: present only while a graceful handoff
  // is pending. It names the worker still reading the shard: that worker finishes its batch,
  // checkpoints, then removes the attribute, and only then does lease_owner start reading.
  std::optional<std::string> checkpoint_owner;
  // leaseCounter (N): bumped by every write of the owner (renew, checkpoint, release) and by
  // every take. Writers fence on it: each write is conditional on the counter last seen.
  std::int64_t lease_counter = 0;
  // checkpoint (S) + checkpointSubSequenceNumber (N): where the next owner resumes.
  ExtendedSequenceNumber checkpoint;
  // pendingCheckpoint (S) + pendingCheckpointSubSequenceNumber (N): a prepared (two-phase)
  // checkpoint not yet committed; absent when none.
  std::optional<ExtendedSequenceNumber> pending_checkpoint;
  // pendingCheckpointState (B): application bytes saved with the prepared checkpoint.
  std::optional<std::string> pending_checkpoint_state;
  // ownerSwitchesSinceCheckpoint (N): how many times the lease changed hands (from one owner to
  // a different one) since the last checkpoint; reset to 0 by a checkpoint.
  std::int64_t owner_switches_since_checkpoint = 0;
  // parentShardId (SS): 0 ids (an original shard), 1 (split child) or 2 (merge child).
  // Kept sorted (a DynamoDB set has no order).
  std::vector<std::string> parent_shard_ids;
  // childShardIds (SS): the children, once the shard has been found closed. Kept sorted.
  std::vector<std::string> child_shard_ids;
  // startingHashKey (S) + endingHashKey (S).
  std::optional<HashKeyRange> hash_key_range;

  // The worker that reads the shard now: checkpoint_owner while a handoff is pending, else
  // lease_owner (the Java KCL 3.x's "actual owner").
  const std::optional<std::string>& actual_owner() const {
    return checkpoint_owner ? checkpoint_owner : lease_owner;
  }

  bool operator==(const Lease&) const = default;
};

}  // namespace kcl
