#include "checkpoint/shard_checkpointer.h"

#include <memory>
#include <utility>

#include "base/status_macros.h"

namespace kcl::checkpoint {

Result<std::unique_ptr<ShardCheckpointer>> ShardCheckpointer::create(
    leases::HeldLeases& held, std::string lease_key, std::optional<std::uint64_t> tenure) {
  // The tenure first: a lease lost and taken again in between shows a new tenure, never the
  // old tenure with the new lease's checkpoint.
  const std::optional<std::uint64_t> current = held.tenure_of(lease_key);
  auto lease = held.held_lease(lease_key);
  if (!lease || !current || (tenure && *tenure != *current) ||
      held.tenure_of(lease_key) != current) {
    return Status(StatusCode::kLeaseLost,
                  "worker " + held.worker_id() + " does not hold the lease for " + lease_key +
                      (lease && tenure ? " in tenure " + std::to_string(*tenure) : ""));
  }
  return std::make_unique<ShardCheckpointer>(held, std::move(lease_key), *current,
                                             lease->checkpoint, lease->pending_checkpoint);
}

ShardCheckpointer::ShardCheckpointer(leases::HeldLeases& held, std::string lease_key,
                                     std::uint64_t tenure, ExtendedSequenceNumber last_checkpoint,
                                     std::optional<ExtendedSequenceNumber> pending_checkpoint)
    : held_(held),
      lease_key_(std::move(lease_key)),
      tenure_(tenure),
      last_checkpoint_(last_checkpoint),
      largest_delivered_(std::move(last_checkpoint)),
      pending_(std::move(pending_checkpoint)),
      shard_ended_(last_checkpoint_.is_shard_end()) {}

void ShardCheckpointer::records_delivered(const ExtendedSequenceNumber& position) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shard_ended_ || !position.valid() || !position.is_sequence_number()) return;
  if (position > largest_delivered_) largest_delivered_ = position;
}

std::unique_ptr<ShardCheckpointer> ShardCheckpointer::rewound(
    const std::optional<ExtendedSequenceNumber>& delivered) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto fresh =
      std::make_unique<ShardCheckpointer>(held_, lease_key_, tenure_, last_checkpoint_, pending_);
  fresh->outcome_unknown_ = outcome_unknown_;
  if (delivered) fresh->records_delivered(*delivered);
  return fresh;
}

void ShardCheckpointer::shard_ended(std::optional<ExtendedSequenceNumber> last_sequence_number) {
  std::lock_guard<std::mutex> lock(mu_);
  if (last_sequence_number && last_sequence_number->is_sequence_number() &&
      *last_sequence_number > largest_delivered_) {
    largest_delivered_ = *last_sequence_number;
  }
  // The largest position the processor may name: the last record delivered, or the lease's
  // checkpoint when none came after it (a new owner after a handover at the shard's last
  // record, or a final batch delivered again after it was checkpointed). As in the Java KCL,
  // naming it writes SHARD_END.
  if (largest_delivered_.is_sequence_number()) sequence_at_shard_end_ = largest_delivered_;
  shard_ended_ = true;
}

ExtendedSequenceNumber ShardCheckpointer::largest_permitted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shard_ended_ ? ExtendedSequenceNumber::shard_end() : largest_delivered_;
}

ExtendedSequenceNumber ShardCheckpointer::last_checkpoint() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_checkpoint_;
}

std::optional<ExtendedSequenceNumber> ShardCheckpointer::pending_checkpoint() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_;
}

Status ShardCheckpointer::validate_locked(const ExtendedSequenceNumber& position,
                                          std::string_view what) const {
  const std::string prefix =
      std::string(what) + " of " + lease_key_ + " at " + position.to_string() + ": ";
  if (!position.valid()) {
    return Status(StatusCode::kInvalidArgument,
                  prefix +
                      "not a sequence number (decimal digits) with a sub-sequence number "
                      ">= 0");
  }
  if (position.is_sentinel() && !position.is_shard_end()) {
    return Status(StatusCode::kInvalidArgument,
                  prefix + position.sequence_number() +
                      " is a start position, not something a checkpoint can name");
  }
  if (position.is_shard_end() && !shard_ended_) {
    return Status(StatusCode::kInvalidArgument,
                  prefix +
                      "SHARD_END can be checkpointed only after the shard was read to its "
                      "end");
  }
  if (position < last_checkpoint_) {
    return Status(StatusCode::kInvalidArgument, prefix + "it is before the last checkpoint " +
                                                    last_checkpoint_.to_string() +
                                                    " (a checkpoint never moves backwards)");
  }
  const ExtendedSequenceNumber largest =
      shard_ended_ ? ExtendedSequenceNumber::shard_end() : largest_delivered_;
  if (position > largest) {
    return Status(
        StatusCode::kInvalidArgument,
        prefix + "it is after the last record delivered to the processor, " + largest.to_string());
  }
  return Status::Ok();
}

ExtendedSequenceNumber ShardCheckpointer::resolve_shard_end_locked(
    const ExtendedSequenceNumber& position) const {
  // The shard's very last record processed is the same as the whole shard processed.
  if (sequence_at_shard_end_ && position == *sequence_at_shard_end_) {
    return ExtendedSequenceNumber::shard_end();
  }
  return position;
}

Status ShardCheckpointer::write_fields_locked(const leases::CheckpointFields& fields) {
  auto written = held_.update_checkpoint(lease_key_, fields, tenure_);
  if (written.ok()) return Status::Ok();
  // kLeaseLost: nothing was written by this worker (and it may write no more). Anything else
  // (a timeout, a dropped connection, a garbled answer) may have been applied.
  if (written.status().code() != StatusCode::kLeaseLost) outcome_unknown_ = true;
  return written.status();
}

Status ShardCheckpointer::write_checkpoint_locked(const ExtendedSequenceNumber& position) {
  leases::CheckpointFields fields;
  fields.checkpoint = position;
  fields.owner_switches_since_checkpoint = 0;
  KCL_RETURN_IF_ERROR(write_fields_locked(fields));
  last_checkpoint_ = position;
  pending_.reset();
  return Status::Ok();
}

Status ShardCheckpointer::settle_unknown_write_locked() {
  if (!outcome_unknown_) return Status::Ok();
  auto stored = held_.refresh_held(lease_key_, tenure_);
  if (!stored.ok()) {
    return stored.status().with_context(
        "checkpoint of " + lease_key_ +
        ": reading back the lease after a write whose outcome is unknown: ");
  }
  if (stored->checkpoint > last_checkpoint_) {
    last_checkpoint_ = stored->checkpoint;
    if (last_checkpoint_ > largest_delivered_ && !last_checkpoint_.is_shard_end()) {
      largest_delivered_ = last_checkpoint_;
    }
  }
  pending_ = stored->pending_checkpoint;
  outcome_unknown_ = false;
  return Status::Ok();
}

Status ShardCheckpointer::checkpoint() {
  std::lock_guard<std::mutex> lock(mu_);
  KCL_RETURN_IF_ERROR(settle_unknown_write_locked());
  const ExtendedSequenceNumber target =
      shard_ended_ ? ExtendedSequenceNumber::shard_end() : largest_delivered_;
  if (target == last_checkpoint_) return Status::Ok();
  if (!target.is_sequence_number() && !target.is_shard_end()) {
    return Status::Ok();  // nothing delivered since a start position: nothing to record
  }
  KCL_RETURN_IF_ERROR(validate_locked(target, "checkpoint"));
  return write_checkpoint_locked(resolve_shard_end_locked(target));
}

Status ShardCheckpointer::checkpoint(const ExtendedSequenceNumber& position) {
  std::lock_guard<std::mutex> lock(mu_);
  KCL_RETURN_IF_ERROR(settle_unknown_write_locked());
  KCL_RETURN_IF_ERROR(validate_locked(position, "checkpoint"));
  const ExtendedSequenceNumber target = resolve_shard_end_locked(position);
  if (target == last_checkpoint_) return Status::Ok();
  return write_checkpoint_locked(target);
}

Status ShardCheckpointer::checkpoint(std::string_view sequence_number,
                                     SubSequenceNumber sub_sequence_number) {
  auto position = ExtendedSequenceNumber::parse(sequence_number, sub_sequence_number);
  if (!position.ok()) return position.status().with_context("checkpoint of " + lease_key_ + ": ");
  return checkpoint(position.value());
}

Result<PreparedCheckpoint> ShardCheckpointer::prepare_checkpoint(
    std::optional<std::string> application_state) {
  ExtendedSequenceNumber position = largest_permitted();
  return prepare_checkpoint(position, std::move(application_state));
}

Result<PreparedCheckpoint> ShardCheckpointer::prepare_checkpoint(
    const ExtendedSequenceNumber& position, std::optional<std::string> application_state) {
  std::lock_guard<std::mutex> lock(mu_);
  KCL_RETURN_IF_ERROR(settle_unknown_write_locked());
  // At the last checkpoint: nothing to prepare, unless it is the shard's last record, which
  // now stands for the whole shard processed (SHARD_END, as checkpoint() writes it).
  if (position == last_checkpoint_ && resolve_shard_end_locked(position) == position) {
    return PreparedCheckpoint{position, false};
  }
  KCL_RETURN_IF_ERROR(validate_locked(position, "prepared checkpoint"));
  const ExtendedSequenceNumber target = resolve_shard_end_locked(position);
  if (target == last_checkpoint_) return PreparedCheckpoint{target, false};

  auto lease = held_.held_lease(lease_key_);
  if (!lease) {
    return Status(StatusCode::kLeaseLost, "prepared checkpoint of " + lease_key_ + ": worker " +
                                              held_.worker_id() + " no longer holds the lease");
  }
  leases::CheckpointFields fields;
  fields.checkpoint = last_checkpoint_;
  fields.pending_checkpoint = target;
  fields.pending_checkpoint_state = std::move(application_state);
  // A prepare is not a checkpoint: the count of owner switches since the last one stays.
  fields.owner_switches_since_checkpoint = lease->owner_switches_since_checkpoint;
  KCL_RETURN_IF_ERROR(write_fields_locked(fields));
  pending_ = target;
  return PreparedCheckpoint{target, true};
}

Status ShardCheckpointer::commit(const PreparedCheckpoint& prepared) {
  if (!prepared.written) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  KCL_RETURN_IF_ERROR(settle_unknown_write_locked());
  // Prepared at a record that has turned out to be the shard's last (the shard ended after
  // the prepare): the whole shard processed, SHARD_END, as a checkpoint at it would write.
  const ExtendedSequenceNumber target = resolve_shard_end_locked(prepared.position);
  if (target == last_checkpoint_) return Status::Ok();
  KCL_RETURN_IF_ERROR(validate_locked(prepared.position, "commit of prepared checkpoint"));
  return write_checkpoint_locked(target);
}

}  // namespace kcl::checkpoint
