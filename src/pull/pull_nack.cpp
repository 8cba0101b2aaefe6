// PullHub::nack: a record the application gave up on goes to the dead-letter sink, and only
// once the sink accepted it does it count as acknowledged (so the watermark, and with it the
// checkpoint, passes it only then).
#include <algorithm>
#include <utility>

#include "base/dead_letter_call.h"
#include "base/repeat_report.h"
#include "pull/pull_hub.h"

namespace kcl::pull {

Status PullHub::nack(PullShard& shard, std::uint64_t index, const Record& record,
                     const std::string& reason) {
  DeadLetterSink* sink = limits_.dead_letter_sink.get();
  if (!sink) {
    return Status(StatusCode::kFailedPrecondition,
                  "nack() needs a dead-letter sink: set worker.processing.dead_letter_sink");
  }
  DeadLetter letter{
      shard.stream_name(), shard.shard_id(), record, reason, 1, std::chrono::system_clock::now()};
  const std::string sink_name = sink->name();
  auto backoff = limits_.sink_backoff_base;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (Status refused = ack_refusal_locked(shard, index); !refused.ok()) return refused;
    }
    const Status accepted = base::ask_dead_letter_sink(*sink, letter);
    if (accepted.ok()) {
      sink_accepted(shard, sink_name);
      break;
    }
    sink_refused(shard, sink_name, record, accepted);
    wait_before_asking_again(shard, backoff);  // on the caller's thread
    backoff = std::min(backoff * 2, limits_.sink_backoff_max);
  }
  return ack(shard, index);
}

Logger* PullHub::logger_locked(const PullShard& shard) const {
  return shard.finished_ ? nullptr : shard.logger_;
}

void PullHub::sink_accepted(const PullShard& shard, const std::string& sink_name) {
  std::uint64_t refusals = 0;
  Logger* logger = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    refusals = std::exchange(sink_refusals_, 0);  // the series of refusals ends
    logger = logger_locked(shard);
    if (shard.metrics_) {
      const MetricTag tags[] = {
          {"stream", shard.stream_name_}, {"shard", shard.shard_id_}, {"sink", sink_name}};
      shard.metrics_->count("records.dead_lettered", 1, MetricTags(tags));
    }
  }
  if (refusals > 0 && logger && logger->enabled(LogLevel::kInfo)) {
    logger->log(LogLevel::kInfo, "pull " + shard.shard_id_,
                "dead-letter sink \"" + sink_name + "\" accepted again after " +
                    std::to_string(refusals) + " refusals");
  }
}

void PullHub::sink_refused(const PullShard& shard, const std::string& sink_name,
                           const Record& record, const Status& why) {
  std::uint64_t nth = 0;
  Logger* logger = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    nth = ++sink_refusals_;
    logger = logger_locked(shard);
    if (shard.metrics_) {
      const MetricTag tag{"shard", shard.shard_id_};
      shard.metrics_->count("dead_letter.sink_failures", 1, MetricTags(&tag, 1));
    }
  }
  if (logger && base::worth_reporting(nth) && logger->enabled(LogLevel::kError)) {
    logger->log(LogLevel::kError, "pull " + shard.shard_id_,
                "dead-letter sink \"" + sink_name + "\" refused nacked record " +
                    std::string(record.sequence_number()) + ": " + why.to_string() +
                    "; asking again (" + std::to_string(nth) +
                    " refusals in a row, of every record nacked); the shard's checkpoint "
                    "waits");
  }
}

void PullHub::wait_before_asking_again(const PullShard& shard, std::chrono::milliseconds backoff) {
  std::unique_lock<std::mutex> lock(mu_);
  ended_cv_.wait_for(lock, backoff, [&] { return shard.finished_; });
}

}  // namespace kcl::pull
