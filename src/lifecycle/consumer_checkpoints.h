// ConsumerCheckpoints: one tenure's checkpoint state as its consumer keeps it (the fenced
// ShardCheckpointer, the processor's Checkpointer over it, the last record a checkpoint may
// name: only records already delivered, never a later one).
// Thread safety: the consumer's step only.
#pragma once

#include <memory>
#include <optional>

#include "base/failure_series.h"
#include "checkpoint/shard_checkpointer.h"
#include "lifecycle/processor_checkpointer.h"

namespace kcl::lifecycle {

class ConsumerCheckpoints {
 public:
  // `failures`: the shard's series of rejected checkpoints (kept by the consumer, read by its
  // stall signal); `clock` may be null.
  ConsumerCheckpoints(std::unique_ptr<checkpoint::ShardCheckpointer> checkpointer,
                      base::FailureSeries* failures, const Clock* clock)
      : checkpointer_(std::move(checkpointer)),
        processor_(std::make_unique<ProcessorCheckpointer>(*checkpointer_, failures, clock)),
        failures_(failures),
        clock_(clock) {}

  Checkpointer& processor_checkpointer() { return *processor_; }
  const checkpoint::ShardCheckpointer& checkpointer() const { return *checkpointer_; }

  // A checkpoint may name `last` from now on; returns what it could name before.
  std::optional<ExtendedSequenceNumber> allow_at(const Record& last) {
    std::optional<ExtendedSequenceNumber> before = last_delivered_;
    last_delivered_ =
        ExtendedSequenceNumber(std::string(last.sequence_number()), last.sub_sequence_number());
    checkpointer_->records_delivered(*last_delivered_);
    return before;
  }

  // After a failed call: only `previous` may be named again. ShardCheckpointer's
  // records_delivered only moves forward, so a new one starts from the current checkpoint
  // (which the processor may have moved inside the failed call) and `previous`. The processor's
  // Checkpointer is valid only during a callback, so replacing it between callbacks is
  // invisible to the processor (a prepare_checkpoint() made in the failed call can no longer
  // be committed: it named records that were not processed).
  void rewind_to(const std::optional<ExtendedSequenceNumber>& previous) {
    auto fresh = checkpointer_->rewound(previous);
    processor_ = std::make_unique<ProcessorCheckpointer>(*fresh, failures_, clock_);
    checkpointer_ = std::move(fresh);
    last_delivered_ = previous;
  }

  // The last batch held the shard's end: SHARD_END may be checkpointed now.
  void shard_ended() { checkpointer_->shard_ended(last_delivered_); }

 private:
  std::unique_ptr<checkpoint::ShardCheckpointer> checkpointer_;
  std::unique_ptr<ProcessorCheckpointer> processor_;
  base::FailureSeries* const failures_;
  const Clock* const clock_;
  std::optional<ExtendedSequenceNumber> last_delivered_;
};

}  // namespace kcl::lifecycle
