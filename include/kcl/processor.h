// kcl/processor.h: what an application implements to consume a stream with kcl-cpp.
//
// A RecordProcessorFactory makes one RecordProcessor per shard lease the worker holds.
// The worker calls a processor's methods in this order:
//
//   initialize  ->  process_records*  ->  one of
//                                          lease_lost          (another worker took the lease)
//                                          shard_ended         (the shard was read to its end)
//                                          shutdown_requested  (the worker is stopping)
//
// One of them ends the processor, with one exception: a shard_ended that did not checkpoint
// SHARD_END (it threw, or returned without) is called again after a backoff, and if the lease
// is lost meanwhile, lease_lost follows it. Unlike the Java KCL, lease_lost does not follow a
// shutdown_requested: release what the processor holds in whichever of the three ends it.
//
// Threads: calls for one shard are never concurrent and always come one after another
// (happens-before), but successive calls may come from different threads of the worker's
// pool. Different shards' processors run at the same time on different threads, so state
// shared between processors must be synchronised by the application.
//
// Exceptions: an exception thrown by process_records is caught by the worker; by default the
// same batch is delivered again after a backoff (nothing is lost). Exceptions from the other
// callbacks are caught and logged; from shard_ended the step is retried.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kcl/lease.h"
#include "kcl/record.h"
#include "kcl/status.h"

namespace kcl {

// Records a shard's progress in the lease table. Valid only during the callback it was
// passed to; not thread-safe (use it from the callback's thread).
//
// Every checkpoint is fenced: it is written only if this worker still holds the shard's
// lease; otherwise it returns kLeaseLost and writes nothing. A checkpoint never moves
// backwards (kInvalidArgument) and never past the last record delivered (kInvalidArgument).
class Checkpointer {
 public:
  virtual ~Checkpointer() = default;
  // Checkpoints at the last record delivered to this processor.
  [[nodiscard]] virtual Status checkpoint() = 0;
  // Checkpoints at `record` (which must have been delivered).
  [[nodiscard]] virtual Status checkpoint(const Record& record) = 0;
  // Checkpoints at a given position.
  [[nodiscard]] virtual Status checkpoint(std::string_view sequence_number,
                                          SubSequenceNumber sub_sequence_number = 0) = 0;
  // Two-phase: records `position` as pending (pendingCheckpoint*) with optional
  // application state; commit_prepared() then makes it the checkpoint.
  [[nodiscard]] virtual Status prepare_checkpoint(std::string_view sequence_number,
                                                  SubSequenceNumber sub_sequence_number = 0,
                                                  std::string_view application_state = {}) = 0;
  [[nodiscard]] virtual Status commit_prepared() = 0;
  // The last checkpoint this worker wrote or loaded for the shard.
  virtual ExtendedSequenceNumber last_checkpoint() const = 0;
};

struct InitializationInput {
  std::string shard_id;
  // The stream the shard belongs to (a worker may read several: WorkerConfig::streams).
  std::string stream_name;
  // Where delivery starts: the stored checkpoint (records after it are delivered), or the
  // initial-position sentinel (TRIM_HORIZON, LATEST, AT_TIMESTAMP) for a new shard.
  ExtendedSequenceNumber starting_position;
  // The pending two-phase checkpoint found in the lease, if any, and its application state.
  std::optional<ExtendedSequenceNumber> pending_checkpoint;
  std::optional<std::string> pending_checkpoint_state;
};

struct ProcessRecordsInput {
  std::span<const Record> records;  // in shard order; valid during the call only
  Checkpointer& checkpointer;
  std::int64_t millis_behind_latest = 0;
};

class RecordProcessor {
 public:
  virtual ~RecordProcessor() = default;
  virtual void initialize(const InitializationInput& input) = 0;
  virtual void process_records(const ProcessRecordsInput& input) = 0;
  // The lease was lost: do not checkpoint (it would be rejected); release resources.
  virtual void lease_lost() {}
  // The shard was read to its end. The processor MUST call checkpointer.checkpoint()
  // (which records SHARD_END) or the children of this shard will not start; the worker
  // retries this call until it does.
  virtual void shard_ended(Checkpointer& checkpointer) = 0;
  // The worker is shutting down gracefully; checkpoint what has been processed.
  virtual void shutdown_requested(Checkpointer& checkpointer) = 0;
};

// Thread safety: create() may be called from any of the worker's threads, one at a time.
class RecordProcessorFactory {
 public:
  virtual ~RecordProcessorFactory() = default;
  virtual std::unique_ptr<RecordProcessor> create(std::string_view shard_id) = 0;
};

}  // namespace kcl
