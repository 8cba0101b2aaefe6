#include "lifecycle/shard_consumer.h"

#include <algorithm>
#include <cstdint>

#include "base/repeat_report.h"
#include "leases/stream_identifier.h"
#include "retrieval/shard_fetcher.h"
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

retrieval::RecordsSourceFactory polling_sources(kinesis::KinesisClient& kinesis,
                                                const RetrievalConfig& retrieval,
                                                const Clock& clock) {
  return [&kinesis, retrieval, &clock](const std::string& stream, const std::string& shard_id,
                                       const retrieval::StartPosition& position) {
    return std::static_pointer_cast<retrieval::RecordsSource>(
        std::make_shared<retrieval::ShardFetcher>(kinesis, stream, shard_id, position, retrieval,
                                                  clock));
  };
}

namespace {

std::vector<MetricTag> tags_of(const Lease& lease, const std::string& shard_id,
                               const std::string& stream) {
  std::vector<MetricTag> tags{MetricTag{"shard", shard_id}};
  // Several streams: the stream too (one stream's metrics keep the labels they always had).
  if (!leases::lease_stream_identifier(lease).empty()) tags.push_back(MetricTag{"stream", stream});
  return tags;
}

}  // namespace

ShardNames::ShardNames(const Lease& lease, const std::string& default_stream)
    : lease_key(lease.lease_key),
      shard_id(leases::lease_shard_id(lease)),
      stream(leases::lease_stream_identifier(lease).empty() ? default_stream
                                                            : leases::lease_stream_name(lease)),
      component("consumer " + lease.lease_key),
      tags_(tags_of(lease, shard_id, stream)) {}

ShardConsumer::ShardConsumer(ConsumerContext& ctx, Lease lease)
    : ctx_(ctx),
      names_(lease, ctx.reading.stream),
      tenure_(ctx.leases.held->tenure_of(lease.lease_key)),
      lease_(std::move(lease)),
      watch_(ctx.runtime.clock->now()),
      calls_(*ctx.runtime.clock),
      reader_(*ctx.runtime.pool, *ctx.runtime.clock, ctx.runtime.logger, names_.component,
              ctx.reading.mode == RetrievalMode::kFanOut ? "SubscribeToShard" : "GetRecords") {
  // Not held any more (lost before this consumer was made): it ends at its first step.
  if (!tenure_) lease_lost_.store(true);
}

ShardConsumer::~ShardConsumer() = default;

void ShardConsumer::log(LogLevel level, const std::string& message) const {
  Logger* logger = ctx_.runtime.logger;
  if (logger && logger->enabled(level)) logger->log(level, names_.component, message);
}

Status ShardConsumer::failure() const {
  std::lock_guard<std::mutex> lock(failure_mu_);
  return failure_;
}

void ShardConsumer::notify_lease_lost() { lease_lost_.store(true); }
void ShardConsumer::request_shutdown(std::chrono::milliseconds drain) {
  const std::int64_t until =
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          (now() + std::max(drain, std::chrono::milliseconds(0))).time_since_epoch())
          .count();
  std::int64_t seen = drain_until_ns_.load();
  while (until < seen && !drain_until_ns_.compare_exchange_weak(seen, until)) {
  }
  shutdown_.store(true);
}

SteadyTime ShardConsumer::drain_until() const {
  return SteadyTime{std::chrono::duration_cast<SteadyTime::duration>(
      std::chrono::nanoseconds(drain_until_ns_.load()))};
}

bool ShardConsumer::call_processor(const char* what, const std::function<void()>& call) {
  if (calls_.call(what, call)) return true;
  ctx_.counters->processor_failed();
  metrics().count("processor.failures", 1, tags());
  return false;
}

std::optional<ExtendedSequenceNumber> ShardConsumer::allow_checkpoint_at(const Record& last) {
  return checkpoints_->allow_at(last);
}

void ShardConsumer::rewind_checkpoint_to(const std::optional<ExtendedSequenceNumber>& previous) {
  checkpoints_->rewind_to(previous);
}

void ShardConsumer::count_processed(std::size_t count, std::size_t bytes) {
  consecutive_failures_ = 0;
  ctx_.counters->records_processed(count);
  delivered_.fetch_add(count, std::memory_order_relaxed);
  metrics().count("consumer.records_processed", static_cast<double>(count), tags());
  metrics().count("consumer.bytes_processed", static_cast<double>(bytes), tags());
  if (ctx_.leases.load) ctx_.leases.load->note_processed(names_.lease_key, bytes);  // balancing
}

void ShardConsumer::count_skipped(std::size_t count) {
  consecutive_failures_ = 0;
  metrics().count("consumer.records_skipped", static_cast<double>(count), tags());
}

// A record set aside is no sign that the processor works: the series of failures (and its
// backoff) goes on until a call succeeds.
void ShardConsumer::count_dead_lettered() {
  dead_lettered_.fetch_add(1, std::memory_order_relaxed);
  ctx_.counters->record_dead_lettered();
}

SteadyTime ShardConsumer::backoff_after_failure() {
  ++consecutive_failures_;
  auto base = ctx_.timings.failure_backoff_base;
  auto cap = ctx_.timings.failure_backoff_max;
  auto delay = base * (1LL << std::min(consecutive_failures_ - 1, 20));
  if (delay > cap || delay.count() <= 0) delay = cap;
  failed_until_ = now() + delay;
  return *failed_until_;
}

void ShardConsumer::report_corrupt_aggregates() {
  if (const std::uint64_t added = reader_.new_corrupt_aggregates()) {
    ctx_.counters->corrupt_aggregates(added);
  }
}

void ShardConsumer::drop_misrouted_aggregates(retrieval::FetchedBatch& batch) {
  if (!hash_range_) {
    const auto& r = lease_.hash_key_range;
    hash_range_ = r ? retrieval::parse_shard_hash_range(r->starting_hash_key, r->ending_hash_key)
                    : std::nullopt;
    if (!*hash_range_) {
      log(LogLevel::kWarn,
          "drop_aggregates_outside_shard is on, but the lease has no usable hash key range: "
          "no aggregate of this shard is dropped");
    }
  }
  if (!*hash_range_) return;
  std::string first;
  if (const std::size_t dropped =
          retrieval::drop_aggregates_outside(batch.records, **hash_range_, &first)) {
    log(LogLevel::kInfo,
        "dropped " + std::to_string(dropped) +
            " KPL aggregate(s) holding records outside this shard's hash key range (the first "
            "at sequence number " +
            first +
            "): written while the producer's shard map was stale, their records sent again to "
            "their own shards (drop_aggregates_outside_shard, the Java KCL's rule)");
  }
}

void ShardConsumer::mark_done() {
  // The shard's levels (its lag, its queue) are no longer this worker's to report, unless it
  // failed and is started again here.
  if (outcome_.load() != ConsumerOutcome::kFailed) metrics().forget(tags());
  state_.store(ConsumerState::kDone);
  if (ctx_.runtime.on_consumer_done) ctx_.runtime.on_consumer_done();
}

std::optional<SteadyTime> ShardConsumer::finish(ConsumerOutcome outcome) {
  reader_.stop();  // no more calls for this shard
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
    // reader is started right after initialize() returned).
    if (!reader_.started()) return finish(ConsumerOutcome::kLeaseLost);
    s = ConsumerState::kLeaseLost;
    state_.store(s);
  } else if (shutdown_.load() &&
             (s == ConsumerState::kWaitingOnParents || s == ConsumerState::kInitializing ||
              s == ConsumerState::kProcessing)) {
    // Deliver nothing more; a batch already queued is simply not delivered (it is after the
    // last checkpoint the processor may write, so the next owner reads it again).
    if (!reader_.started()) return finish(ConsumerOutcome::kShutdown);
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
      call_processor("lease_lost", [&] { delivery_->processor().lease_lost(); });
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
    auto unfinished = shardsync::unfinished_parent(*ctx_.leases.store, lease_);
    if (!unfinished.ok()) {
      if (auto line = parent_reads_.failed(unfinished.status(), now())) {
        log(LogLevel::kWarn, *line);
      }
      return now() + ctx_.timings.parent_check_interval;
    }
    if (auto line = parent_reads_.succeeded(now())) log(LogLevel::kInfo, *line);
    if (const std::optional<Lease>& parent = *unfinished) {
      const std::string owner = parent->actual_owner().value_or("");
      watch_.note_parent_wait(
          "waiting for parent " + parent->lease_key + " (" +
          (owner.empty() ? std::string("held by no worker") : "held by worker " + owner) +
          ", checkpoint " + parent->checkpoint.to_string() + ", not SHARD_END)");
      return now() + ctx_.timings.parent_check_interval;
    }
    log(LogLevel::kInfo, "parents finished; starting");
  }
  state_.store(ConsumerState::kInitializing);
  return now();
}

// Reads the lease (and adopts it) before anything else: the held copy may lag the table (a
// checkpoint write that was applied but whose answer was lost leaves the old checkpoint
// cached), so nothing is replayed from an older position and no later checkpoint can move
// backwards. The read is fenced on this consumer's tenure, so the lease read is this tenure's.
std::optional<Status> ShardConsumer::load_checkpoint() {
  if (checkpoints_) return std::nullopt;
  if (!tenure_) return Status(StatusCode::kLeaseLost, "not held");
  auto stored = ctx_.leases.held->refresh_held(names_.lease_key, tenure_);
  if (!stored.ok()) return stored.status();
  lease_ = std::move(stored).value();
  checkpoints_ = std::make_unique<ConsumerCheckpoints>(
      std::make_unique<checkpoint::ShardCheckpointer>(*ctx_.leases.held, names_.lease_key, *tenure_,
                                                      lease_.checkpoint, lease_.pending_checkpoint),
      &checkpoint_failures_, ctx_.runtime.clock);
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
          ctx_.reading.initial_position_of(names_.stream).timestamp);
    case ExtendedSequenceNumber::Kind::kTrimHorizon:
      return retrieval::StartPosition::trim_horizon();
    default:
      return std::nullopt;
  }
}

// Makes the delivery (and the processor) with the context's factory; what went wrong when
// the application's factory threw or returned none.
std::optional<std::string> ShardConsumer::make_delivery() {
  if (delivery_) return std::nullopt;
  bool ok = call_processor("factory.create",
                           [&] { delivery_ = ctx_.deliveries->create(names_.shard_id); });
  if (ok && delivery_) return std::nullopt;
  delivery_.reset();
  return ok ? "the processor factory returned no processor" : last_error();
}

SteadyTime ShardConsumer::retry_initializing(LogLevel level, const std::string& why) {
  (void)init_failures_.failed(Status(StatusCode::kUnavailable, why), now());
  const auto attempt = static_cast<std::uint64_t>(consecutive_failures_) + 1;
  if (base::worth_reporting(attempt)) {
    log(level, why + " (attempt " + std::to_string(attempt) + "; again after a backoff)");
  }
  return backoff_after_failure();
}

// The shard's records source, in a fetch task of its own on the pool; the delivery learns
// how to wake this consumer.
void ShardConsumer::start_fetching(const retrieval::StartPosition& position) {
  reader_.start(ctx_.reading.make_source(names_.stream, names_.shard_id, position),
                weak_from_this());
  delivery_->started(*this, [consumer = weak_from_this(), pool = ctx_.runtime.pool](SteadyTime at) {
    if (auto c = consumer.lock()) pool->schedule(c, at);
  });
}

std::optional<SteadyTime> ShardConsumer::fail_unusable(const ExtendedSequenceNumber& start) {
  Status bad(
      StatusCode::kFailedPrecondition,
      "lease " + names_.lease_key + " holds an unusable checkpoint '" + start.to_string() + "'");
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
    return retry_initializing(LogLevel::kWarn,
                              "initializing: reading the lease: " + failed->to_string());
  }
  const ExtendedSequenceNumber start = checkpoints_->checkpointer().last_checkpoint();
  if (start.is_shard_end()) {
    log(LogLevel::kInfo, "lease already holds SHARD_END; nothing to read");
    return finish(ConsumerOutcome::kShardFinished);
  }
  const std::optional<retrieval::StartPosition> position = start_position(start);
  if (!position) return fail_unusable(start);
  if (auto failed = make_delivery()) return retry_initializing(LogLevel::kError, *failed);
  InitializationInput init;
  init.shard_id = names_.shard_id;
  init.stream_name = names_.stream;
  init.starting_position = start;
  init.pending_checkpoint = checkpoints_->checkpointer().pending_checkpoint();
  init.pending_checkpoint_state = lease_.pending_checkpoint_state;
  if (!call_processor("initialize", [&] { delivery_->processor().initialize(init); })) {
    return retry_initializing(LogLevel::kError, last_error());
  }
  consecutive_failures_ = 0;
  (void)init_failures_.succeeded(now());
  start_fetching(*position);
  log(LogLevel::kInfo, "initialized at " + start.to_string());
  state_.store(ConsumerState::kProcessing);
  return now();
}

// The records source finished (a terminal error such as a deleted stream) and every batch
// was taken: the processor checkpoints what it has processed, and the consumer ends failed
// (the worker restarts the shard and counts repeats of one cause instead of logging each).
std::optional<SteadyTime> ShardConsumer::end_failed_source() {
  Status err = reader_.terminal_error();
  log(LogLevel::kDebug, "stopping: " + err.to_string());
  {
    std::lock_guard<std::mutex> lock(failure_mu_);
    failure_ = err;
  }
  call_processor("shutdown_requested",
                 [&] { delivery_->processor().shutdown_requested(checkpointer()); });
  return finish(ConsumerOutcome::kFailed);
}

// One batch per step. The delivery is asked before a batch is taken whether it takes one
// (a paced processor may hold the shard); a batch it could not finish is kept and delivered
// on at the time it names.
std::optional<SteadyTime> ShardConsumer::step_processing() {
  std::optional<SteadyTime> call_by;  // when the delivery wants to be asked again
  if (!pending_) {
    const Gate gate = delivery_->gate(*this);
    call_by = gate.next_call;
    if (!gate.accept) {
      // Held by the processor: its ack (or the time it named) wakes this consumer; look
      // again within a second regardless.
      const SteadyTime backstop = now() + std::chrono::seconds(1);
      return call_by ? std::min(*call_by, backstop) : backstop;
    }
    pending_ = reader_.take();
    if (pending_ && ctx_.reading.drop_aggregates_outside_shard) {
      drop_misrouted_aggregates(*pending_);
    }
  }
  // A batch that failed waits out its backoff, however early the consumer is woken (the fetch
  // task wakes it at once whenever it queued more records).
  if (pending_ && failed_until_ && now() < *failed_until_) return *failed_until_;
  if (pending_) {
    if (!pending_->records.empty()) {
      batch_in_hand_.store(true);
      if (auto again = delivery_->deliver(*this, *pending_)) return again;
    }
    return batch_finished();
  }
  if (reader_.finished_and_drained()) return end_failed_source();
  // The fetch task wakes this consumer when it queued a batch or the source finished; look
  // again within a second regardless (cheap), so nothing can be missed for long.
  report_corrupt_aggregates();
  // Only once the source has answered (0 before: a shard whose reads fail would show as
  // caught up), and again after each batch (its delivery published the batch's lag).
  if (const std::int64_t lag = reader_.millis_behind();
      reads_answered() > 0 && idle_lag_published_ != lag) {
    metrics().gauge("consumer.millis_behind_latest", static_cast<double>(lag), tags());
    idle_lag_published_ = lag;
  }
  SteadyTime next = now() + std::chrono::seconds(1);
  if (call_by) next = std::min(next, *call_by);
  if (auto idle_call = delivery_->idle(*this)) next = std::min(next, *idle_call);
  return next;
}

std::optional<SteadyTime> ShardConsumer::batch_finished() {
  const bool ended = pending_->shard_end;
  pending_.reset();
  failed_until_.reset();
  idle_lag_published_.reset();  // the delivery published the batch's lag since
  batch_in_hand_.store(false);
  if (ended) {
    checkpoints_->shard_ended();
    state_.store(ConsumerState::kShardEnd);
    log(LogLevel::kInfo, "reached the end of the shard");
  }
  return now();  // more may be queued
}

// A graceful stop: the delivery drains first (a paced one, bounded), then the final checkpoint.
std::optional<SteadyTime> ShardConsumer::step_shutdown_requested() {
  if (auto again = delivery_->drain(*this, drain_until())) return again;
  bool ok = call_processor("shutdown_requested",
                           [&] { delivery_->processor().shutdown_requested(checkpointer()); });
  if (!ok) log(LogLevel::kError, last_error());
  return finish(ConsumerOutcome::kShutdown);
}

std::optional<SteadyTime> ShardConsumer::step_shard_end() {
  if (auto wait = delivery_->before_shard_end(*this)) {
    if (!shutdown_.load()) return wait;
    // Not every record was finished: wait (bounded) for those handed on, end with a
    // checkpoint of what was, and leave the shard's end to the next owner.
    state_.store(ConsumerState::kShutdownRequested);
    return step_shutdown_requested();
  }
  bool ok =
      call_processor("shard_ended", [&] { delivery_->processor().shard_ended(checkpointer()); });
  if (checkpoints_->checkpointer().last_checkpoint().is_shard_end()) {
    report_corrupt_aggregates();
    return finish(ConsumerOutcome::kShardFinished);
  }
  // Why, and what to do: the processor failed, or its checkpoint was refused (the lease table
  // failing: the processor is right, the write is what to look at), or it did not checkpoint.
  std::string why;
  if (!ok) {
    why = last_error() + " before checkpointing";
  } else if (checkpoint_failures_.consecutive() > 0) {
    why = "its checkpoint failed (" + checkpoint_failures_.last_failure().to_string() + ")";
  } else {
    why =
        "shard_ended() returned without checkpointing. Call checkpointer.checkpoint() in "
        "shard_ended()";
  }
  // Once per series (the 1st, 3rd, 10th, 100th, ... attempt), with its count.
  const auto attempt = static_cast<std::uint64_t>(consecutive_failures_) + 1;
  if (base::worth_reporting(attempt) || shutdown_.load()) {
    log(LogLevel::kError,
        "shard " + names_.shard_id + " was read to its end but " + why +
            ": its child shards cannot start until SHARD_END is checkpointed. Retrying "
            "shard_ended() (attempt " +
            std::to_string(attempt) + ").");
  }
  metrics().count("consumer.shard_end_not_checkpointed", 1, tags());
  if (shutdown_.load()) {
    // Do not hold the worker's shutdown up: the lease is handed back with its checkpoint
    // where the processor left it, and the next owner reads the shard's end again.
    log(LogLevel::kError, "stopping for the shutdown with shard " + names_.shard_id +
                              " not checkpointed at SHARD_END; the next owner of its lease "
                              "reads its end again");
    return finish(ConsumerOutcome::kShutdown);
  }
  return backoff_after_failure();
}

}  // namespace kcl::lifecycle
