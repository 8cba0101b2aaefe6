#include "lifecycle/bisecting_delivery.h"

#include <chrono>
#include <cstdio>

#include "base/dead_letter_call.h"
#include "base/repeat_report.h"

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

std::string records_text(std::size_t n) {
  return std::to_string(n) + (n == 1 ? " record" : " records");
}

std::string seconds_text(SteadyTime::duration d) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms) / 1000.0);
  return text;
}

}  // namespace

// Delivers the batch's parts in shard order until each succeeded or was dead-lettered.
std::optional<SteadyTime> BisectingDelivery::deliver(DeliveryHost& host,
                                                     retrieval::FetchedBatch& batch) {
  if (!bisector_) {
    bisector_.emplace(batch.records.size(), processing().max_attempts_before_dead_letter);
    letter_due_ = false;
  }
  while (std::optional<BatchBisector::Part> part = bisector_->current()) {
    if (host.stop_asked()) return host.now();
    std::optional<SteadyTime> wait = letter_due_
                                         ? dead_letter_current(host, batch.records[part->begin])
                                         : deliver_part(host, batch, *part);
    if (wait) return wait;
  }
  bisector_.reset();
  return std::nullopt;
}

// One process_records call with `part`. Returns when to run next if it must wait.
std::optional<SteadyTime> BisectingDelivery::deliver_part(DeliveryHost& host,
                                                          retrieval::FetchedBatch& batch,
                                                          const BatchBisector::Part& part) {
  const std::span<const Record> records(batch.records.data() + part.begin, part.size());
  const std::optional<ExtendedSequenceNumber> before = host.allow_checkpoint_at(records.back());
  if (process(host, batch, records)) {
    host.count_processed(records.size(), bytes_of(records));
    end_series(host, records.size());
    bisector_->succeeded();
    return std::nullopt;
  }
  // Until delivered again, a checkpoint must not name the part's records; those the processor
  // checkpointed during the call are done.
  host.rewind_checkpoint_to(before);
  if (const std::size_t done = checkpointed_prefix(host, records); done > 0) {
    host.count_processed(done, bytes_of(records.first(done)));
    end_series(host, done);                                     // progress: the processor works
    if (bisector_->processed_front(done)) return std::nullopt;  // the whole part
  }
  const SteadyTime now = host.now();
  ++failures_;
  if (!failing_since_) failing_since_ = now;
  const bool was_bisecting = bisector_->bisecting();
  switch (bisector_->failed()) {
    case BatchBisector::Next::kRetryAfterBackoff:
      // A part that keeps failing fills no log: the 1st, 3rd, 10th, 100th, ... failure of the
      // series is reported, each with its count.
      if (base::worth_reporting(failures_)) {
        host.log(LogLevel::kError, host.last_error() + "; delivering the same " +
                                       records_text(bisector_->current()->size()) +
                                       " again after a backoff (attempt " +
                                       std::to_string(bisector_->failures_of_current()) +
                                       "; failure " + std::to_string(failures_) +
                                       " in a row over " + seconds_text(now - *failing_since_) +
                                       ")");
      }
      retried_ = true;
      return host.backoff_after_failure();
    case BatchBisector::Next::kDeliverNow:
      if (!was_bisecting) {
        host.log(LogLevel::kWarn, host.last_error() + "; bisecting the batch of " +
                                      std::to_string(records.size()) +
                                      " records to find the records that fail");
      }
      return std::nullopt;
    case BatchBisector::Next::kDeadLetter:
      letter_due_ = true;
      letter_error_ = host.last_error();
      return std::nullopt;
  }
  return std::nullopt;
}

void BisectingDelivery::end_series(DeliveryHost& host, std::size_t records) {
  if (failures_ > 0 && retried_) {
    host.log(LogLevel::kInfo, "process_records succeeded again (" + records_text(records) +
                                  ") after " + std::to_string(failures_) +
                                  " failed calls in a row over " +
                                  seconds_text(host.now() - failing_since_.value_or(host.now())));
  }
  failures_ = 0;
  failing_since_.reset();
  retried_ = false;
}

void BisectingDelivery::report_refusal(DeliveryHost& host, const std::string& sink,
                                       const Record& record, const Status& refused) {
  ++sink_failures_;
  host.metrics().count("dead_letter.sink_failures", 1, host.tags());
  if (base::worth_reporting(sink_failures_)) {
    host.log(LogLevel::kError, "dead-letter sink \"" + sink + "\" refused record " +
                                   position_of(record) + ": " + refused.to_string() +
                                   "; the shard waits and asks again (" +
                                   std::to_string(sink_failures_) + " refusals in a row)");
  }
}

// Hands the current part's one record to the sink. Until the sink accepts it, the shard waits
// (asked again after the failure backoff) and no checkpoint can name the record.
std::optional<SteadyTime> BisectingDelivery::dead_letter_current(DeliveryHost& host,
                                                                 const Record& record) {
  DeadLetterSink& sink = *processing().dead_letter_sink;
  DeadLetter letter{host.stream(),
                    host.shard_id(),
                    record,
                    letter_error_,
                    bisector_->failures_of_current(),
                    std::chrono::system_clock::now()};
  const std::string sink_name = sink.name();
  const Status accepted = base::ask_dead_letter_sink(sink, letter);
  if (!accepted.ok()) {
    report_refusal(host, sink_name, record, accepted);
    return host.backoff_after_failure();
  }
  if (sink_failures_ > 0) {
    host.log(LogLevel::kInfo, "dead-letter sink \"" + sink_name + "\" accepted record " +
                                  position_of(record) + " after " + std::to_string(sink_failures_) +
                                  " refusals");
  }
  sink_failures_ = 0;
  // Always {stream, shard, sink} (alerts are written against these), one stream or several.
  const MetricTag tags[] = {
      {"stream", host.stream()}, {"shard", host.shard_id()}, {"sink", sink_name}};
  host.metrics().count("records.dead_lettered", 1, MetricTags(tags));
  host.count_dead_lettered();
  host.log(LogLevel::kWarn, "dead-lettered record " + position_of(record) + " to \"" + sink_name +
                                "\" after " + std::to_string(letter.attempts) +
                                " failed deliveries: " + letter_error_);
  (void)host.allow_checkpoint_at(record);
  letter_due_ = false;
  bisector_->dead_lettered();
  return std::nullopt;
}

}  // namespace kcl::lifecycle
