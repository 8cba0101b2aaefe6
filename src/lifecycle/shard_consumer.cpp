#include "lifecycle/shard_consumer.h"

#include <algorithm>
#include <exception>

#include "leases/stream_identifier.h"
#include "shardsync/lineage.h"

namespace kcl::lifecycle {

std::string_view to_string(ConsumerState s) noexcept {
  switch (s) {
    case ConsumerState::kWaitingOnParents:
      return "WAITING_ON_PARENTS";
    case ConsumerState::kInitializing:
      return "INITIALIZING";
    case ConsumerState::kProcessing:
      return "PROCESSING";
    case ConsumerState::kShardEnd:
      return "SHARD_END";
    case ConsumerState::kLeaseLost:
      return "LEASE_LOST";
    case ConsumerState::kShutdownRequested:
      return "SHUTDOWN_REQUESTED";
    case ConsumerState::kDone:
      return "DONE";
  }
  return "UNKNOWN";
}

// Runs a shard's records source on the pool, apart from the consumer's own steps, so a
// GetRecords call is in flight while the processor works. Wakes the consumer when it has
// queued a batch or the source finished; waits (not scheduled) while the prefetch queue is
// at its bound, until the consumer takes a batch and wakes it.
class FetchTask final : public Task {
 public:
  FetchTask(std::shared_ptr<retrieval::RecordsSource> source, std::weak_ptr<Task> consumer,
            TaskPool& pool, const Clock& clock, std::shared_ptr<ReadHealth> health, Logger* logger,
            std::string component)
      : source_(std::move(source)),
        consumer_(std::move(consumer)),
        pool_(pool),
        clock_(clock),
        health_(std::move(health)),
        logger_(logger),
        component_(std::move(component)) {}

  std::optional<SteadyTime> run() override {
    if (stopped_.load()) return std::nullopt;
    const retrieval::FetchStep step = source_->fetch_step();
    note_outcome(step.outcome);
    const bool finished = source_->finished();
    if (step.records_queued > 0 || finished || step.outcome == retrieval::FetchOutcome::kShardEnd) {
      if (auto c = consumer_.lock()) pool_.schedule_now(c);
    }
    if (finished || step.wait_for_take) return std::nullopt;
    if (step.next_step_at == Clock::MonoTime::max()) return std::nullopt;
    return std::max(step.next_step_at, clock_.now());
  }
  void stop() { stopped_.store(true); }

 private:
  // Reads failing in a row (throttled, 5xx, timeouts; a cause of a stall): a backoff
  // continues the series, an answer ends it. A series is logged as FailureSeries says: its
  // first failure, the 3rd and each power of ten with the count, and its end with its length
  // (never a line per retry).
  void note_outcome(retrieval::FetchOutcome outcome) {
    using retrieval::FetchOutcome;
    if (outcome == FetchOutcome::kRetrying) {
      report(LogLevel::kWarn,
             health_->failures.failed(
                 Status(StatusCode::kUnavailable, source_->last_retry_reason()), clock_.now()));
    } else if (outcome == FetchOutcome::kRecords || outcome == FetchOutcome::kNoRecords ||
               outcome == FetchOutcome::kShardEnd) {
      report(LogLevel::kInfo, health_->failures.succeeded(clock_.now()));
      health_->answers.fetch_add(1, std::memory_order_relaxed);
    }
  }
  void report(LogLevel level, const std::optional<std::string>& line) const {
    if (line && logger_ && logger_->enabled(level)) logger_->log(level, component_, *line);
  }

  std::shared_ptr<retrieval::RecordsSource> source_;
  std::weak_ptr<Task> consumer_;
  TaskPool& pool_;
  const Clock& clock_;
  std::shared_ptr<ReadHealth> health_;
  Logger* const logger_;  // may be null
  const std::string component_;
  std::atomic<bool> stopped_{false};
};

ShardConsumer::ShardConsumer(ConsumerContext& ctx, Lease lease)
    : ctx_(ctx),
      lease_key_(lease.lease_key),
      shard_id_(leases::lease_shard_id(lease)),
      stream_(leases::lease_stream_identifier(lease).empty() ? ctx.stream
                                                             : leases::lease_stream_name(lease)),
      component_("consumer " + lease.lease_key),
      tenure_(ctx.held->tenure_of(lease.lease_key)),
      lease_(std::move(lease)),
      created_at_(ctx.clock->now()),
      reads_(std::make_shared<ReadHealth>(
          ctx.retrieval.mode == RetrievalMode::kFanOut ? "SubscribeToShard" : "GetRecords")) {
  tags_.push_back(MetricTag{"shard", shard_id_});
  // Several streams: the stream too (one stream's metrics keep the labels they always had).
  if (!leases::lease_stream_identifier(lease_).empty())
    tags_.push_back(MetricTag{"stream", stream_});
  // Not held any more (lost before this consumer was made): it ends at its first step.
  if (!tenure_) lease_lost_.store(true);
}

ShardConsumer::~ShardConsumer() {
  if (fetch_task_) fetch_task_->stop();
}

void ShardConsumer::wake_fetch_task() {
  if (fetch_task_ && ctx_.pool) ctx_.pool->schedule_now(fetch_task_);
}

void ShardConsumer::log(LogLevel level, const std::string& message) const {
  if (ctx_.logger && ctx_.logger->enabled(level)) ctx_.logger->log(level, component_, message);
}

Status ShardConsumer::failure() const {
  std::lock_guard<std::mutex> lock(failure_mu_);
  return failure_;
}

void ShardConsumer::notify_lease_lost() { lease_lost_.store(true); }
void ShardConsumer::request_shutdown(std::chrono::milliseconds drain) {
  const std::int64_t until =
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          (ctx_.clock->now() + std::max(drain, std::chrono::milliseconds(0))).time_since_epoch())
          .count();
  std::int64_t seen = drain_until_ns_.load();
  while (until < seen && !drain_until_ns_.compare_exchange_weak(seen, until)) {
  }
  shutdown_.store(true);
}

template <typename F>
bool ShardConsumer::call_processor(const char* what, F&& f) {
  callback_name_.store(what);
  callback_started_ns_.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(ctx_.clock->now().time_since_epoch())
          .count());
  hung_reported_.store(false);
  bool ok = true;
  try {
    f();
  } catch (const std::exception& e) {
    ok = false;
    last_error_ = std::string(what) + " threw: " + e.what();
  } catch (...) {
    ok = false;
    last_error_ = std::string(what) + " threw a non-standard exception";
  }
  callback_started_ns_.store(0);
  if (!ok) {
    if (ctx_.processor_failures) ctx_.processor_failures->fetch_add(1);
    ctx_.metrics->count("processor.failures", 1, tags());
  }
  return ok;
}

SteadyTime ShardConsumer::backoff_after_failure() {
  ++consecutive_failures_;
  auto base = ctx_.processing.failure_backoff_base;
  auto cap = ctx_.processing.failure_backoff_max;
  auto delay = base * (1LL << std::min(consecutive_failures_ - 1, 20));
  if (delay > cap || delay.count() <= 0) delay = cap;
  return ctx_.clock->now() + delay;
}

void ShardConsumer::report_corrupt_aggregates() {
  if (!ctx_.corrupt_aggregates || !fetcher_) return;
  const std::uint64_t seen = fetcher_->corrupt_aggregates();
  if (seen > corrupt_reported_) {
    ctx_.corrupt_aggregates->fetch_add(seen - corrupt_reported_);
    corrupt_reported_ = seen;
  }
}

void ShardConsumer::rewind_delivered(const std::optional<ExtendedSequenceNumber>& previous) {
  // ShardCheckpointer::records_delivered only moves forward, so start a new one from the
  // current checkpoint (which the processor may have moved inside the failed call) and the
  // records delivered before the batch. The processor's Checkpointer is valid only during a
  // callback, so replacing it between callbacks is invisible to the processor (a
  // prepare_checkpoint() made in the failed call can no longer be committed: it named
  // records that were not processed).
  auto fresh = checkpointer_->rewound(previous);
  processor_checkpointer_ =
      std::make_unique<ProcessorCheckpointer>(*fresh, &checkpoint_failures_, ctx_.clock);
  checkpointer_ = std::move(fresh);
  last_delivered_ = previous;
}

void ShardConsumer::mark_done() {
  state_.store(ConsumerState::kDone);
  if (ctx_.on_consumer_done) ctx_.on_consumer_done();
}

std::optional<SteadyTime> ShardConsumer::finish(ConsumerOutcome outcome) {
  if (fetch_task_) fetch_task_->stop();  // no more calls for this shard
  outcome_.store(outcome);
  mark_done();
  log(LogLevel::kInfo, "done (" +
                           std::string(outcome == ConsumerOutcome::kShardFinished ? "shard finished"
                                       : outcome == ConsumerOutcome::kLeaseLost   ? "lease lost"
                                       : outcome == ConsumerOutcome::kShutdown    ? "shutdown"
                                                                                  : "failed") +
                           ")");
  return std::nullopt;
}

std::optional<SteadyTime> ShardConsumer::run() {
  ConsumerState s = state_.load();
  if (s == ConsumerState::kDone) return std::nullopt;
  // External events are looked at only here, between steps (see the race notes).
  if (lease_lost_.load() && s != ConsumerState::kLeaseLost) {
    // lease_lost() and shutdown_requested() only for a processor that was initialized (the
    // fetcher is made right after initialize() returned).
    s = fetcher_ ? ConsumerState::kLeaseLost : ConsumerState::kDone;
    if (s == ConsumerState::kDone) return finish(ConsumerOutcome::kLeaseLost);
    state_.store(s);
  } else if (shutdown_.load() &&
             (s == ConsumerState::kWaitingOnParents || s == ConsumerState::kInitializing ||
              s == ConsumerState::kProcessing)) {
    // Deliver nothing more; a batch already queued is simply not delivered (it is after the
    // last checkpoint the processor may write, so the next owner reads it again).
    if (!fetcher_) return finish(ConsumerOutcome::kShutdown);
    s = ConsumerState::kShutdownRequested;
    state_.store(s);
  }

  switch (s) {
    case ConsumerState::kWaitingOnParents:
      return step_waiting_on_parents();
    case ConsumerState::kInitializing:
      return step_initializing();
    case ConsumerState::kProcessing:
      return step_processing();
    case ConsumerState::kShardEnd:
      return step_shard_end();
    case ConsumerState::kLeaseLost:
      call_processor("lease_lost", [&] { processor_->lease_lost(); });
      return finish(ConsumerOutcome::kLeaseLost);
    case ConsumerState::kShutdownRequested:
      return step_shutdown_requested();
    case ConsumerState::kDone:
      break;
  }
  return std::nullopt;
}

std::optional<SteadyTime> ShardConsumer::step_waiting_on_parents() {
  if (!lease_.parent_shard_ids.empty()) {
    auto unfinished = shardsync::unfinished_parent(*ctx_.store, lease_);
    if (!unfinished.ok()) {
      log(LogLevel::kWarn,
          "could not read the parents' leases: " + unfinished.status().to_string());
      return ctx_.clock->now() + ctx_.processing.parent_check_interval;
    }
    if (const std::optional<Lease>& parent = *unfinished) {
      const std::string owner = parent->actual_owner().value_or("");
      note_parent_wait(
          "waiting for parent " + parent->lease_key + " (" +
          (owner.empty() ? std::string("held by no worker") : "held by worker " + owner) +
          ", checkpoint " + parent->checkpoint.to_string() + ", not SHARD_END)");
      return ctx_.clock->now() + ctx_.processing.parent_check_interval;
    }
    log(LogLevel::kInfo, "parents finished; starting");
  }
  state_.store(ConsumerState::kInitializing);
  return ctx_.clock->now();
}

// Reads the lease (and adopts it) before anything else: the held copy may lag the table (a
// checkpoint write that was applied but whose answer was lost leaves the old checkpoint
// cached), so nothing is replayed from an older position and no later checkpoint can move
// backwards. The read is fenced on this consumer's tenure, so the lease read is this tenure's.
std::optional<Status> ShardConsumer::load_checkpoint() {
  if (checkpointer_) return std::nullopt;
  if (!tenure_) return Status(StatusCode::kLeaseLost, "not held");
  auto stored = ctx_.held->refresh_held(lease_key_, tenure_);
  if (!stored.ok()) return stored.status();
  lease_ = std::move(stored).value();
  checkpointer_ = std::make_unique<checkpoint::ShardCheckpointer>(
      *ctx_.held, lease_key_, *tenure_, lease_.checkpoint, lease_.pending_checkpoint);
  processor_checkpointer_ =
      std::make_unique<ProcessorCheckpointer>(*checkpointer_, &checkpoint_failures_, ctx_.clock);
  return std::nullopt;
}

// Where reading starts for a checkpoint; empty for one that names no position to read from.
std::optional<retrieval::StartPosition> ShardConsumer::start_position(
    const ExtendedSequenceNumber& start) const {
  switch (start.kind()) {
    case ExtendedSequenceNumber::Kind::kSequenceNumber:
      return retrieval::StartPosition::after_checkpoint(start.sequence_number(),
                                                        start.sub_sequence_number());
    case ExtendedSequenceNumber::Kind::kLatest:
      return retrieval::StartPosition::latest();
    case ExtendedSequenceNumber::Kind::kAtTimestamp:
      return retrieval::StartPosition::at_timestamp(
          (ctx_.initial_position_of ? ctx_.initial_position_of(stream_) : ctx_.initial_position)
              .timestamp);
    case ExtendedSequenceNumber::Kind::kTrimHorizon:
      return retrieval::StartPosition::trim_horizon();
    default:
      return std::nullopt;
  }
}

// Makes the processor with the factory the worker was given (callbacks or paced); false
// when it threw or returned none.
bool ShardConsumer::make_processor() {
  if (processor_) return true;
  bool ok = call_processor("factory.create", [&] {
    std::lock_guard<std::mutex> lock(ctx_.factory_mu);  // create() is called one at a time
    if (ctx_.paced_factory) {
      std::unique_ptr<PacedRecordProcessor> paced = ctx_.paced_factory->create(shard_id_);
      paced_ = paced.get();
      processor_ = std::move(paced);
    } else {
      processor_ = ctx_.factory->create(shard_id_);
    }
  });
  if (ok && processor_) return true;
  processor_.reset();
  paced_ = nullptr;
  log(LogLevel::kError, ok ? "the processor factory returned no processor" : last_error_);
  return false;
}

// The shard's records source, in a fetch task of its own on the pool; and, for a paced
// processor, its wake-up.
void ShardConsumer::start_fetching(const retrieval::StartPosition& position) {
  if (ctx_.records_source_factory) {
    fetcher_ = ctx_.records_source_factory(stream_, shard_id_, position);
  } else {
    fetcher_ = std::make_shared<retrieval::ShardFetcher>(*ctx_.kinesis, stream_, shard_id_,
                                                         position, ctx_.retrieval, *ctx_.clock);
  }
  fetch_task_ = std::make_shared<FetchTask>(fetcher_, weak_from_this(), *ctx_.pool, *ctx_.clock,
                                            reads_, ctx_.logger, component_);
  source_.store(fetcher_.get());
  fetcher_->set_wakeup([task = std::weak_ptr<FetchTask>(fetch_task_), pool = ctx_.pool] {
    if (auto t = task.lock()) pool->schedule_now(t);
  });
  wake_fetch_task();
  if (!paced_) return;
  PaceContext pace;
  pace.wake = [consumer = weak_from_this(), pool = ctx_.pool](SteadyTime at) {
    if (auto c = consumer.lock()) pool->schedule(c, at);
  };
  pace.logger = ctx_.logger;
  pace.metrics = ctx_.metrics;
  pace.clock = ctx_.clock;
  paced_->attach(std::move(pace));
}

std::optional<SteadyTime> ShardConsumer::fail_unusable(const ExtendedSequenceNumber& start) {
  Status bad(StatusCode::kFailedPrecondition,
             "lease " + lease_key_ + " holds an unusable checkpoint '" + start.to_string() + "'");
  log(LogLevel::kError, bad.to_string());
  {
    std::lock_guard<std::mutex> lock(failure_mu_);
    failure_ = bad;
  }
  outcome_.store(ConsumerOutcome::kFailed);
  mark_done();
  return std::nullopt;
}

std::optional<SteadyTime> ShardConsumer::step_initializing() {
  if (auto failed = load_checkpoint()) {
    if (failed->code() == StatusCode::kLeaseLost) return finish(ConsumerOutcome::kLeaseLost);
    log(LogLevel::kWarn, "initializing: reading the lease: " + failed->to_string());
    return backoff_after_failure();
  }
  const ExtendedSequenceNumber start = checkpointer_->last_checkpoint();
  if (start.is_shard_end()) {
    log(LogLevel::kInfo, "lease already holds SHARD_END; nothing to read");
    return finish(ConsumerOutcome::kShardFinished);
  }
  const std::optional<retrieval::StartPosition> position = start_position(start);
  if (!position) return fail_unusable(start);
  if (!make_processor()) return backoff_after_failure();
  InitializationInput init;
  init.shard_id = shard_id_;
  init.stream_name = stream_;
  init.starting_position = start;
  init.pending_checkpoint = checkpointer_->pending_checkpoint();
  init.pending_checkpoint_state = lease_.pending_checkpoint_state;
  if (!call_processor("initialize", [&] { processor_->initialize(init); })) {
    log(LogLevel::kError, last_error_ + "; retrying");
    return backoff_after_failure();
  }
  consecutive_failures_ = 0;
  start_fetching(*position);
  log(LogLevel::kInfo, "initialized at " + start.to_string());
  last_call_at_ = ctx_.clock->now();
  state_.store(ConsumerState::kProcessing);
  return ctx_.clock->now();
}

// Hands `batch` to the processor: process_records, or hand_in for a paced one. Returns
// whether it succeeded.
bool ShardConsumer::call_with_batch(retrieval::FetchedBatch& batch) {
  return call_with_records(batch, std::span<const Record>(batch.records));
}

// process_records with `records` (the whole of `batch`, or a part of it when bisecting).
bool ShardConsumer::call_with_records(retrieval::FetchedBatch& batch,
                                      std::span<const Record> records) {
  ctx_.metrics->gauge("consumer.millis_behind_latest",
                      static_cast<double>(batch.millis_behind_latest), tags());
  ProcessRecordsInput input{records, *processor_checkpointer_, batch.millis_behind_latest};
  const auto call_start = ctx_.clock->now();
  last_call_at_ = call_start;
  const bool processed = call_processor("process_records", [&] {
    if (paced_) {
      paced_->hand_in(batch.records, batch.bytes);  // may move the records out
    } else {
      processor_->process_records(input);
    }
  });
  ctx_.metrics->timing("processor.process_records", ctx_.clock->now() - call_start, tags());
  return processed;
}

void ShardConsumer::count_delivered(std::size_t count, std::size_t bytes) {
  consecutive_failures_ = 0;
  if (ctx_.records_delivered) ctx_.records_delivered->fetch_add(count);
  delivered_.fetch_add(count, std::memory_order_relaxed);
  ctx_.metrics->count("consumer.records_processed", static_cast<double>(count), tags());
  ctx_.metrics->count("consumer.bytes_processed", static_cast<double>(bytes), tags());
  if (ctx_.load) ctx_.load->note_processed(lease_key_, bytes);  // its load, for balancing
}

// Delivers the pending batch's records. Before the call the checkpointer learns the batch's
// last record (so the processor may checkpoint at any record of this batch during the call,
// never at a later one). A failed call delivers the same batch again after a backoff (the
// checkpointer forgets the batch until then), or skips it after N attempts when the
// application opted in. Returns when to run next when the batch is to be delivered again.
std::optional<SteadyTime> ShardConsumer::deliver_pending() {
  if (ctx_.processing.on_processor_error == ProcessorErrorPolicy::kDeadLetter && !paced_) {
    return deliver_bisecting();
  }
  retrieval::FetchedBatch& batch = *pending_;
  const Record& last = batch.records.back();
  const std::optional<ExtendedSequenceNumber> delivered_before = last_delivered_;
  last_delivered_ =
      ExtendedSequenceNumber(std::string(last.sequence_number()), last.sub_sequence_number());
  checkpointer_->records_delivered(*last_delivered_);
  ++pending_attempts_;
  const std::size_t count = batch.records.size();
  std::size_t bytes = 0;
  for (const Record& r : batch.records) bytes += r.data().size();
  if (!call_with_batch(batch)) {
    const auto& pc = ctx_.processing;
    if (pc.on_processor_error != ProcessorErrorPolicy::kSkip ||
        pending_attempts_ < pc.max_attempts_before_skip) {
      log(LogLevel::kError, last_error_ + "; delivering the same " + std::to_string(count) +
                                " records again after a backoff (attempt " +
                                std::to_string(pending_attempts_) + ")");
      // Until it is delivered again, a checkpoint (say the final one in shutdown_requested,
      // if shutdown or lease loss comes first) must not name its records, or they would
      // never be delivered again.
      rewind_delivered(delivered_before);
      return backoff_after_failure();
    }
    log(LogLevel::kError, last_error_ + "; skipping the batch of " + std::to_string(count) +
                              " records after " + std::to_string(pending_attempts_) +
                              " attempts (on_processor_error = kSkip)");
  }
  count_delivered(count, bytes);
  return std::nullopt;
}

// A paced processor is asked before each batch whether it takes one; empty when it does
// (with when to ask again at the latest in `paced_call`), else when to look again.
std::optional<SteadyTime> ShardConsumer::paced_gate(std::optional<SteadyTime>& paced_call) {
  if (!paced_ || pending_) return std::nullopt;
  const Pace pace = paced_->pace(*processor_checkpointer_);
  paced_call = pace.next_call;
  if (pace.accept_batch) return std::nullopt;
  // Paused by the processor: its ack (or the time it named) wakes this consumer; look again
  // within a second regardless.
  const SteadyTime backstop = ctx_.clock->now() + std::chrono::seconds(1);
  return paced_call ? std::min(*paced_call, backstop) : backstop;
}

// The records source finished (a terminal error such as a deleted stream) and every batch
// was taken: the processor checkpoints what it has processed, and the consumer ends failed
// (the worker restarts the shard and counts repeats of one cause instead of logging each).
std::optional<SteadyTime> ShardConsumer::end_failed_source() {
  Status err = fetcher_->terminal_error();
  log(LogLevel::kDebug, "stopping: " + err.to_string());
  {
    std::lock_guard<std::mutex> lock(failure_mu_);
    failure_ = err;
  }
  call_processor("shutdown_requested",
                 [&] { processor_->shutdown_requested(*processor_checkpointer_); });
  return finish(ConsumerOutcome::kFailed);
}

std::optional<SteadyTime> ShardConsumer::step_processing() {
  std::optional<SteadyTime> paced_call;
  if (auto wait = paced_gate(paced_call)) return wait;
  if (!pending_) {
    pending_ = fetcher_->take_batch();
    pending_attempts_ = 0;
    bisector_.reset();
    if (pending_) wake_fetch_task();  // room again below the prefetch bound
  }
  if (pending_) {
    if (!pending_->records.empty()) {
      batch_in_hand_.store(true);
      if (auto again = deliver_pending()) return again;
    }
    const bool ended = pending_->shard_end;
    pending_.reset();
    batch_in_hand_.store(false);
    if (ended) {
      checkpointer_->shard_ended(last_delivered_);
      state_.store(ConsumerState::kShardEnd);
      log(LogLevel::kInfo, "reached the end of the shard");
    }
    return ctx_.clock->now();  // more may be queued
  }
  if (fetcher_->finished() && fetcher_->drained()) return end_failed_source();
  // The fetch task wakes this consumer when it queued a batch or the source finished; look
  // again within a second regardless (cheap), so nothing can be missed for long.
  report_corrupt_aggregates();
  SteadyTime next = ctx_.clock->now() + std::chrono::seconds(1);
  if (paced_call) next = std::min(next, *paced_call);
  if (auto idle_call = call_if_idle()) next = std::min(next, *idle_call);
  return next;
}

// ProcessingConfig::empty_batch_interval: a shard that delivered nothing for that long gets
// an empty process_records call (the processor may checkpoint what it has done). Returns when
// the next one falls due; empty when off.
std::optional<SteadyTime> ShardConsumer::call_if_idle() {
  const auto interval = ctx_.processing.empty_batch_interval;
  if (interval.count() <= 0 || paced_) return std::nullopt;
  const SteadyTime now = ctx_.clock->now();
  if (now - last_call_at_ < interval) return last_call_at_ + interval;
  last_call_at_ = now;
  ProcessRecordsInput input{std::span<const Record>(), *processor_checkpointer_, 0};
  if (!call_processor("process_records", [&] { processor_->process_records(input); })) {
    // Nothing was delivered, so nothing is delivered again: the failure is only reported.
    log(LogLevel::kError, last_error_ + " (in an empty batch)");
  }
  return now + interval;
}

// A graceful stop; a paced processor first drains (bounded), then the final checkpoint.
std::optional<SteadyTime> ShardConsumer::step_shutdown_requested() {
  if (paced_) {
    if (auto again = drain_paced()) return again;
  }
  bool ok = call_processor("shutdown_requested",
                           [&] { processor_->shutdown_requested(*processor_checkpointer_); });
  if (!ok) log(LogLevel::kError, last_error_);
  return finish(ConsumerOutcome::kShutdown);
}

std::optional<SteadyTime> ShardConsumer::drain_paced() {
  bool ok = true;
  if (!offering_stopped_) {
    offering_stopped_ = true;
    ok = call_processor("stop_offering", [&] { paced_->stop_offering(); });
  }
  Pace pace;  // checkpoints the watermark as it moves meanwhile
  bool drained = false;
  ok = ok && call_processor("pace", [&] {
         pace = paced_->pace(*processor_checkpointer_);
         drained = paced_->drained();
       });
  if (!ok) {
    log(LogLevel::kError, last_error_ + "; not waiting for the records handed on");
    return std::nullopt;
  }
  const SteadyTime now = ctx_.clock->now();
  const SteadyTime until{std::chrono::duration_cast<SteadyTime::duration>(
      std::chrono::nanoseconds(drain_until_ns_.load()))};
  if (drained || now >= until) return std::nullopt;
  // The processor wakes this consumer when its last record is finished; look again within a
  // second regardless, and at the bound.
  SteadyTime next = std::min(until, now + std::chrono::seconds(1));
  if (pace.next_call) next = std::min(next, std::max(now, *pace.next_call));
  return next;
}

std::optional<SteadyTime> ShardConsumer::step_shard_end() {
  if (paced_) {
    const Pace pace = paced_->pace(*processor_checkpointer_);
    if (!paced_->drained()) {
      if (shutdown_.load()) {
        // Not every record was finished: wait (bounded) for those handed on, end with a
        // checkpoint of what was, and leave the shard's end to the next owner.
        state_.store(ConsumerState::kShutdownRequested);
        return step_shutdown_requested();
      }
      const SteadyTime backstop = ctx_.clock->now() + std::chrono::seconds(1);
      return pace.next_call ? std::min(*pace.next_call, backstop) : backstop;
    }
  }
  bool ok =
      call_processor("shard_ended", [&] { processor_->shard_ended(*processor_checkpointer_); });
  if (checkpointer_->last_checkpoint().is_shard_end()) {
    report_corrupt_aggregates();
    return finish(ConsumerOutcome::kShardFinished);
  }
  std::string why =
      ok ? "shard_ended() returned without checkpointing" : last_error_ + " before checkpointing";
  log(LogLevel::kError, "shard " + shard_id_ + " was read to its end but " + why +
                            ": its child shards cannot start until SHARD_END is checkpointed. Call "
                            "checkpointer.checkpoint() in shard_ended(). Retrying shard_ended().");
  ctx_.metrics->count("consumer.shard_end_not_checkpointed", 1, tags());
  if (shutdown_.load()) {
    // Do not hold the worker's shutdown up: the lease is handed back with its checkpoint
    // where the processor left it, and the next owner reads the shard's end again.
    log(LogLevel::kError, "stopping for the shutdown with shard " + shard_id_ +
                              " not checkpointed at SHARD_END; the next owner of its lease "
                              "reads its end again");
    return finish(ConsumerOutcome::kShutdown);
  }
  return backoff_after_failure();
}

}  // namespace kcl::lifecycle
