// BatchBisector: which records of a failing batch to deliver next, and what a failure means,
// under ProcessorErrorPolicy::kDeadLetter (kcl/dead_letter.h). Pure bookkeeping over indexes
// [0, size) of one batch; the shard consumer does the calls.
//
//   - The whole batch is delivered until it succeeds or failed `max_attempts` times (each
//     retry after the failure backoff).
//   - Then it is bisected: the first half is delivered, then the second. A part of several
//     records that fails is split again at once (no backoff: it is a search).
//   - A part of one record is delivered until it succeeds or failed `max_attempts` times on
//     its own (with backoff). It is then a poison record only if a neighbour vouches for it,
//     that is, the processor succeeds next to it:
//       - its earlier neighbour: the delivery just before its first attempt alone succeeded
//         (the part before it; the records before it, processed in the call that failed at
//         it; for a batch of one record, the delivery before the batch, `vouched_before`);
//       - else its later neighbours: the part after it is delivered at once, the record
//         being a suspect meanwhile (no checkpoint may pass it). A part that fails then is
//         split towards the suspect (its first half at once) until one succeeds: the suspect
//         is poison. When the record right after the suspect fails too, or none follows it
//         in the batch, the failure is not the record's.
//     A failure that is not one record's is taken for an outage of what the processor
//     depends on (every record tried fails, its neighbours included): nothing is dead-
//     lettered, and the rest of the batch, from the first record not yet processed, is
//     delivered again as a whole after a backoff (and searched again when it keeps failing).
//   - give_up() (the outage outlasted the configured limit): a record that failed
//     max_attempts times alone is dead-lettered without a neighbour's word, until a part
//     succeeds again.
//   - Parts are delivered in shard order, so checkpoints made in between only move forward.
//     A suspect's later neighbours are processed before it is dead-lettered, but no
//     checkpoint may pass it until its sink accepted it.
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
    kLookAhead,          // the part's one record failed max_attempts times alone and nothing
                         // before it vouches: it is the suspect; deliver the (new) current
                         // part, the records after it, at once
    kDeadLetter,         // letter() is poison: hand it to the dead-letter sink
    kOutage,             // no record is to blame: the rest of the batch is the current part,
                         // to deliver again as a whole after the failure backoff
  };

  // `vouched_before`: the delivery just before this batch succeeded (the earlier neighbour of
  // a batch of one record).
  BatchBisector(std::size_t size, int max_attempts, bool vouched_before);

  // The part to deliver now; empty once every part succeeded or was dead-lettered (and while
  // a letter is due, the part after it).
  std::optional<Part> current() const;
  // The record to hand to the dead-letter sink before anything else; empty when none is due.
  std::optional<std::size_t> letter() const { return letter_; }
  // The record waiting for its later neighbours' verdict while they are delivered; no
  // checkpoint may pass it.
  std::optional<std::size_t> suspect() const { return suspect_; }
  // The current part was processed; on to the next. A suspect waiting is now poison: due as
  // letter().
  void succeeded();
  // The first `count` records of the current part were processed (checkpointed in a call that
  // failed): the part starts after them. True when that was the whole part (on to the next).
  bool processed_front(std::size_t count);
  // The current part failed.
  Next failed();
  // letter() was accepted by the dead-letter sink.
  void dead_lettered();
  // The outage outlasted its limit: from now on until a part succeeds, a record that failed
  // max_attempts times alone is dead-lettered without a neighbour's word (a suspect waiting
  // is, when its later neighbour fails too).
  void give_up() { given_up_ = true; }
  // Failed deliveries that included record `index` (whole batch, every failing part it was
  // in, its own attempts).
  int failures_of(std::size_t index) const;
  // Failed deliveries of the current part itself (since it became the current part).
  int attempts_of_current() const { return own_failures_; }
  // The records before this index are processed or dead-lettered.
  std::size_t resolved() const;
  // Whether the batch is being bisected (the whole batch, or what remained of it after an
  // outage, failed max_attempts times).
  bool bisecting() const { return bisecting_; }
  // Whether the last thing that happened was a part processed (not a failure, not a record
  // dead-lettered): the next batch's `vouched_before`.
  bool last_succeeded() const { return left_ok_; }

 private:
  Next split();
  Next outage();

  const std::size_t size_;
  const int max_attempts_;
  std::vector<Part> stack_;    // back = current; parts to deliver, in reverse shard order
  std::vector<int> failures_;  // per record: failed deliveries that included it
  int own_failures_ = 0;       // failures of the current part itself
  bool bisecting_ = false;     // the current part came from a split
  bool left_ok_ = false;       // the delivery before the current part's first one succeeded
  bool given_up_ = false;      // give_up() was called, and nothing succeeded since
  std::optional<std::size_t> suspect_;
  std::optional<std::size_t> letter_;
};

}  // namespace kcl::lifecycle
