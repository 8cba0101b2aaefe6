// ShardConsumer: the life of one held lease, as an explicit state machine run step by step
// on the worker's TaskPool (so one thread at a time, never a thread of its own).
//
//   kWaitingOnParents -> kInitializing -> kProcessing -> kShardEnd ---------> kDone
//            |                 |               |------> kLeaseLost -------> kDone
//            |                 |               `------> kShutdownRequested -> kDone
//            `-----------------`--(lease lost / shutdown before a processor exists)--> kDone
//
// - kWaitingOnParents: a child shard starts only when every parent's lease holds SHARD_END
//   or no longer exists (re-read consistently every parent_check_interval).
// - kInitializing: reads where to start (the lease's checkpoint, else the initial
//   position), makes the processor and calls initialize(). A lease already at SHARD_END
//   goes straight to kDone (finished).
// - kProcessing: one batch delivered per step. The shard's records source runs in a fetch
//   task of its own on the same pool (real prefetch: the next GetRecords is in flight
//   while the processor handles the current batch), bounded by RetrievalConfig's prefetch
//   bounds: at the bound the fetch task waits until the consumer takes a batch, so a slow
//   processor bounds memory. The fetch task wakes the consumer when it queued a batch or
//   the source finished. (Tests drive the same path on a pool without threads:
//   TaskPool::run_due.)
//   Before process_records the checkpointer learns the batch's last record (so a
//   checkpoint may name any delivered record but never a later one). An exception from
//   process_records is caught; the same batch is delivered again after a backoff (or
//   skipped after N attempts when the application opted in, or, with kDeadLetter, bisected
//   to the failing records, which go to the dead-letter sink: shard_consumer_poison.cpp).
// - kShardEnd: shard_ended(checkpointer) until the processor has checkpointed SHARD_END;
//   without it the children would never start, so the step is retried with backoff and an
//   error names the shard and the fix. Never silently stuck, never silently skipped.
//   How batches are delivered is fixed by the worker's factory: callbacks
//   (process_records), or, with a PacedProcessorFactory (the pull consumer), a processor
//   that hands records on at the application's pace: it is asked before each batch whether
//   it takes one, and gets shard_ended() only once it finished every record (see
//   paced_processor.h).
// - kLeaseLost: lease_lost(), no checkpoint possible (writes are fenced anyway).
// - kShutdownRequested: shutdown_requested(checkpointer) for a final checkpoint. A paced
//   processor (the pull consumer) is first told to stop offering the shard's records, and is
//   paced until every record it handed on was finished or the stop's drain bound passed
//   (request_shutdown), so a graceful handoff or shutdown does not deliver records the
//   application finished a second time. Records buffered but not handed on are not
//   waited for: they come after the final checkpoint and the next owner reads them.
//
// Races (why they are safe):
// - Lease lost while a batch is being processed: notify_lease_lost() only sets a flag; the
//   running step finishes, and any checkpoint the processor writes meanwhile is rejected by
//   the fenced write (kLeaseLost). The next step moves to kLeaseLost.
// - Shard end during shutdown: shutdown is checked at the start of a step. If the final
//   batch was already delivered, kShardEnd runs first (the processor checkpoints SHARD_END,
//   which is what a restart would need anyway), then the consumer is done. If shard_ended()
//   still does not checkpoint SHARD_END, the consumer stops after that attempt (shutdown is
//   not held up; the next owner of the lease reads the shard's end again).
// - Shutdown while waiting on parents: nothing was delivered; done at once.
//
// Thread safety: run() is called by the pool, one thread at a time. notify_lease_lost(),
// request_shutdown() and the accessors may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/failure_series.h"
#include "checkpoint/shard_checkpointer.h"
#include "kcl/initial_position.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"
#include "kcl/processing_config.h"
#include "kcl/processor.h"
#include "kcl/retrieval_config.h"
#include "leases/held_leases.h"
#include "leases/load_meter.h"
#include "lifecycle/batch_bisector.h"
#include "lifecycle/paced_processor.h"
#include "lifecycle/processor_checkpointer.h"
#include "lifecycle/stall_detector.h"
#include "lifecycle/task_pool.h"
#include "retrieval/records_source.h"
#include "retrieval/shard_fetcher.h"

namespace kcl::lifecycle {

// How a shard's reads are going, kept by its fetch task for stall_signal(): failures in a row,
// and answers received (each one, with records or without, is the source moving on).
struct ReadHealth {
  explicit ReadHealth(std::string what) : failures(std::move(what)) {}
  base::FailureSeries failures;
  std::atomic<std::uint64_t> answers{0};
};

enum class ConsumerState {
  kWaitingOnParents,
  kInitializing,
  kProcessing,
  kShardEnd,
  kLeaseLost,
  kShutdownRequested,
  kDone,
};
std::string_view to_string(ConsumerState s) noexcept;

// How a consumer ended.
enum class ConsumerOutcome { kRunning, kShardFinished, kLeaseLost, kShutdown, kFailed };

// Everything consumers share; owned by the worker, outlives every consumer.
struct ConsumerContext {
  // The stream of a one-stream table; a multi-stream lease names its own.
  std::string stream;
  kinesis::KinesisClient* kinesis = nullptr;
  leases::LeaseStore* store = nullptr;
  leases::HeldLeases* held = nullptr;
  leases::LoadMeter* load = nullptr;  // may be null: the consumers report their bytes there
  // Makes each shard's processor: callbacks (`factory`) or paced deliveries
  // (`paced_factory`, paced_processor.h); exactly one is set.
  RecordProcessorFactory* factory = nullptr;
  PacedProcessorFactory* paced_factory = nullptr;
  Logger* logger = nullptr;
  MetricsSink* metrics = nullptr;
  const Clock* clock = nullptr;
  TaskPool* pool = nullptr;
  InitialPosition initial_position;
  // Several streams: the initial position of a stream (its AT_TIMESTAMP time); empty: the
  // one above.
  std::function<InitialPosition(const std::string& stream)> initial_position_of;
  RetrievalConfig retrieval;
  ProcessingConfig processing;
  std::atomic<std::uint64_t>* records_delivered = nullptr;
  std::atomic<std::uint64_t>* processor_failures = nullptr;
  std::atomic<std::uint64_t>* corrupt_aggregates = nullptr;
  std::atomic<std::uint64_t>* records_dead_lettered = nullptr;
  // Makes a shard's records source; empty = polling (retrieval::ShardFetcher).
  retrieval::RecordsSourceFactory records_source_factory;
  // Called once when a consumer is done (any outcome), on the thread that ended it: quick,
  // no blocking. The worker's scheduler wakes on it rather than polling consumers.
  std::function<void()> on_consumer_done;
  std::mutex factory_mu;  // the factories' create() is called one at a time
};

class ShardConsumer final : public Task, public std::enable_shared_from_this<ShardConsumer> {
 public:
  ShardConsumer(ConsumerContext& ctx, Lease lease);
  ~ShardConsumer() override;

  std::optional<SteadyTime> run() override;

  // From the lease listener: the lease is gone; stop.
  void notify_lease_lost();
  // From the worker: graceful shutdown (the worker's, or a handoff of the lease). A paced
  // processor's records handed on are waited for up to `drain` from now (the earliest of
  // the bounds when asked more than once); a callback processor has none to wait for.
  void request_shutdown(std::chrono::milliseconds drain = std::chrono::milliseconds(0));

  const std::string& shard_id() const { return shard_id_; }
  const std::string& lease_key() const { return lease_key_; }
  const std::string& stream() const { return stream_; }
  ConsumerState state() const { return state_.load(); }
  bool done() const { return state_.load() == ConsumerState::kDone; }
  ConsumerOutcome outcome() const { return outcome_.load(); }
  // The error that ended the consumer (kFailed), e.g. the stream was deleted.
  Status failure() const;
  // Records this consumer delivered to its processor.
  std::uint64_t records_delivered() const { return delivered_.load(std::memory_order_relaxed); }
  // Records this consumer handed to the dead-letter sink (accepted).
  std::uint64_t records_dead_lettered() const {
    return dead_lettered_.load(std::memory_order_relaxed);
  }
  // Steady-clock nanoseconds at which the current processor callback started; 0 when none.
  std::int64_t callback_started_ns() const { return callback_started_ns_.load(); }
  bool hung_reported() const { return hung_reported_.load(); }
  void mark_hung_reported() { hung_reported_.store(true); }

  // What is in this shard's way now (lifecycle/stall_detector.h), most telling first: a
  // processor callback running, checkpoints rejected in a row, a parent not finished, reads
  // failing in a row, records waiting with none delivered. Nothing while records are being
  // delivered or the shard is idle at the tip (no lag, nothing fetched, nothing in hand).
  // From one thread only (the worker's scheduler).
  std::optional<StallSignal> stall_signal(SteadyTime now);

 private:
  std::optional<SteadyTime> step_waiting_on_parents();
  std::optional<SteadyTime> step_initializing();
  std::optional<Status> load_checkpoint();
  std::optional<retrieval::StartPosition> start_position(const ExtendedSequenceNumber& start) const;
  bool make_processor();
  void start_fetching(const retrieval::StartPosition& position);
  std::optional<SteadyTime> fail_unusable(const ExtendedSequenceNumber& start);
  std::optional<SteadyTime> step_processing();
  std::optional<SteadyTime> paced_gate(std::optional<SteadyTime>& paced_call);
  std::optional<SteadyTime> deliver_pending();
  bool call_with_batch(retrieval::FetchedBatch& batch);
  bool call_with_records(retrieval::FetchedBatch& batch, std::span<const Record> records);
  // ProcessorErrorPolicy::kDeadLetter (shard_consumer_poison.cpp): the pending batch part by
  // part; returns when to run next while a part waits (backoff, sink, shutdown).
  std::optional<SteadyTime> deliver_bisecting();
  std::optional<SteadyTime> deliver_part(const BatchBisector::Part& part);
  std::optional<SteadyTime> dead_letter_current(const BatchBisector::Part& part);
  void note_delivered(const Record& last);
  void count_delivered(std::size_t count, std::size_t bytes);
  std::optional<SteadyTime> end_failed_source();
  std::optional<SteadyTime> step_shard_end();
  std::optional<SteadyTime> step_shutdown_requested();
  // A paced processor: stops it offering records, then paces it until it is drained or the
  // drain bound passed; when to look again while it waits, empty when done waiting.
  std::optional<SteadyTime> drain_paced();
  std::optional<SteadyTime> call_if_idle();
  std::optional<SteadyTime> finish(ConsumerOutcome outcome);
  // The state becomes kDone, and ctx_.on_consumer_done is told.
  void mark_done();
  // The consumer took a batch (room in the queue again) or started: let the fetch task run.
  void wake_fetch_task();
  SteadyTime backoff_after_failure();
  // Adds the fetcher's corrupt aggregates not yet reported to the worker's counter.
  void report_corrupt_aggregates();
  // After a failed process_records (to be delivered again): a checkpoint may name only the
  // records delivered before that batch, `previous` (see step_processing).
  void rewind_delivered(const std::optional<ExtendedSequenceNumber>& previous);
  void log(LogLevel level, const std::string& message) const;
  // The parts of stall_signal().
  std::optional<StallSignal> callback_signal(SteadyTime now) const;
  std::optional<StallSignal> checkpoint_signal() const;
  std::optional<StallSignal> parent_signal() const;
  std::optional<StallSignal> reads_signal() const;
  std::optional<StallSignal> waiting_signal(SteadyTime now);
  // Which parent holds a waiting child back, in words (step_waiting_on_parents).
  void note_parent_wait(std::string detail);
  // Runs a processor callback, catching exceptions; returns false if it threw.
  template <typename F>
  bool call_processor(const char* what, F&& f);

  // The shard's metric tags: shard (and stream, when the table holds several).
  MetricTags tags() const { return MetricTags(tags_.data(), tags_.size()); }

  ConsumerContext& ctx_;
  const std::string lease_key_;  // the shard id, or "<stream identifier>:<shard id>"
  const std::string shard_id_;
  const std::string stream_;     // the stream the shard is read from
  std::vector<MetricTag> tags_;  // views into shard_id_ and stream_
  const std::string component_;
  // The tenure of the lease this consumer reads for (HeldLeases::tenure_of); every
  // checkpoint it makes is fenced on it.
  const std::optional<std::uint64_t> tenure_;
  Lease lease_;  // as gained (parents); as read from the table once initializing
  std::atomic<ConsumerState> state_{ConsumerState::kWaitingOnParents};
  std::atomic<ConsumerOutcome> outcome_{ConsumerOutcome::kRunning};
  std::atomic<bool> lease_lost_{false};
  std::atomic<bool> shutdown_{false};
  // Steady-clock nanoseconds until which a paced processor's records handed on are waited
  // for at a graceful stop (request_shutdown).
  std::atomic<std::int64_t> drain_until_ns_{INT64_MAX};
  std::atomic<std::int64_t> callback_started_ns_{0};
  std::atomic<bool> hung_reported_{false};
  std::atomic<const char*> callback_name_{""};  // the callback running, while one is
  std::atomic<std::uint64_t> delivered_{0};
  // For stall_signal(), read from the scheduler's thread.
  const SteadyTime created_at_;
  std::atomic<retrieval::RecordsSource*> source_{nullptr};  // fetcher_, once made
  std::atomic<bool> batch_in_hand_{false};                  // pending_ holds records
  base::FailureSeries checkpoint_failures_{"checkpoint"};
  std::shared_ptr<ReadHealth> reads_;  // shared with the fetch task
  mutable std::mutex parent_mu_;
  std::string parent_wait_;  // guarded by parent_mu_: why the parents are not finished
  // The scheduler's own (stall_signal()): records delivered and answers read at its last
  // look, and since when records have been waiting with neither moving.
  std::uint64_t seen_delivered_ = 0;
  std::uint64_t seen_answers_ = 0;
  std::optional<SteadyTime> waiting_since_;

  // Owned by the thread running the step.
  std::unique_ptr<RecordProcessor> processor_;
  PacedProcessor* paced_ = nullptr;  // processor_, when it paces its own deliveries
  std::unique_ptr<checkpoint::ShardCheckpointer> checkpointer_;
  std::unique_ptr<ProcessorCheckpointer> processor_checkpointer_;
  std::shared_ptr<retrieval::RecordsSource> fetcher_;  // the shard's records source
  std::shared_ptr<class FetchTask> fetch_task_;        // runs fetcher_ on the pool (if any)
  std::optional<retrieval::FetchedBatch> pending_;     // taken, not yet processed successfully
  int pending_attempts_ = 0;
  std::optional<BatchBisector> bisector_;  // kDeadLetter: how pending_ is being delivered
  bool letter_due_ = false;                // bisector_'s current record is to be dead-lettered
  std::string letter_error_;               // the failure that made it so
  std::uint64_t sink_failures_ = 0;        // the sink's refusals in a row (logged as a series)
  std::atomic<std::uint64_t> dead_lettered_{0};
  SteadyTime last_call_at_{};  // the last process_records call (or initialize)
  int consecutive_failures_ = 0;
  std::optional<ExtendedSequenceNumber> last_delivered_;
  bool offering_stopped_ = false;       // the paced processor was told to stop offering
  std::uint64_t corrupt_reported_ = 0;  // fetcher's corrupt aggregates already counted
  std::string last_error_;
  mutable std::mutex failure_mu_;
  Status failure_;
};

}  // namespace kcl::lifecycle
