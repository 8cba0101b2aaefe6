// ShardCheckpointer: the checkpoints of one shard held by this worker.
//
// The shard consumer tells it how far records were delivered to the processor
// (records_delivered) and when the shard was read to its end (shard_ended); the processor asks
// it to checkpoint. It validates, then writes through HeldLeases::update_checkpoint,
// which fences the write on this worker's ownership and counter (see leases/held_leases.h).
//
// Rules (as the Java KCL):
//  - checkpoint() writes at the last record delivered, or SHARD_END once the shard ended.
//  - checkpoint(position) takes a sequence number (and sub-sequence number) that is not
//    before the last checkpoint and not after the last record delivered; SHARD_END only once
//    the shard ended. Checkpointing at the shard's last sequence number writes SHARD_END.
//  - A checkpoint equal to the last one writes nothing.
//  - TRIM_HORIZON, LATEST and AT_TIMESTAMP are start positions, never checkpoints.
//  - Two-phase: prepare_checkpoint(position, state) validates the same way and writes
//    pendingCheckpoint (+ state) while keeping the checkpoint; commit(prepared) then writes the
//    checkpoint there and clears the pending fields. A checkpoint resets
//    ownerSwitchesSinceCheckpoint to 0; a prepare keeps it.
// Errors: kInvalidArgument (position out of range or not a sequence number; nothing written),
// kLeaseLost (this worker does not hold the lease any more; nothing written; stop the shard),
// kUnavailable (DynamoDB unreachable or throttled; the checkpoint may be retried).
//
// Race: lease lost during a checkpoint. The write is conditional on the counter this worker
// holds; if the lease was taken meanwhile the condition fails, the checkpointer re-reads the
// lease, sees another owner and returns kLeaseLost: a worker that lost its lease never writes
// a checkpoint. A renewal of this worker racing the checkpoint cannot cause this (writes of one
// worker to one lease are serialized, and a counter moved by this worker's own unseen write is
// adopted and the write retried: see HeldLeases).
//
// Race: lease lost and taken back by this worker while a processor call of the old tenure
// runs. Writes carry the tenure the checkpointer was made for, and HeldLeases refuses
// them (kLeaseLost) once the lease was taken again: a late checkpoint of the old tenure
// cannot undercut what another worker, or the new tenure, checkpointed meanwhile.
//
// Race: a checkpoint applied by DynamoDB whose answer was lost (a timeout, a dropped
// connection). The caller gets kUnavailable and the checkpointer cannot tell whether the
// table now holds the new position. Before its next write it re-reads the lease and adopts a
// later stored checkpoint, so no write ever puts the table's checkpoint below one it already
// holds (e.g. a processor retrying at an earlier position after the error).
//
// Thread safety: all methods may be called from any thread (the consumer's and the
// processor's); they are serialized internally, and a checkpoint write holds that lock.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "kcl/lease.h"
#include "kcl/status.h"
#include "leases/held_leases.h"

namespace kcl::checkpoint {

// A prepared (written, not yet committed) checkpoint.
struct PreparedCheckpoint {
  ExtendedSequenceNumber position;
  // False when the position equalled the last checkpoint and nothing was written.
  bool written = false;
};

class ShardCheckpointer {
 public:
  // For a lease this worker holds: starts from the lease's checkpoint (nothing delivered yet)
  // and writes only in the lease's current tenure (see HeldLeases::tenure_of), or in
  // `tenure` when given. kLeaseLost when `held` does not hold `lease_key` (in that
  // tenure). `held` must outlive the checkpointer.
  static Result<std::unique_ptr<ShardCheckpointer>> create(
      leases::HeldLeases& held, std::string lease_key,
      std::optional<std::uint64_t> tenure = std::nullopt);

  ShardCheckpointer(leases::HeldLeases& held, std::string lease_key, std::uint64_t tenure,
                    ExtendedSequenceNumber last_checkpoint,
                    std::optional<ExtendedSequenceNumber> pending_checkpoint = std::nullopt);

  const std::string& lease_key() const { return lease_key_; }
  std::uint64_t tenure() const { return tenure_; }

  // --- from the shard consumer ---
  // Records up to and including `position` have been delivered to the processor. Positions
  // only move forward; an earlier one is ignored.
  void records_delivered(const ExtendedSequenceNumber& position);
  // The shard was read to its end. `last_sequence_number` is its last record (if any was
  // delivered): checkpointing exactly there, or at the lease's checkpoint when no record came
  // after it, writes SHARD_END.
  void shard_ended(std::optional<ExtendedSequenceNumber> last_sequence_number = std::nullopt);

  // A checkpointer for the same lease that has delivered records only up to `delivered`
  // (the records after it are to be delivered again: the processor failed on them). It keeps
  // this one's checkpoint, pending checkpoint and any read-back owed after a write whose
  // outcome is unknown.
  std::unique_ptr<ShardCheckpointer> rewound(
      const std::optional<ExtendedSequenceNumber>& delivered) const;

  // --- from the processor ---
  Status checkpoint();
  Status checkpoint(const ExtendedSequenceNumber& position);
  Status checkpoint(std::string_view sequence_number, SubSequenceNumber sub_sequence_number = 0);

  Result<PreparedCheckpoint> prepare_checkpoint(
      std::optional<std::string> application_state = std::nullopt);
  Result<PreparedCheckpoint> prepare_checkpoint(
      const ExtendedSequenceNumber& position,
      std::optional<std::string> application_state = std::nullopt);
  // Checkpoints at a prepared position (it must still be valid: not before the last
  // checkpoint).
  Status commit(const PreparedCheckpoint& prepared);

  ExtendedSequenceNumber last_checkpoint() const;
  // The largest position a checkpoint may name now (SHARD_END once the shard ended).
  ExtendedSequenceNumber largest_permitted() const;
  std::optional<ExtendedSequenceNumber> pending_checkpoint() const;

 private:
  // Requires mu_.
  Status validate_locked(const ExtendedSequenceNumber& position, std::string_view what) const;
  ExtendedSequenceNumber resolve_shard_end_locked(const ExtendedSequenceNumber& position) const;
  Status write_checkpoint_locked(const ExtendedSequenceNumber& position);
  Status write_fields_locked(const leases::CheckpointFields& fields);
  // After a write whose outcome is unknown, adopts what the table holds (see "Race" above).
  Status settle_unknown_write_locked();

  leases::HeldLeases& held_;
  const std::string lease_key_;
  const std::uint64_t tenure_;
  mutable std::mutex mu_;
  ExtendedSequenceNumber last_checkpoint_;
  ExtendedSequenceNumber largest_delivered_;
  std::optional<ExtendedSequenceNumber> pending_;
  bool shard_ended_ = false;
  std::optional<ExtendedSequenceNumber> sequence_at_shard_end_;
  bool outcome_unknown_ = false;  // the last write failed in a way that may have applied it
};

}  // namespace kcl::checkpoint
