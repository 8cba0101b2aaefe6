// pull/pull_processor.h: the record processor behind PullConsumer. One per held lease: it
// hands each delivered batch to its PullShard (the application takes the records from the
// hub), paces the shard's reading on the records not yet acknowledged, and writes the
// shard's low watermark as its checkpoint on the consumer's thread (lifecycle::PacedProcessor).
//
// Checkpoints: the watermark, at most every checkpoint_interval, when it moved; at shutdown
// the last watermark; at the shard's end SHARD_END, once every record was acknowledged (the
// shard consumer calls shard_ended() only then). A lease lost drops the shard's records.
// A graceful stop (a handoff, or the worker's shutdown) stops offering the shard's records,
// and the shard consumer waits (bounded) for those taken to be acknowledged before the final
// checkpoint; those still not acknowledged then are logged once, with their count.
//
// Metrics (the consumer's tags: shard, and stream on a worker of several streams):
// pull.unacked_records (gauge: taken, not acknowledged),
// pull.stuck_records (count: records reported as stuck).
//
// Thread safety: as any RecordProcessor (calls for one shard never overlap).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/failure_series.h"
#include "kcl/processor.h"
#include "lifecycle/paced_processor.h"
#include "pull/pull_hub.h"

namespace kcl::pull {

class PullProcessor final : public lifecycle::PacedRecordProcessor {
 public:
  PullProcessor(std::shared_ptr<PullHub> hub, std::string shard_id);
  ~PullProcessor() override;

  void initialize(const InitializationInput& input) override;
  void process_records(const ProcessRecordsInput& input) override;
  void lease_lost() override;
  void shard_ended(Checkpointer& checkpointer) override;
  void shutdown_requested(Checkpointer& checkpointer) override;

  void attach(lifecycle::PaceContext context) override;
  void hand_in(std::vector<Record>& records, std::size_t batch_bytes) override;
  lifecycle::Pace pace(Checkpointer& checkpointer) override;
  bool drained() override;
  void stop_offering() override;

 private:
  void write(Checkpointer& checkpointer, const ExtendedSequenceNumber& position);
  void log(LogLevel level, const std::string& message) const;

  std::shared_ptr<PullHub> hub_;
  std::shared_ptr<PullShard> shard_;
  lifecycle::PaceContext context_;
  std::uint64_t failed_writes_ = 0;  // in a row
  base::FailureSeries shard_end_failures_{"checkpointing SHARD_END"};
};

class PullProcessorFactory final : public lifecycle::PacedProcessorFactory {
 public:
  explicit PullProcessorFactory(std::shared_ptr<PullHub> hub) : hub_(std::move(hub)) {}
  std::unique_ptr<lifecycle::PacedRecordProcessor> create(std::string_view shard_id) override {
    return std::make_unique<PullProcessor>(hub_, std::string(shard_id));
  }

 private:
  std::shared_ptr<PullHub> hub_;
};

}  // namespace kcl::pull
