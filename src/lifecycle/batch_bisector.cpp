#include "lifecycle/batch_bisector.h"

#include <algorithm>

namespace kcl::lifecycle {

BatchBisector::BatchBisector(std::size_t size, int max_attempts)
    : max_attempts_(max_attempts < 1 ? 1 : max_attempts) {
  if (size > 0) stack_.push_back(Pending{Part{0, size}, 0});
}

std::optional<BatchBisector::Part> BatchBisector::current() const {
  if (stack_.empty()) return std::nullopt;
  return stack_.back().part;
}

void BatchBisector::succeeded() {
  if (!stack_.empty()) stack_.pop_back();
  own_failures_ = 0;
}

void BatchBisector::dead_lettered() { succeeded(); }

bool BatchBisector::processed_front(std::size_t count) {
  if (stack_.empty()) return false;
  Part& part = stack_.back().part;
  part.begin = std::min(part.end, part.begin + count);
  if (part.size() > 0) return false;
  succeeded();
  return true;
}

int BatchBisector::failures_of_current() const {
  return stack_.empty() ? 0 : stack_.back().inherited + own_failures_;
}

BatchBisector::Next BatchBisector::failed() {
  ++own_failures_;
  const Pending failing = stack_.back();
  const bool whole_batch = !bisecting_;
  if (failing.part.size() == 1 || whole_batch) {
    if (own_failures_ < max_attempts_) return Next::kRetryAfterBackoff;
    if (failing.part.size() == 1) return Next::kDeadLetter;
  }
  // Split: the second half goes below the first so the first is delivered first.
  bisecting_ = true;
  const int inherited = failing.inherited + own_failures_;
  const std::size_t middle = failing.part.begin + failing.part.size() / 2;
  stack_.pop_back();
  stack_.push_back(Pending{Part{middle, failing.part.end}, inherited});
  stack_.push_back(Pending{Part{failing.part.begin, middle}, inherited});
  own_failures_ = 0;
  return Next::kDeliverNow;
}

}  // namespace kcl::lifecycle
