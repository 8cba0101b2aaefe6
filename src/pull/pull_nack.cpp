// PullHub::nack: a record the application gave up on goes to the dead-letter sink, and only
// once the sink accepted it does it count as acknowledged (so the watermark, and with it the
// checkpoint, passes it only then).
#include <algorithm>

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
  for (std::uint64_t refusals = 0;; ++refusals) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (Status refused = ack_refusal_locked(shard, index); !refused.ok()) return refused;
    }
    const Status accepted = base::ask_dead_letter_sink(*sink, letter);
    std::unique_lock<std::mutex> lock(mu_);
    if (accepted.ok()) {
      if (shard.metrics_) {
        const MetricTag tags[] = {
            {"stream", shard.stream_name_}, {"shard", shard.shard_id_}, {"sink", sink_name}};
        shard.metrics_->count("records.dead_lettered", 1, MetricTags(tags));
      }
      break;  // (the lock is released before ack() takes it again)
    }
    if (shard.logger_ && base::worth_reporting(refusals + 1) &&
        shard.logger_->enabled(LogLevel::kError)) {
      shard.logger_->log(LogLevel::kError, "pull " + shard.shard_id_,
                         "dead-letter sink \"" + sink_name + "\" refused nacked record " +
                             std::string(record.sequence_number()) + ": " + accepted.to_string() +
                             "; asking again (" + std::to_string(refusals + 1) +
                             " refusals in a row); the shard's checkpoint waits");
    }
    if (shard.metrics_) {
      const MetricTag tag{"shard", shard.shard_id_};
      shard.metrics_->count("dead_letter.sink_failures", 1, MetricTags(&tag, 1));
    }
    lock.unlock();
    wait_before_asking_again(shard, backoff);  // on the caller's thread
    backoff = std::min(backoff * 2, limits_.sink_backoff_max);
  }
  return ack(shard, index);
}

void PullHub::wait_before_asking_again(const PullShard& shard, std::chrono::milliseconds backoff) {
  std::unique_lock<std::mutex> lock(mu_);
  ended_cv_.wait_for(lock, backoff, [&] { return shard.finished_; });
}

}  // namespace kcl::pull
