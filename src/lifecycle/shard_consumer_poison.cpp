// ShardConsumer under ProcessorErrorPolicy::kDeadLetter: a failing batch is bisected to the
// records that keep failing (BatchBisector), and each of those is handed to the dead-letter
// sink before the shard goes on (kcl/dead_letter.h).
#include "base/dead_letter_call.h"
#include "base/repeat_report.h"
#include "lifecycle/shard_consumer.h"

namespace kcl::lifecycle {

namespace {

std::size_t bytes_of(std::span<const Record> records) {
  std::size_t bytes = 0;
  for (const Record& r : records) bytes += r.data().size();
  return bytes;
}

std::string position_of(const Record& r) {
  return std::string(r.sequence_number()) + "/" + std::to_string(r.sub_sequence_number());
}

}  // namespace

// The checkpointer may name `last` (and what came before it) from now on.
void ShardConsumer::note_delivered(const Record& last) {
  last_delivered_ =
      ExtendedSequenceNumber(std::string(last.sequence_number()), last.sub_sequence_number());
  checkpointer_->records_delivered(*last_delivered_);
}

// Delivers the pending batch's parts in shard order until each succeeded or was dead-lettered.
// Between parts, shutdown and lease loss are looked at (run() handles them): the parts not
// yet delivered are after the last record the checkpointer may name, so they are read again.
std::optional<SteadyTime> ShardConsumer::deliver_bisecting() {
  if (!bisector_) {
    bisector_.emplace(pending_->records.size(), ctx_.processing.max_attempts_before_dead_letter);
    letter_due_ = false;
  }
  while (std::optional<BatchBisector::Part> part = bisector_->current()) {
    if (shutdown_.load() || lease_lost_.load()) return ctx_.clock->now();
    std::optional<SteadyTime> wait = letter_due_ ? dead_letter_current(*part) : deliver_part(*part);
    if (wait) return wait;
  }
  bisector_.reset();
  return std::nullopt;
}

// One process_records call with `part`. Returns when to run next if it must wait.
std::optional<SteadyTime> ShardConsumer::deliver_part(const BatchBisector::Part& part) {
  retrieval::FetchedBatch& batch = *pending_;
  const std::span<const Record> records(batch.records.data() + part.begin, part.size());
  const std::optional<ExtendedSequenceNumber> delivered_before = last_delivered_;
  note_delivered(records.back());
  if (call_with_records(batch, records)) {
    count_delivered(records.size(), bytes_of(records));
    bisector_->succeeded();
    return std::nullopt;
  }
  // Until delivered again, a checkpoint must not name the part's records.
  rewind_delivered(delivered_before);
  const bool was_bisecting = bisector_->bisecting();
  switch (bisector_->failed()) {
    case BatchBisector::Next::kRetryAfterBackoff:
      log(LogLevel::kError, last_error_ + "; delivering the same " +
                                std::to_string(records.size()) +
                                " records again after a backoff (attempt " +
                                std::to_string(bisector_->failures_of_current()) + ")");
      return backoff_after_failure();
    case BatchBisector::Next::kDeliverNow:
      if (!was_bisecting) {
        log(LogLevel::kWarn, last_error_ + "; bisecting the batch of " +
                                 std::to_string(records.size()) +
                                 " records to find the records that fail");
      }
      return std::nullopt;
    case BatchBisector::Next::kDeadLetter:
      letter_due_ = true;
      letter_error_ = last_error_;
      return std::nullopt;
  }
  return std::nullopt;
}

// Hands the current part's one record to the sink. Until the sink accepts it, the shard waits
// (asked again after the failure backoff) and no checkpoint can name the record.
std::optional<SteadyTime> ShardConsumer::dead_letter_current(const BatchBisector::Part& part) {
  const Record& record = pending_->records[part.begin];
  DeadLetterSink& sink = *ctx_.processing.dead_letter_sink;
  DeadLetter letter{stream_,
                    shard_id_,
                    record,
                    letter_error_,
                    bisector_->failures_of_current(),
                    std::chrono::system_clock::now()};
  const std::string sink_name = sink.name();
  const Status accepted = base::ask_dead_letter_sink(sink, letter);
  if (!accepted.ok()) {
    ++sink_failures_;
    ctx_.metrics->count("dead_letter.sink_failures", 1, tags());
    if (base::worth_reporting(sink_failures_)) {
      log(LogLevel::kError, "dead-letter sink \"" + sink_name + "\" refused record " +
                                position_of(record) + ": " + accepted.to_string() +
                                "; the shard waits and asks again (" +
                                std::to_string(sink_failures_) + " refusals in a row)");
    }
    return backoff_after_failure();
  }
  if (sink_failures_ > 0) {
    log(LogLevel::kInfo, "dead-letter sink \"" + sink_name + "\" accepted record " +
                             position_of(record) + " after " + std::to_string(sink_failures_) +
                             " refusals");
  }
  sink_failures_ = 0;
  consecutive_failures_ = 0;
  // Always {stream, shard, sink} (alerts are written against these), one stream or several.
  const MetricTag tags[] = {{"stream", stream_}, {"shard", shard_id_}, {"sink", sink_name}};
  ctx_.metrics->count("records.dead_lettered", 1, MetricTags(tags));
  dead_lettered_.fetch_add(1, std::memory_order_relaxed);
  if (ctx_.records_dead_lettered) ctx_.records_dead_lettered->fetch_add(1);
  log(LogLevel::kWarn, "dead-lettered record " + position_of(record) + " to \"" + sink_name +
                           "\" after " + std::to_string(letter.attempts) +
                           " failed deliveries: " + letter_error_);
  note_delivered(record);
  letter_due_ = false;
  bisector_->dead_lettered();
  return std::nullopt;
}

}  // namespace kcl::lifecycle
