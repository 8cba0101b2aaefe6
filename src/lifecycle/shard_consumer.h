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
//   How a batch is delivered is the Delivery's (delivery.h), chosen once when the worker
//   built the consumer context: callbacks (CallbackDelivery), bisecting for dead letters
//   (BisectingDelivery) or paced (PacedDelivery, the pull consumer). Before a call the
//   checkpointer learns the batch's last record (so a checkpoint may name any delivered
//   record but never a later one). An exception from the processor is caught; the same
//   batch is delivered again after a backoff (or skipped after N attempts when the
//   application opted in, or, with kDeadLetter, bisected to the failing records, which go
//   to the dead-letter sink).
// - kShardEnd: shard_ended(checkpointer) until the processor has checkpointed SHARD_END;
//   without it the children would never start, so the step is retried with backoff and an
//   error names the shard and the fix. Never silently stuck, never silently skipped.
//   A paced delivery first waits until the processor finished every record it handed on
//   (Delivery::before_shard_end).
// - kLeaseLost: lease_lost(), no checkpoint possible (writes are fenced anyway).
// - kShutdownRequested: shutdown_requested(checkpointer) for a final checkpoint, after the
//   Delivery's drain: a paced processor (the pull consumer) is first told to stop offering
//   the shard's records, and is paced until every record it handed on was finished or the
//   stop's drain bound passed (request_shutdown), so a graceful handoff or shutdown does not
//   deliver records the application finished a second time. Records buffered but not handed on are
//   not waited for: they come after the final checkpoint and the next owner reads them.
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
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/failure_series.h"
#include "kcl/metrics.h"
#include "kcl/processor.h"
#include "lifecycle/consumer_checkpoints.h"
#include "lifecycle/consumer_context.h"
#include "lifecycle/delivery.h"
#include "lifecycle/processor_calls.h"
#include "lifecycle/progress_watch.h"
#include "lifecycle/shard_reader.h"
#include "lifecycle/stall_detector.h"
#include "lifecycle/task_pool.h"
#include "retrieval/kpl_deaggregator.h"

namespace kcl::lifecycle {

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

// The names a consumer gives its shard in logs, metrics, dead letters.
class ShardNames {
 public:
  // `default_stream`: the stream of a one-stream table (a multi-stream lease names its own).
  ShardNames(const Lease& lease, const std::string& default_stream);
  ShardNames(const ShardNames&) = delete;
  ShardNames& operator=(const ShardNames&) = delete;

  const std::string lease_key;  // the shard id, or "<stream identifier>:<shard id>"
  const std::string shard_id;
  const std::string stream;     // the stream the shard is read from
  const std::string component;  // the logger's component
  // The shard's metric tags: shard (and stream, when the table holds several).
  MetricTags tags() const { return MetricTags(tags_.data(), tags_.size()); }

 private:
  std::vector<MetricTag> tags_;  // views into shard_id and stream
};

class ShardConsumer final : public Task,
                            public std::enable_shared_from_this<ShardConsumer>,
                            private DeliveryHost {
 public:
  ShardConsumer(ConsumerContext& ctx, Lease lease);
  ~ShardConsumer() override;
  // Forgets the shard's metric series (its lag, its queue): for a consumer that failed and
  // kept them for its restart, once its lease went elsewhere instead.
  void forget_metrics() { ctx_.runtime.metrics->forget(names_.tags()); }

  std::optional<SteadyTime> run() override;

  // From the lease listener: the lease is gone; stop.
  void notify_lease_lost();
  // From the worker: graceful shutdown (the worker's, or a handoff of the lease). A paced
  // processor's records handed on are waited for up to `drain` from now (the earliest of
  // the bounds when asked more than once); a callback processor has none to wait for.
  void request_shutdown(std::chrono::milliseconds drain = std::chrono::milliseconds(0));
  bool shutdown_requested() const { return shutdown_.load(); }

  const std::string& shard_id() const override { return names_.shard_id; }
  const std::string& lease_key() const { return names_.lease_key; }
  const std::string& stream() const override { return names_.stream; }
  ConsumerState state() const { return state_.load(); }
  bool done() const { return state_.load() == ConsumerState::kDone; }
  ConsumerOutcome outcome() const { return outcome_.load(); }
  // The error that ended the consumer (kFailed), e.g. the stream was deleted.
  Status failure() const;
  // Records this consumer delivered to its processor.
  std::uint64_t records_delivered() const { return delivered_.load(std::memory_order_relaxed); }
  // Reads of the shard this consumer had answered (with records or without).
  std::uint64_t reads_answered() const;
  // Records this consumer handed to the dead-letter sink (accepted).
  std::uint64_t records_dead_lettered() const {
    return dead_lettered_.load(std::memory_order_relaxed);
  }
  // Steady-clock nanoseconds at which the current processor callback started; 0 when none.
  std::int64_t callback_started_ns() const { return calls_.started_ns(); }
  bool hung_reported() const { return calls_.hung_reported(); }
  void mark_hung_reported() { calls_.mark_hung_reported(); }

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
  std::optional<std::string> make_delivery();
  // Initializing failed for `why`: tried again after a backoff, and the 1st, 3rd, 10th,
  // 100th, ... failure in a row is logged with its count.
  SteadyTime retry_initializing(LogLevel level, const std::string& why);
  void start_fetching(const retrieval::StartPosition& position);
  std::optional<SteadyTime> fail_unusable(const ExtendedSequenceNumber& start);
  std::optional<SteadyTime> step_processing();
  // The pending batch was finished (delivered, skipped or dead-lettered): on to the next, or
  // to kShardEnd when it held the shard's end.
  std::optional<SteadyTime> batch_finished();
  std::optional<SteadyTime> end_failed_source();
  std::optional<SteadyTime> step_shard_end();
  std::optional<SteadyTime> step_shutdown_requested();
  std::optional<SteadyTime> finish(ConsumerOutcome outcome);
  // The state becomes kDone, and the runtime's on_consumer_done is told.
  void mark_done();
  // Adds the source's corrupt aggregates not yet reported to the worker's counter.
  void report_corrupt_aggregates();
  // With drop_aggregates_outside_shard: erases the aggregates of `batch` that hold records
  // outside the shard's hash key range, logging what it dropped.
  void drop_misrouted_aggregates(retrieval::FetchedBatch& batch);
  // The bound of a graceful stop's drain (request_shutdown).
  SteadyTime drain_until() const;
  // The parts of stall_signal().
  std::optional<StallSignal> checkpoint_signal() const;
  std::optional<StallSignal> initializing_signal() const;
  std::optional<StallSignal> reads_signal() const;

  // DeliveryHost: what the delivery may do here.
  bool call_processor(const char* what, const std::function<void()>& call) override;
  const std::string& last_error() const override { return calls_.last_error(); }
  Checkpointer& checkpointer() override { return checkpoints_->processor_checkpointer(); }
  std::optional<ExtendedSequenceNumber> allow_checkpoint_at(const Record& last) override;
  void rewind_checkpoint_to(const std::optional<ExtendedSequenceNumber>& previous) override;
  void count_processed(std::size_t count, std::size_t bytes) override;
  void count_dead_lettered() override;
  void count_skipped(std::size_t count) override;
  SteadyTime backoff_after_failure() override;
  bool stop_asked() const override { return shutdown_.load() || lease_lost_.load(); }
  void log(LogLevel level, const std::string& message) const override;
  MetricsSink& metrics() override { return *ctx_.runtime.metrics; }
  MetricTags tags() const override { return names_.tags(); }
  SteadyTime now() const override { return ctx_.runtime.clock->now(); }

  ConsumerContext& ctx_;
  const ShardNames names_;
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
  std::atomic<std::uint64_t> delivered_{0};
  std::atomic<std::uint64_t> dead_lettered_{0};
  // For stall_signal(), read from the scheduler's thread.
  std::atomic<bool> batch_in_hand_{false};  // pending_ holds records
  // The lag last published while no batch came (a quiet shard's reads say how far behind it
  // is too, so its figure is known without a record).
  std::optional<std::int64_t> idle_lag_published_;
  base::FailureSeries checkpoint_failures_{"checkpoint"};
  // initialize() (or what comes before it: the lease's read, the processor's making) failing
  // in a row: a stall cause of its own, as the shard is never read meanwhile.
  base::FailureSeries init_failures_{"initializing"};
  base::FailureSeries parent_reads_{"reading the parents' leases"};
  ProgressWatch watch_;
  ProcessorCalls calls_;
  ShardReader reader_;

  // Owned by the thread running the step.
  std::unique_ptr<ConsumerCheckpoints> checkpoints_;  // once the lease was read
  std::unique_ptr<Delivery> delivery_;                // with the processor, once made
  std::optional<retrieval::FetchedBatch> pending_;    // taken, not yet processed successfully
  // The lease's hash key range, for drop_misrouted_aggregates (read at its first batch).
  std::optional<std::optional<retrieval::ShardHashRange>> hash_range_;
  int consecutive_failures_ = 0;
  // Until when the last failure backs off (backoff_after_failure): pending_ waits for it.
  std::optional<SteadyTime> failed_until_;
  mutable std::mutex failure_mu_;
  Status failure_;
};

}  // namespace kcl::lifecycle
