// ProgressWatch: the memory of a shard consumer's stall signal between the scheduler's looks
// (which parent holds a waiting child back; since when records wait with none delivered; see
// lifecycle/stall_detector.h).
// Thread safety: note_parent_wait() from the consumer's step; the signals from one thread (the
// worker's scheduler).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "kcl/clock.h"
#include "lifecycle/stall_detector.h"

namespace kcl::lifecycle {

// Where a shard's records are at one look.
struct ShardProgress {
  std::size_t queued = 0;   // fetched, waiting in the source's queue
  std::int64_t behind = 0;  // ms behind the tip at the last answer
  bool in_hand = false;     // the consumer holds a batch it has not finished
  std::uint64_t delivered = 0;
  std::uint64_t answers = 0;  // reads answered
};

class ProgressWatch {
 public:
  explicit ProgressWatch(Clock::MonoTime created) : created_(created) {}

  // Why the parents are not finished (the child waits), in words.
  void note_parent_wait(std::string detail);
  // The parent wait noted, as a signal since the consumer was made; empty when none.
  std::optional<StallSignal> parent_signal() const;
  // Records are waiting when a batch is in hand, fetched batches are queued or the last answer
  // was behind the tip; a shard idle at the tip has none of these. Delivering ends the wait.
  // With nothing fetched, so does an answer read: a shard behind the tip may answer empty
  // batches for a while as its iterator moves on.
  std::optional<StallSignal> waiting_signal(Clock::MonoTime now, const ShardProgress& progress);

 private:
  const Clock::MonoTime created_;
  mutable std::mutex mu_;
  std::string parent_wait_;  // guarded by mu_
  // The scheduler's own: records delivered and answers read at its last look, and since when
  // records have been waiting with neither moving.
  std::uint64_t seen_delivered_ = 0;
  std::uint64_t seen_answers_ = 0;
  std::optional<Clock::MonoTime> waiting_since_;
};

}  // namespace kcl::lifecycle
