// ShardReader: one shard's records source, run in a fetch task of its own on the worker's pool
// so the next read is in flight while the processor works.
//
// The prefetch is bounded by RetrievalConfig's prefetch bounds; the fetch task also keeps how
// the shard's reads are going (ReadHealth, for the stall signal).
// The fetch task wakes the consumer when it queued a batch or the source finished; it waits
// (not scheduled) while the prefetch queue is at its bound, until the consumer takes a batch
// and wakes it.
//
// Thread safety: start(), take(), new_corrupt_aggregates() and stop() on the consumer's step;
// queued_source() and health() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/failure_series.h"
#include "kcl/logging.h"
#include "lifecycle/task_pool.h"
#include "retrieval/records_source.h"

namespace kcl::lifecycle {

// How a shard's reads are going, kept by its fetch task for the stall signal: failures in a
// row, and answers received (each one, with records or without, is the source moving on).
struct ReadHealth {
  explicit ReadHealth(std::string what) : failures(std::move(what)) {}
  base::FailureSeries failures;
  std::atomic<std::uint64_t> answers{0};
};

class ShardReader {
 public:
  // `reads`: what a read is called in logs and stall signals ("GetRecords", "SubscribeToShard").
  ShardReader(TaskPool& pool, const Clock& clock, Logger* logger, std::string component,
              std::string reads);
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  // Starts the fetch task over `source`; it wakes `consumer` when there is something to take.
  void start(std::shared_ptr<retrieval::RecordsSource> source, std::weak_ptr<Task> consumer);
  bool started() const { return source_ != nullptr; }
  // The next fetched batch, if one is queued (then the fetch task may fetch again).
  std::optional<retrieval::FetchedBatch> take();
  // The source finished (a terminal error) and every batch was taken.
  bool finished_and_drained() const;
  // How far behind the stream's tip the source's last read found the shard (0 before one).
  std::int64_t millis_behind() const;
  Status terminal_error() const;
  // The source's corrupt aggregates not yet returned by an earlier call.
  std::uint64_t new_corrupt_aggregates();
  // No more calls for this shard.
  void stop();

  // The source once started, else null (for the stall signal).
  const retrieval::RecordsSource* queued_source() const { return published_.load(); }
  const ReadHealth& health() const { return *health_; }

 private:
  TaskPool& pool_;
  const Clock& clock_;
  Logger* const logger_;  // may be null
  const std::string component_;
  std::shared_ptr<ReadHealth> health_;  // shared with the fetch task
  std::shared_ptr<retrieval::RecordsSource> source_;
  std::shared_ptr<class FetchTask> task_;
  std::atomic<const retrieval::RecordsSource*> published_{nullptr};  // source_, once started
  std::uint64_t corrupt_reported_ = 0;
};

}  // namespace kcl::lifecycle
