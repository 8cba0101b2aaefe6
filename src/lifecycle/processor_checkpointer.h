// ProcessorCheckpointer: the public kcl::Checkpointer handed to a record processor, over the
// shard's ShardCheckpointer (which validates and fences every write). Every write's result
// goes to the shard's series of checkpoint failures (rejected checkpoints in a row: a cause
// of a stall, lifecycle/stall_detector.h).
#pragma once

#include <optional>

#include "base/failure_series.h"
#include "checkpoint/shard_checkpointer.h"
#include "kcl/clock.h"
#include "kcl/processor.h"

namespace kcl::lifecycle {

class ProcessorCheckpointer final : public Checkpointer {
 public:
  // `failures` and `clock` may be null (no series kept).
  explicit ProcessorCheckpointer(checkpoint::ShardCheckpointer& inner,
                                 base::FailureSeries* failures = nullptr,
                                 const Clock* clock = nullptr)
      : inner_(inner), failures_(failures), clock_(clock) {}

  Status checkpoint() override { return noted(inner_.checkpoint()); }
  Status checkpoint(const Record& record) override {
    return noted(inner_.checkpoint(record.sequence_number(), record.sub_sequence_number()));
  }
  Status checkpoint(std::string_view sequence_number,
                    SubSequenceNumber sub_sequence_number) override {
    return noted(inner_.checkpoint(sequence_number, sub_sequence_number));
  }
  Status prepare_checkpoint(std::string_view sequence_number, SubSequenceNumber sub_sequence_number,
                            std::string_view application_state) override {
    auto position = ExtendedSequenceNumber::parse(sequence_number, sub_sequence_number);
    if (!position.ok()) {
      return position.status().with_context("prepared checkpoint of " + inner_.lease_key() + ": ");
    }
    std::optional<std::string> state;
    if (!application_state.empty()) state = std::string(application_state);
    auto prepared = inner_.prepare_checkpoint(*position, std::move(state));
    if (!prepared.ok()) return prepared.status();
    prepared_ = *prepared;
    return Status::Ok();
  }
  Status commit_prepared() override {
    if (!prepared_) {
      return Status(
          StatusCode::kFailedPrecondition,
          "commit_prepared() without a prepare_checkpoint() for shard " + inner_.lease_key());
    }
    Status s = noted(inner_.commit(*prepared_));
    if (s.ok()) prepared_.reset();
    return s;
  }
  ExtendedSequenceNumber last_checkpoint() const override { return inner_.last_checkpoint(); }

 private:
  Status noted(Status s) {
    if (failures_ && clock_) {
      if (s.ok()) {
        (void)failures_->succeeded(clock_->now());
      } else {
        (void)failures_->failed(s, clock_->now());
      }
    }
    return s;
  }

  checkpoint::ShardCheckpointer& inner_;
  base::FailureSeries* failures_;
  const Clock* clock_;
  std::optional<checkpoint::PreparedCheckpoint> prepared_;
};

}  // namespace kcl::lifecycle
