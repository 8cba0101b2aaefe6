// BatchBisector: which records of a failing batch to deliver next, under
// ProcessorErrorPolicy::kDeadLetter (kcl/dead_letter.h). Pure bookkeeping over indexes
// [0, size) of one batch; the shard consumer does the calls.
//
//   - The whole batch is delivered until it succeeds or failed `max_attempts` times (each
//     retry after the failure backoff).
//   - Then it is bisected: the first half is delivered, then the second. A part of several
//     records that fails is split again at once (no backoff: it is a search).
//   - A part of one record is delivered until it succeeds or failed `max_attempts` times on
//     its own (with backoff); then it is to be dead-lettered.
//   - Parts are delivered in shard order, so checkpoints made in between only move forward.
//
// Thread safety: none (owned by the consumer's step).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace kcl::lifecycle {

class BatchBisector {
 public:
  // The records [begin, end) of the batch.
  struct Part {
    std::size_t begin = 0;
    std::size_t end = 0;
    std::size_t size() const { return end - begin; }
  };
  // What to do after the current part failed.
  enum class Next {
    kRetryAfterBackoff,  // deliver the same part again after the failure backoff
    kDeliverNow,         // the part was split: deliver the (new) current part at once
    kDeadLetter,         // the current part is one record that failed max_attempts times alone
  };

  BatchBisector(std::size_t size, int max_attempts);

  // The part to deliver now; empty once every part succeeded or was dead-lettered.
  std::optional<Part> current() const;
  // The current part was processed; on to the next.
  void succeeded();
  // The first `count` records of the current part were processed (checkpointed in a call that
  // failed): the part starts after them. True when that was the whole part (on to the next).
  bool processed_front(std::size_t count);
  // The current part failed.
  Next failed();
  // The current part (one record) was handed to the dead-letter sink; on to the next.
  void dead_lettered();
  // Failed deliveries that included the current part's records (whole batch, every failing
  // part it was in, its own attempts).
  int failures_of_current() const;
  // Whether the batch is being bisected (the whole batch failed max_attempts times).
  bool bisecting() const { return bisecting_; }

 private:
  struct Pending {
    Part part;
    int inherited = 0;  // failures of the parts it was split from
  };
  const int max_attempts_;
  std::vector<Pending> stack_;  // back = current; parts to deliver, in reverse shard order
  int own_failures_ = 0;        // failures of the current part itself
  bool bisecting_ = false;
};

}  // namespace kcl::lifecycle
