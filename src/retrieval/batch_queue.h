// retrieval/batch_queue.h: the bounded queue of fetched batches a records source keeps until
// the consumer takes them, with the terminal error that ended the source. Kept by
// QueuedRecordsSource (retrieval/queued_records_source.h), the base of the polling and the
// fan-out sources.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

#include "kcl/status.h"
#include "retrieval/records_source.h"

namespace kcl::retrieval {

class BatchQueue {
 public:
  BatchQueue(std::size_t max_records, std::size_t max_bytes)
      : max_records_(max_records), max_bytes_(max_bytes) {}

  void push(FetchedBatch batch) {
    std::lock_guard<std::mutex> lock(mu_);
    records_ += batch.records.size();
    bytes_ += batch.bytes;
    queue_.push_back(std::move(batch));
  }
  std::optional<FetchedBatch> take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty()) return std::nullopt;
    FetchedBatch batch = std::move(queue_.front());
    queue_.pop_front();
    records_ -= batch.records.size();
    bytes_ -= batch.bytes;
    return batch;
  }
  // Below both bounds.
  bool has_room() const {
    std::lock_guard<std::mutex> lock(mu_);
    return records_ < max_records_ && bytes_ < max_bytes_;
  }
  bool empty() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.empty();
  }
  std::size_t records() const {
    std::lock_guard<std::mutex> lock(mu_);
    return records_;
  }
  std::size_t bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
  }
  std::size_t batches() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }
  void set_terminal(Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    terminal_ = std::move(status);
  }
  Status terminal() const {
    std::lock_guard<std::mutex> lock(mu_);
    return terminal_;
  }

 private:
  const std::size_t max_records_;
  const std::size_t max_bytes_;
  mutable std::mutex mu_;
  std::deque<FetchedBatch> queue_;
  std::size_t records_ = 0;
  std::size_t bytes_ = 0;
  Status terminal_;
};

}  // namespace kcl::retrieval
