// ShardConsumer::stall_signal(): what is in a shard's way, for the worker's stall detector
// (lifecycle/stall_detector.h). Reads only atomics and guarded members the consumer's steps
// and its fetch task update, so it runs on the scheduler's thread without touching a step.
#include "lifecycle/shard_consumer.h"

namespace kcl::lifecycle {

std::optional<StallSignal> ShardConsumer::stall_signal(SteadyTime now) {
  // First, so its record of since when records wait stays current whatever else is found.
  const retrieval::RecordsSource* source = reader_.queued_source();
  ShardProgress progress;
  progress.queued = source ? source->queued_records() : 0;
  progress.behind = source ? source->millis_behind_latest() : 0;
  progress.in_hand = batch_in_hand_.load();
  progress.delivered = delivered_.load(std::memory_order_relaxed);
  progress.answers = reader_.health().answers.load(std::memory_order_relaxed);
  std::optional<StallSignal> waiting = watch_.waiting_signal(now, progress);
  if (auto s = calls_.signal(now, names_.lease_key)) return s;
  if (auto s = initializing_signal()) return s;
  if (auto s = checkpoint_signal()) return s;
  if (state_.load() == ConsumerState::kWaitingOnParents) {
    if (auto s = watch_.parent_signal()) return s;
  }
  if (auto s = reads_signal()) return s;
  return waiting;
}

std::uint64_t ShardConsumer::reads_answered() const {
  return reader_.health().answers.load(std::memory_order_relaxed);
}

// Initializing fails again and again (initialize() throws, the lease cannot be read, the
// factory fails): the shard is not read at all, so no lag or queued record would show it.
std::optional<StallSignal> ShardConsumer::initializing_signal() const {
  if (state_.load() != ConsumerState::kInitializing) return std::nullopt;
  const std::optional<SteadyTime> since = init_failures_.since();
  if (!since) return std::nullopt;
  const std::uint64_t n = init_failures_.consecutive();
  return StallSignal{kStallConsumerFailing,
                     "initializing failed " + std::to_string(n) +
                         (n == 1 ? " time" : " times in a row") + ": " +
                         init_failures_.last_failure().message(),
                     *since};
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

std::optional<StallSignal> ShardConsumer::reads_signal() const {
  const base::FailureSeries& failures = reader_.health().failures;
  const std::optional<SteadyTime> since = failures.since();
  if (!since) return std::nullopt;
  const bool fan_out = ctx_.reading.mode == RetrievalMode::kFanOut;
  const std::uint64_t n = failures.consecutive();
  return StallSignal{fan_out ? kStallFanOutFailing : kStallThrottled,
                     failures.what() + " failed " + std::to_string(n) +
                         (n == 1 ? " time" : " times in a row") + ": " +
                         failures.last_failure().message(),
                     *since};
}

}  // namespace kcl::lifecycle
