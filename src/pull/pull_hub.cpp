#include "pull/pull_hub.h"

#include <algorithm>
#include <utility>

namespace kcl::pull {

std::shared_ptr<PullShard> PullHub::open_shard(const std::string& shard_id) {
  auto shard = std::make_shared<PullShard>(shared_from_this(), shard_id);
  std::lock_guard<std::mutex> lock(mu_);
  active_.emplace(shard.get(), shard);
  return shard;
}

void PullHub::attach(PullShard& shard, std::function<void(Clock::MonoTime)> wake,
                     MetricsSink* metrics, Logger* logger) {
  std::lock_guard<std::mutex> lock(mu_);
  shard.wake_ = std::move(wake);
  shard.metrics_ = metrics;
  shard.logger_ = logger;
  shard.last_write_at_ = clock_.now();
}

// The count bound is on the window, not on the records not acknowledged: a record
// acknowledged behind an older one stays in the window until the watermark passes it, so
// with one record stuck the window would otherwise grow without bound. (The bytes bound
// counts the records held: an acknowledged record's batch share is the application's to
// free.)
bool PullHub::has_room_locked(const PullShard& shard) const {
  return shard.window_.size() < limits_.max_unacked_per_shard &&
         shard.buffered_bytes_ + shard.unacked_bytes_ < limits_.max_unacked_bytes_per_shard;
}

bool PullHub::takeable_locked(const PullShard& shard) const {
  // The records of the window taken already, acknowledged or not (see has_room_locked).
  const std::uint64_t taken_in_window = shard.next_take_ - shard.window_base_;
  return !closed_ && !shard.finished_ && !shard.stopping_ && !shard.buffered_.empty() &&
         taken_in_window < limits_.max_unacked_per_shard &&
         shard.unacked_bytes_ < limits_.max_unacked_bytes_per_shard;
}

void PullHub::make_ready_locked(PullShard& shard) {
  if (shard.in_ready_ || !takeable_locked(shard)) return;
  shard.in_ready_ = true;
  ready_.push_back(shard.shared_from_this());
  records_cv_.notify_one();
}

void PullHub::hand_in(PullShard& shard, std::vector<Record>& records, std::size_t batch_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shard.finished_ || shard.stopping_) return;
  // Records are views into their batch's body, which lives until the last of them is gone:
  // each counts an equal share of the batch, so the bound is on memory, not on data alone.
  const std::size_t share = records.empty() ? 0 : batch_bytes / records.size();
  for (Record& r : records) {
    PullShard::Entry e;
    e.position = ExtendedSequenceNumber(std::string(r.sequence_number()), r.sub_sequence_number());
    e.bytes = std::max(share, r.data().size());
    shard.buffered_bytes_ += e.bytes;
    shard.window_.push_back(std::move(e));
    shard.buffered_.push_back(std::move(r));
  }
  buffered_total_ += records.size();
  make_ready_locked(shard);
}

PaceDecision PullHub::pace(PullShard& shard) {
  const Clock::MonoTime now = clock_.now();
  std::lock_guard<std::mutex> lock(mu_);
  PaceDecision d;
  shard.checkpoint_wake_pending_ = false;
  if (shard.finished_) return d;
  // The oldest record not acknowledged holds the watermark: report it once when stuck.
  if (!shard.window_.empty()) {
    const PullShard::Entry& oldest = shard.window_.front();
    if (oldest.taken && !oldest.acked && now - oldest.taken_at >= limits_.stuck_record_warning &&
        shard.stuck_reported_index_ != shard.window_base_) {
      shard.stuck_reported_index_ = shard.window_base_;
      ++stuck_total_;
      d.stuck_report =
          "record " + oldest.position.to_string() + " of shard " + shard.shard_id_ + " was taken " +
          std::to_string(
              std::chrono::duration_cast<std::chrono::seconds>(now - oldest.taken_at).count()) +
          " s ago and is still not acknowledged; the shard's checkpoint waits "
          "for it";
    }
  }
  if (shard.watermark_dirty_ && shard.watermark_) {
    const Clock::MonoTime due = shard.last_write_at_ + limits_.checkpoint_interval;
    if (now >= due || closed_ || shard.stopping_) {
      d.checkpoint_at = shard.watermark_;
      shard.last_write_at_ = now;  // one attempt per interval, written or not
    }
    // Still due after this write if the watermark moves meanwhile.
    d.next_call = shard.last_write_at_ + limits_.checkpoint_interval;
  }
  d.accept_batch = !closed_ && !shard.stopping_ && has_room_locked(shard);
  // A stopping shard reads nothing more: only its drain (or a checkpoint due) wakes it.
  shard.paused_ = !d.accept_batch && !shard.stopping_;
  d.unacked = shard.unacked_;
  return d;
}

void PullHub::checkpoint_written(PullShard& shard, const ExtendedSequenceNumber& position) {
  std::lock_guard<std::mutex> lock(mu_);
  ++checkpoints_total_;
  if (shard.watermark_ && *shard.watermark_ == position) shard.watermark_dirty_ = false;
}

bool PullHub::drained(PullShard& shard) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool empty = shard.window_.empty();
  shard.drain_wanted_ = !empty;
  return empty;
}

void PullHub::stop_offering(PullShard& shard) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shard.finished_ || shard.stopping_) return;
  shard.stopping_ = true;
  shard.paused_ = false;
  // The buffered records are the window's tail (indexes from next_take_ on): none is
  // acknowledged, so the watermark stays below them.
  shard.window_.resize(static_cast<std::size_t>(shard.next_take_ - shard.window_base_));
  buffered_total_ -= shard.buffered_.size();
  shard.buffered_.clear();
  shard.buffered_bytes_ = 0;
}

std::size_t PullHub::unacked(PullShard& shard) const {
  std::lock_guard<std::mutex> lock(mu_);
  return shard.unacked_;
}

std::optional<ExtendedSequenceNumber> PullHub::final_checkpoint(PullShard& shard) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shard.finished_ || !shard.watermark_dirty_) return std::nullopt;
  return shard.watermark_;
}

void PullHub::drop_locked(PullShard& shard) {
  buffered_total_ -= shard.buffered_.size();
  unacked_total_ -= shard.unacked_;
  shard.buffered_.clear();
  shard.buffered_bytes_ = 0;
  shard.window_.clear();
  shard.unacked_ = 0;
  shard.unacked_bytes_ = 0;
}

void PullHub::finish(PullShard& shard, bool lost) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shard.finished_) return;
  shard.finished_ = true;
  shard.lost_ = lost;
  shard.wake_ = nullptr;     // the consumer is done: nothing may schedule it any more
  shard.metrics_ = nullptr;  // nor report through the worker's sinks (nack)
  shard.logger_ = nullptr;
  drop_locked(shard);
  active_.erase(&shard);
  ended_cv_.notify_all();
}

std::vector<PulledRecord> PullHub::take(std::size_t max,
                                        std::chrono::steady_clock::time_point deadline) {
  std::vector<PulledRecord> out;
  if (max == 0) return out;
  std::unique_lock<std::mutex> lock(mu_);
  // Closed (a drain), there is nothing to hand out: the caller waits until its deadline (or
  // stop()) instead of coming back at once, which made a puller's loop spin.
  records_cv_.wait_until(lock, deadline, [&] { return stopped_ || (!closed_ && !ready_.empty()); });
  if (closed_) return out;
  const Clock::MonoTime now = clock_.now();
  // Round-robin, one record per shard per turn: each shard's records stay in order, and
  // one busy shard does not hold the others back.
  while (out.size() < max && !ready_.empty()) {
    std::shared_ptr<PullShard> shard = ready_.front().lock();
    ready_.pop_front();
    if (!shard) continue;  // dropped by its owners meanwhile
    if (!takeable_locked(*shard)) {
      shard->in_ready_ = false;
      continue;
    }
    const std::uint64_t index = shard->next_take_++;
    PullShard::Entry& e = shard->window_[index - shard->window_base_];
    e.taken = true;
    e.taken_at = now;
    ++shard->unacked_;
    shard->unacked_bytes_ += e.bytes;
    shard->buffered_bytes_ -= e.bytes;
    --buffered_total_;
    ++unacked_total_;
    out.push_back(PulledRecord(shard, index, std::move(shard->buffered_.front())));
    shard->buffered_.pop_front();
    if (takeable_locked(*shard)) {
      ready_.push_back(std::move(shard));
    } else {
      shard->in_ready_ = false;
    }
  }
  // Records left for another waiting thread: make_ready_locked() notifies only when a shard
  // joins the ring, so without this the others would sleep until their deadline.
  if (!ready_.empty()) records_cv_.notify_one();
  return out;
}

Status PullHub::ack_refusal_locked(const PullShard& shard, std::uint64_t index) const {
  if (shard.lost_) {
    return Status(StatusCode::kLeaseLost, "the lease of shard " + shard.shard_id_ +
                                              " was lost after this record was taken; its next "
                                              "owner delivers it again");
  }
  if (shard.finished_) {
    return Status(StatusCode::kCancelled,
                  "the pull consumer stopped reading shard " + shard.shard_id_ +
                      " (its lease was handed on, or the consumer shut down) before this "
                      "acknowledgement; the shard's next owner delivers the record again");
  }
  if (index < shard.window_base_ || index >= shard.next_take_ ||
      shard.window_[index - shard.window_base_].acked) {
    return Status(StatusCode::kFailedPrecondition,
                  "record of shard " + shard.shard_id_ + " was already acknowledged");
  }
  return Status::Ok();
}

bool PullHub::mark_acked_locked(PullShard& shard, std::uint64_t index) {
  PullShard::Entry& e = shard.window_[index - shard.window_base_];
  e.acked = true;
  --shard.unacked_;
  shard.unacked_bytes_ -= e.bytes;
  --unacked_total_;
  ++acked_total_;
  bool moved = false;
  while (!shard.window_.empty() && shard.window_.front().acked) {
    shard.watermark_ = std::move(shard.window_.front().position);
    shard.window_.pop_front();
    ++shard.window_base_;
    moved = true;
  }
  if (moved) shard.watermark_dirty_ = true;
  return moved;
}

std::optional<Clock::MonoTime> PullHub::wake_after_ack_locked(PullShard& shard, bool moved) {
  if (!shard.wake_) return std::nullopt;
  const Clock::MonoTime now = clock_.now();
  if (shard.paused_ && has_room_locked(shard)) {
    shard.paused_ = false;
    return now;  // reading may go on
  }
  if (shard.drain_wanted_ && shard.window_.empty()) {
    shard.drain_wanted_ = false;
    return now;  // the shard's end may be checkpointed
  }
  if (moved && !shard.checkpoint_wake_pending_) {
    shard.checkpoint_wake_pending_ = true;
    return std::max(now, shard.last_write_at_ + limits_.checkpoint_interval);
  }
  return std::nullopt;
}

Status PullHub::ack(PullShard& shard, std::uint64_t index) {
  std::function<void(Clock::MonoTime)> wake;
  Clock::MonoTime wake_at{};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Status refused = ack_refusal_locked(shard, index); !refused.ok()) return refused;
    const bool moved = mark_acked_locked(shard, index);
    if (const std::optional<Clock::MonoTime> at = wake_after_ack_locked(shard, moved)) {
      wake = shard.wake_;
      wake_at = *at;
    }
    make_ready_locked(shard);
  }
  // Without the hub's lock: the wake-up schedules the consumer on the task pool (taking the
  // pool's lock), and a pool thread holding that lock may drop the last reference to a
  // consumer, whose processor then finishes its shard (taking the hub's). A wake-up that
  // comes after the shard finished is harmless: the consumer runs once more, or is gone.
  if (wake) wake(wake_at);
  return Status::Ok();
}

void PullHub::close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  records_cv_.notify_all();
}

void PullHub::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  stopped_ = true;
  for (const auto& [key, weak] : active_) {
    const std::shared_ptr<PullShard> shard = weak.lock();
    if (!shard) continue;
    shard->finished_ = true;
    shard->wake_ = nullptr;
    drop_locked(*shard);
  }
  active_.clear();
  ready_.clear();
  records_cv_.notify_all();
  ended_cv_.notify_all();
}

PullStats PullHub::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PullStats s;
  s.shards = active_.size();
  s.buffered = buffered_total_;
  s.unacked = unacked_total_;
  s.acked = acked_total_;
  s.stuck_records = stuck_total_;
  s.checkpoints = checkpoints_total_;
  return s;
}

}  // namespace kcl::pull
