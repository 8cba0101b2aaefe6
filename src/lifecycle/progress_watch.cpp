#include "lifecycle/progress_watch.h"

namespace kcl::lifecycle {

void ProgressWatch::note_parent_wait(std::string detail) {
  std::lock_guard<std::mutex> lock(mu_);
  parent_wait_ = std::move(detail);
}

std::optional<StallSignal> ProgressWatch::parent_signal() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (parent_wait_.empty()) return std::nullopt;
  return StallSignal{kStallWaitingForParent, parent_wait_, created_};
}

std::optional<StallSignal> ProgressWatch::waiting_signal(Clock::MonoTime now,
                                                         const ShardProgress& p) {
  const bool fetched = p.in_hand || p.queued > 0;
  const bool moved = p.delivered != seen_delivered_ || (!fetched && p.answers != seen_answers_);
  seen_delivered_ = p.delivered;
  seen_answers_ = p.answers;
  if (moved || (!fetched && p.behind <= 0)) {
    waiting_since_.reset();
    if (!fetched && p.behind <= 0) return std::nullopt;
  }
  if (!waiting_since_) waiting_since_ = now;
  std::string detail = p.in_hand ? "a batch in hand, " : "";
  detail += std::to_string(p.queued) + " records fetched and waiting, " + std::to_string(p.behind) +
            " ms behind the tip, none delivered for " + seconds_text(now - *waiting_since_);
  return StallSignal{kStallNoProgress, std::move(detail), *waiting_since_};
}

}  // namespace kcl::lifecycle
