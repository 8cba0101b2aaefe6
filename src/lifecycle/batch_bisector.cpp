#include "lifecycle/batch_bisector.h"

#include <algorithm>

namespace kcl::lifecycle {

BatchBisector::BatchBisector(std::size_t size, int max_attempts, bool vouched_before)
    : size_(size),
      max_attempts_(max_attempts < 1 ? 1 : max_attempts),
      failures_(size, 0),
      left_ok_(vouched_before) {
  if (size > 0) stack_.push_back(Part{0, size});
}

std::optional<BatchBisector::Part> BatchBisector::current() const {
  if (stack_.empty()) return std::nullopt;
  return stack_.back();
}

void BatchBisector::succeeded() {
  if (!stack_.empty()) stack_.pop_back();
  own_failures_ = 0;
  left_ok_ = true;
  given_up_ = false;
  if (suspect_) {  // its later neighbour succeeded: the suspect is poison
    letter_ = suspect_;
    suspect_.reset();
  }
}

void BatchBisector::dead_lettered() { letter_.reset(); }

bool BatchBisector::processed_front(std::size_t count) {
  // A look-ahead's records come after the suspect: no checkpoint can name them.
  if (stack_.empty() || count == 0 || suspect_) return false;
  Part& part = stack_.back();
  part.begin = std::min(part.end, part.begin + count);
  left_ok_ = true;  // the records before it were processed in the call that failed at it
  if (part.size() > 0) return false;
  succeeded();
  return true;
}

int BatchBisector::failures_of(std::size_t index) const {
  return index < failures_.size() ? failures_[index] : 0;
}

std::size_t BatchBisector::resolved() const {
  if (suspect_) return *suspect_;
  if (letter_) return *letter_;
  return stack_.empty() ? size_ : stack_.back().begin;
}

BatchBisector::Next BatchBisector::failed() {
  const Part failing = stack_.back();
  ++own_failures_;
  for (std::size_t i = failing.begin; i < failing.end; ++i) ++failures_[i];
  if (suspect_) {
    // The suspect's later neighbours failed too: look closer to it, at once.
    if (failing.size() > 1) return split();
    // The record right after it fails as well.
    if (!given_up_) return outage();
    letter_ = suspect_;
    suspect_.reset();
    own_failures_ = 1;  // that record stays the current part, failed once alone
    left_ok_ = false;
    return Next::kDeadLetter;
  }
  if (failing.size() > 1 && bisecting_) return split();
  if (own_failures_ < max_attempts_) return Next::kRetryAfterBackoff;
  if (failing.size() > 1) return split();  // the whole batch (or what remained of it)
  // One record failed max_attempts times alone: poison if a neighbour vouches for it.
  const bool later_records = stack_.size() > 1;
  if (given_up_ || (!later_records && left_ok_)) {
    letter_ = failing.begin;
    stack_.pop_back();
    own_failures_ = 0;
    left_ok_ = false;  // the next part's earlier neighbour is set aside, not processed
    return Next::kDeadLetter;
  }
  if (!later_records) return outage();
  suspect_ = failing.begin;
  stack_.pop_back();
  own_failures_ = 0;
  left_ok_ = false;
  return Next::kLookAhead;
}

// The current part's halves; the second goes below the first so the first is delivered first.
BatchBisector::Next BatchBisector::split() {
  const Part failing = stack_.back();
  const std::size_t middle = failing.begin + failing.size() / 2;
  stack_.pop_back();
  stack_.push_back(Part{middle, failing.end});
  stack_.push_back(Part{failing.begin, middle});
  own_failures_ = 0;
  bisecting_ = true;
  left_ok_ = false;
  return Next::kDeliverNow;
}

// Everything not yet processed or dead-lettered, as one part, delivered again as a whole.
BatchBisector::Next BatchBisector::outage() {
  const std::size_t first = suspect_ ? *suspect_ : stack_.back().begin;
  stack_.assign(1, Part{first, size_});
  suspect_.reset();
  own_failures_ = 0;
  bisecting_ = false;
  left_ok_ = false;
  return Next::kOutage;
}

}  // namespace kcl::lifecycle
