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

// Delivers the batch's parts in shard order, and hands each poison record to the sink, until
// every record was processed or dead-lettered.
std::optional<SteadyTime> BisectingDelivery::deliver(DeliveryHost& host,
                                                     retrieval::FetchedBatch& batch) {
  if (!bisector_) {
    bisector_.emplace(batch.records.size(), processing().max_attempts_before_dead_letter, vouched_);
  }
  for (;;) {
    const std::optional<std::size_t> letter = bisector_->letter();
    const std::optional<BatchBisector::Part> part = bisector_->current();
    if (!letter && !part) break;
    if (host.stop_asked()) return host.now();
    std::optional<SteadyTime> wait =
        letter ? dead_letter(host, batch, *letter) : deliver_part(host, batch, *part);
    if (wait) return wait;
  }
  vouched_ = bisector_->last_succeeded();
  bisector_.reset();
  return std::nullopt;
}

// One process_records call with `part`. Returns when to run next if it must wait.
std::optional<SteadyTime> BisectingDelivery::deliver_part(DeliveryHost& host,
                                                          retrieval::FetchedBatch& batch,
                                                          const BatchBisector::Part& part) {
  const std::span<const Record> records(batch.records.data() + part.begin, part.size());
  // A suspect's later neighbours: no checkpoint may name them (it would pass the suspect)
  // until the suspect is dead-lettered; checkpoint() during the call names the record before
  // the suspect.
  const bool look_ahead = bisector_->suspect().has_value();
  std::optional<ExtendedSequenceNumber> before;
  if (!look_ahead) before = host.allow_checkpoint_at(records.back());
  if (process(host, batch, records)) {
    host.count_processed(records.size(), bytes_of(records));
    end_series(host, records.size());
    bisector_->succeeded();
    if (bisector_->letter()) {  // the suspect is poison
      letter_error_ = suspect_error_;
      letter_reason_ = "the records after it succeeded";
    }
    return std::nullopt;
  }
  if (!look_ahead) {
    // Until delivered again, a checkpoint must not name the part's records; those the
    // processor checkpointed during the call are done.
    host.rewind_checkpoint_to(before);
    if (const std::size_t done = checkpointed_prefix(host, records); done > 0) {
      host.count_processed(done, bytes_of(records.first(done)));
      // Progress: the processor works.
      end_series(host, done);
      if (bisector_->processed_front(done)) return std::nullopt;  // the whole part
    }
  }
  return after_failure(host, batch);
}

// What the current part's failure means (BatchBisector), said once per series.
std::optional<SteadyTime> BisectingDelivery::after_failure(DeliveryHost& host,
                                                           const retrieval::FetchedBatch& batch) {
  const SteadyTime now = host.now();
  ++failures_;
  if (!failing_since_) failing_since_ = now;
  if (outage_outlasted_limit(host)) {
    bisector_->give_up();
    if (!gave_up_) {
      gave_up_ = true;
      host.log(LogLevel::kWarn,
               "no process_records call has succeeded for " + seconds_text(now - *failing_since_) +
                   " (dead_letter_outage_limit " +
                   seconds_text(processing().dead_letter_outage_limit) +
                   "): from now on, until one succeeds, a record that fails " +
                   std::to_string(processing().max_attempts_before_dead_letter) +
                   " times alone is dead-lettered although no neighbour of it succeeds");
    }
  }
  const std::string& error = host.last_error();
  const std::string series = "failure " + std::to_string(failures_) + " in a row over " +
                             seconds_text(now - *failing_since_);
  const bool was_bisecting = bisector_->bisecting();
  const std::optional<std::size_t> suspect = bisector_->suspect();
  const std::size_t first = suspect ? *suspect : bisector_->current()->begin;
  switch (bisector_->failed()) {
    case BatchBisector::Next::kRetryAfterBackoff:
      // A part that keeps failing fills no log: the 1st, 3rd, 10th, 100th, ... failure of the
      // series is reported, each with its count.
      if (base::worth_reporting(failures_)) {
        host.log(LogLevel::kError,
                 error + "; delivering the same " + records_text(bisector_->current()->size()) +
                     " again after a backoff (attempt " +
                     std::to_string(bisector_->attempts_of_current()) + "; " + series + ")");
      }
      retried_ = true;
      return host.backoff_after_failure();
    case BatchBisector::Next::kDeliverNow:
      if (!was_bisecting && base::worth_reporting(++bisections_)) {
        host.log(LogLevel::kWarn, error + "; bisecting the " +
                                      records_text(batch.records.size() - first) +
                                      " to find the records that fail while their neighbours "
                                      "succeed (" +
                                      series + ")");
      }
      return std::nullopt;
    case BatchBisector::Next::kLookAhead:  // the records after it say (dead_letter() logs it)
      suspect_error_ = error;
      return std::nullopt;
    case BatchBisector::Next::kDeadLetter:
      // The suspect, when its later neighbour failed after the outage limit; else the record
      // that failed alone.
      letter_error_ = suspect ? suspect_error_ : error;
      letter_reason_ = gave_up_ ? "no neighbour of it succeeded, but the failures outlasted "
                                  "dead_letter_outage_limit"
                                : "the record before it succeeded and it ends its batch";
      return std::nullopt;
    case BatchBisector::Next::kOutage:
      // Every record tried fails, the neighbours of the one that failed alone included (or it
      // has none to vouch for it): what the processor depends on is out, and nothing is
      // dead-lettered.
      if (base::worth_reporting(++outages_)) {
        host.log(
            LogLevel::kError,
            error + "; record " + position_of(batch.records[first]) +
                " fails alone and no neighbour of it succeeds: taken for an outage of what the "
                "processor depends on, not a poison record, so nothing is dead-lettered; "
                "delivering the remaining " +
                records_text(bisector_->current()->size()) +
                " again as a whole after a backoff (outage verdict " + std::to_string(outages_) +
                "; " + series + ")");
      }
      retried_ = true;
      return host.backoff_after_failure();
  }
  return std::nullopt;
}

void BisectingDelivery::end_series(DeliveryHost& host, std::size_t records) {
  if (failures_ > 0 && (retried_ || outages_ > 0)) {
    host.log(LogLevel::kInfo,
             "process_records succeeded again (" + records_text(records) + ") after " +
                 std::to_string(failures_) + " failed calls in a row over " +
                 seconds_text(host.now() - failing_since_.value_or(host.now())) +
                 (outages_ > 0 ? " (" + std::to_string(outages_) + " outage verdicts)" : ""));
  }
  failures_ = 0;
  failing_since_.reset();
  outages_ = 0;
  bisections_ = 0;
  retried_ = false;
  gave_up_ = false;
}

bool BisectingDelivery::outage_outlasted_limit(const DeliveryHost& host) const {
  const auto limit = processing().dead_letter_outage_limit;
  return limit.count() > 0 && failing_since_ && host.now() - *failing_since_ >= limit;
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

// Hands record `index` to the sink. Until the sink accepts it, the shard waits (asked again
// after the failure backoff, which goes on growing) and no checkpoint can name the record.
std::optional<SteadyTime> BisectingDelivery::dead_letter(DeliveryHost& host,
                                                         const retrieval::FetchedBatch& batch,
                                                         std::size_t index) {
  const Record& record = batch.records[index];
  DeadLetterSink& sink = *processing().dead_letter_sink;
  DeadLetter letter{host.stream(),
                    host.shard_id(),
                    record,
                    letter_error_,
                    bisector_->failures_of(index),
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
                                " failed deliveries (" + letter_reason_ + "): " + letter_error_);
  bisector_->dead_lettered();
  // A checkpoint may now name every record before the first one neither processed nor
  // dead-lettered (a suspect's later neighbours were processed before it was set aside).
  (void)host.allow_checkpoint_at(batch.records[bisector_->resolved() - 1]);
  return std::nullopt;
}

}  // namespace kcl::lifecycle
