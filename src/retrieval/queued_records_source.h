// retrieval/queued_records_source.h: what the polling (ShardFetcher) and the fan-out
// (FanOutSource) records sources share: the bounded queue of fetched batches with the
// terminal error (BatchQueue), the finished and shard-ended flags, and the figures every
// RecordsSource reports. A source derives from it and implements fetch_step() (and
// set_wakeup() when it pushes); its fetch_step() queues batches and ends the source through
// the protected members below.
//
// Ordering: a source is finished only after its last batch (the shard_end one) or its
// terminal error is in the queue: finish_at_shard_end() and finish_with_error() store
// `finished` with release after them, and finished() loads it with acquire. So a reader that
// sees finished() finds every batch and the error, and drained() (finished(), then the queue
// empty) never reports a source drained while a batch is still to come.
//
// Thread safety: as RecordsSource. The protected members that change state are for the
// fetch_step() caller (one thread at a time); the public ones may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "kcl/clock.h"
#include "kcl/status.h"
#include "retrieval/batch_queue.h"
#include "retrieval/records_source.h"

namespace kcl::retrieval {

class QueuedRecordsSource : public RecordsSource {
 public:
  // Pops the oldest fetched batch, if any.
  std::optional<FetchedBatch> take_batch() override { return queue_.take(); }
  // True when the queue is below both prefetch bounds.
  bool has_room() const override { return queue_.has_room(); }
  // No more work will be done (end of shard or terminal error). Batches may still be queued;
  // see drained().
  bool finished() const noexcept override { return finished_.load(std::memory_order_acquire); }
  // finished() and nothing left to take.
  bool drained() const override { return finished() && queue_.empty(); }
  // The error that ended the source; ok() when none.
  Status terminal_error() const override { return queue_.terminal(); }
  // True once the final (shard_end) batch was queued.
  bool shard_ended() const noexcept { return shard_ended_.load(std::memory_order_acquire); }

  std::size_t queued_records() const override { return queue_.records(); }
  std::size_t queued_bytes() const override { return queue_.bytes(); }
  std::size_t queued_batches() const { return queue_.batches(); }
  // MillisBehindLatest of the last answer or event (0 before the first).
  std::int64_t millis_behind_latest() const noexcept override {
    return millis_behind_.load(std::memory_order_relaxed);
  }
  // Aggregates that failed to deaggregate (delivered as they came).
  std::uint64_t corrupt_aggregates() const noexcept override {
    return corrupt_.load(std::memory_order_relaxed);
  }
  std::string last_retry_reason() const override {
    std::lock_guard<std::mutex> lock(retry_mu_);
    return retry_reason_;
  }

 protected:
  // The prefetch bounds (RetrievalConfig::max_prefetch_records / max_prefetch_bytes).
  QueuedRecordsSource(std::size_t max_records, std::size_t max_bytes)
      : queue_(max_records, max_bytes) {}

  // The step that does nothing because the queue is at its bound: run again after a take.
  static FetchStep queue_full() {
    return FetchStep{FetchOutcome::kQueueFull, Clock::MonoTime::max(), true};
  }

  void push_batch(FetchedBatch batch) { queue_.push(std::move(batch)); }
  void set_millis_behind(std::int64_t millis) noexcept {
    millis_behind_.store(millis, std::memory_order_relaxed);
  }
  // A transient failure the next kRetrying step backs off from (last_retry_reason()).
  void note_retry_reason(std::string reason) {
    std::lock_guard<std::mutex> lock(retry_mu_);
    retry_reason_ = std::move(reason);
  }
  void count_corrupt(std::uint64_t aggregates) noexcept {
    corrupt_.fetch_add(aggregates, std::memory_order_relaxed);
  }

  // Queues `batch` as the shard's final one (shard_end set) and finishes the source.
  FetchStep finish_at_shard_end(FetchedBatch batch) {
    batch.shard_end = true;
    const std::size_t records = batch.records.size();
    push_batch(std::move(batch));
    shard_ended_.store(true, std::memory_order_release);
    finished_.store(true, std::memory_order_release);
    return FetchStep{FetchOutcome::kShardEnd, Clock::MonoTime::max(), false, records};
  }
  // Records `status` as the terminal error and finishes the source.
  FetchStep finish_with_error(Status status) {
    queue_.set_terminal(std::move(status));
    finished_.store(true, std::memory_order_release);
    return FetchStep{FetchOutcome::kFailed};
  }

 private:
  BatchQueue queue_;  // fetched, not yet taken; and the terminal error
  std::atomic<bool> finished_{false};
  std::atomic<bool> shard_ended_{false};
  std::atomic<std::int64_t> millis_behind_{0};
  std::atomic<std::uint64_t> corrupt_{0};
  mutable std::mutex retry_mu_;  // guards retry_reason_
  std::string retry_reason_;
};

}  // namespace kcl::retrieval
