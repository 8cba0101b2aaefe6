// ShardConsumer::stall_signal(): what is in a shard's way, for the worker's stall detector
// (lifecycle/stall_detector.h). Reads only atomics and guarded members the consumer's steps
// and its fetch task update, so it runs on the scheduler's thread without touching a step.
#include "lifecycle/shard_consumer.h"

namespace kcl::lifecycle {

void ShardConsumer::note_parent_wait(std::string detail) {
  std::lock_guard<std::mutex> lock(parent_mu_);
  parent_wait_ = std::move(detail);
}

std::optional<StallSignal> ShardConsumer::stall_signal(SteadyTime now) {
  // First, so its record of since when records wait stays current whatever else is found.
  std::optional<StallSignal> waiting = waiting_signal(now);
  if (auto s = callback_signal(now)) return s;
  if (auto s = checkpoint_signal()) return s;
  if (auto s = parent_signal()) return s;
  if (auto s = reads_signal()) return s;
  return waiting;
}

std::optional<StallSignal> ShardConsumer::callback_signal(SteadyTime now) const {
  const std::int64_t started_ns = callback_started_ns_.load();
  if (started_ns == 0) return std::nullopt;
  const SteadyTime started{
      std::chrono::duration_cast<SteadyTime::duration>(std::chrono::nanoseconds(started_ns))};
  return StallSignal{kStallProcessorCallback,
                     std::string("the processor's ") + callback_name_.load() + " of shard " +
                         lease_key_ + " has been running for " + seconds_text(now - started),
                     started};
}

std::optional<StallSignal> ShardConsumer::checkpoint_signal() const {
  const std::optional<SteadyTime> since = checkpoint_failures_.since();
  if (!since) return std::nullopt;
  const std::uint64_t n = checkpoint_failures_.consecutive();
  return StallSignal{kStallCheckpointRejected,
                     std::to_string(n) + (n == 1 ? " checkpoint" : " checkpoints in a row") +
                         " rejected: " + checkpoint_failures_.last_failure().to_string(),
                     *since};
}

std::optional<StallSignal> ShardConsumer::parent_signal() const {
  if (state_.load() != ConsumerState::kWaitingOnParents) return std::nullopt;
  std::lock_guard<std::mutex> lock(parent_mu_);
  if (parent_wait_.empty()) return std::nullopt;
  return StallSignal{kStallWaitingForParent, parent_wait_, created_at_};
}

std::optional<StallSignal> ShardConsumer::reads_signal() const {
  const std::optional<SteadyTime> since = reads_->failures.since();
  if (!since) return std::nullopt;
  const bool fan_out = ctx_.retrieval.mode == RetrievalMode::kFanOut;
  const std::uint64_t n = reads_->failures.consecutive();
  return StallSignal{fan_out ? kStallFanOutFailing : kStallThrottled,
                     reads_->failures.what() + " failed " + std::to_string(n) +
                         (n == 1 ? " time" : " times in a row") + ": " +
                         reads_->failures.last_failure().message(),
                     *since};
}

// Records are waiting when a batch is in hand, fetched batches are queued or the last answer
// was behind the tip; a shard idle at the tip has none of these. Delivering ends the wait. With
// nothing fetched, so does an answer read: a shard behind the tip may answer empty batches for
// a while as its iterator moves on.
std::optional<StallSignal> ShardConsumer::waiting_signal(SteadyTime now) {
  const retrieval::RecordsSource* source = source_.load();
  const std::size_t queued = source ? source->queued_records() : 0;
  const std::int64_t behind = source ? source->millis_behind_latest() : 0;
  const bool in_hand = batch_in_hand_.load();
  const std::uint64_t delivered = delivered_.load(std::memory_order_relaxed);
  const std::uint64_t answers = reads_->answers.load(std::memory_order_relaxed);
  const bool fetched = in_hand || queued > 0;
  const bool moved = delivered != seen_delivered_ || (!fetched && answers != seen_answers_);
  seen_delivered_ = delivered;
  seen_answers_ = answers;
  if (moved || (!fetched && behind <= 0)) {
    waiting_since_.reset();
    if (!fetched && behind <= 0) return std::nullopt;
  }
  if (!waiting_since_) waiting_since_ = now;
  std::string detail = in_hand ? "a batch in hand, " : "";
  detail += std::to_string(queued) + " records fetched and waiting, " + std::to_string(behind) +
            " ms behind the tip, none delivered for " + seconds_text(now - *waiting_since_);
  return StallSignal{kStallNoProgress, std::move(detail), *waiting_since_};
}

}  // namespace kcl::lifecycle
