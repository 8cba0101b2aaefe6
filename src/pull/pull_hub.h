// pull/pull_hub.h: the pull consumer's bookkeeping. One PullHub per PullConsumer holds the
// queue every shard feeds and hands records out round-robin across shards; one PullShard per
// held lease (tenure) keeps its shard's records in order, which of them were taken and
// acknowledged, and the low watermark. PullProcessor (pull_processor.h) is the record
// processor that feeds a PullShard and checkpoints its watermark on the consumer's thread.
//
// A shard's records, in delivery order, each with an index (0, 1, 2, ... per tenure):
//
//   window:  [ acked? | taken? ]  from index window_base: every record handed in and not
//                                 yet part of the acknowledged prefix (popped as it grows)
//   buffered: the records of the window not taken yet (index next_take onwards)
//
// The watermark is the last record popped off the window's front: it and everything before
// it were acknowledged. Acks only mark entries; popping the acknowledged prefix is amortised
// O(1) per record.
//
// Thread safety: every member is safe from any thread; one mutex (the hub's) guards every
// shard's state and the queue. Checkpoint writes happen outside it, on consumer threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kcl/clock.h"
#include "kcl/dead_letter.h"
#include "kcl/lease.h"
#include "kcl/processor.h"
#include "kcl/pull_consumer.h"

namespace kcl::pull {

class PullHub;

// One shard's records as handed on, for one tenure of its lease. Fields are guarded by the
// hub's mutex unless noted.
class PullShard : public std::enable_shared_from_this<PullShard> {
 public:
  PullShard(std::shared_ptr<PullHub> hub, std::string shard_id)
      : hub_(std::move(hub)), shard_id_(std::move(shard_id)) {}

  const std::string& shard_id() const { return shard_id_; }
  // Set once by the shard's processor when it is initialized, before any record is handed
  // in (so before any reader can see it: records pass through the hub's mutex).
  void set_stream_name(std::string name) { stream_name_ = std::move(name); }
  const std::string& stream_name() const { return stream_name_; }
  PullHub& hub() const { return *hub_; }

 private:
  friend class PullHub;
  struct Entry {
    ExtendedSequenceNumber position;
    std::size_t bytes = 0;  // what it counts toward the byte bound (see hand_in)
    Clock::MonoTime taken_at{};
    bool taken = false;
    bool acked = false;
  };

  const std::shared_ptr<PullHub> hub_;
  const std::string shard_id_;
  std::string stream_name_;
  std::deque<Entry> window_;
  std::uint64_t window_base_ = 0;
  std::deque<Record> buffered_;
  std::uint64_t next_take_ = 0;
  std::size_t buffered_bytes_ = 0;
  std::size_t unacked_ = 0;  // taken, not acknowledged
  std::size_t unacked_bytes_ = 0;
  std::optional<ExtendedSequenceNumber> watermark_;
  bool watermark_dirty_ = false;  // moved since the last checkpoint written
  Clock::MonoTime last_write_at_{};
  bool lost_ = false;      // lease lost: acks return kLeaseLost
  bool finished_ = false;  // ended (shard end, shutdown, lost): nothing more happens
  bool stopping_ = false;  // a graceful stop: nothing more handed on or in (stop_offering)
  bool in_ready_ = false;  // queued in the hub's ready ring
  bool paused_ = false;    // pace() refused a batch; an ack that makes room wakes it
  bool checkpoint_wake_pending_ = false;
  bool drain_wanted_ = false;  // the consumer waits for the window to empty (shard end)
  std::uint64_t stuck_reported_index_ = UINT64_MAX;
  std::function<void(Clock::MonoTime)> wake_;
  MetricsSink* metrics_ = nullptr;  // the worker's, while the shard is not finished
  Logger* logger_ = nullptr;        // likewise (may be null)
};

// What pace() decided for a shard (see PacedProcessor).
struct PaceDecision {
  bool accept_batch = false;
  std::optional<ExtendedSequenceNumber> checkpoint_at;  // write the watermark there now
  std::optional<Clock::MonoTime> next_call;
  std::optional<std::string> stuck_report;  // a record newly found stuck (log and count it)
  std::size_t unacked = 0;                  // for the gauge
};

struct PullLimits {
  std::size_t max_unacked_per_shard = 10000;
  std::size_t max_unacked_bytes_per_shard = 16u << 20;
  std::chrono::milliseconds checkpoint_interval{1000};
  std::chrono::milliseconds stuck_record_warning{60000};
  // nack(): where records go, and the backoff while the sink refuses.
  std::shared_ptr<DeadLetterSink> dead_letter_sink;
  std::chrono::milliseconds sink_backoff_base{200};
  std::chrono::milliseconds sink_backoff_max{30000};
};

class PullHub : public std::enable_shared_from_this<PullHub> {
 public:
  PullHub(PullLimits limits, const Clock& clock) : limits_(limits), clock_(clock) {}

  const PullLimits& limits() const { return limits_; }
  const Clock& clock() const { return clock_; }

  // ---- from a shard's processor (the consumer's thread) ----
  std::shared_ptr<PullShard> open_shard(const std::string& shard_id);
  void attach(PullShard& shard, std::function<void(Clock::MonoTime)> wake,
              MetricsSink* metrics = nullptr, Logger* logger = nullptr);
  // A delivered batch: every record joins the window and the buffer (moved out of
  // `records`). Toward the byte bound each record counts its share of `batch_bytes` (what
  // the batch holds: the response body the records point into, and the records), or its
  // data's size when that is larger or `batch_bytes` is 0 (not known).
  void hand_in(PullShard& shard, std::vector<Record>& records, std::size_t batch_bytes);
  PaceDecision pace(PullShard& shard);
  // The watermark checkpoint at `position` was written.
  void checkpoint_written(PullShard& shard, const ExtendedSequenceNumber& position);
  bool drained(PullShard& shard);
  // A graceful stop of the shard began (a handoff, or the worker's shutdown): the records
  // buffered but not taken are dropped (they come after the watermark, so the next owner reads
  // them again), nothing more is handed in or offered, and the watermark is due at once
  // whenever it moves. drained() then tells whether every record taken was acknowledged.
  void stop_offering(PullShard& shard);
  // Records of the shard taken and not acknowledged.
  std::size_t unacked(PullShard& shard) const;
  // The watermark to write before the shard ends (shutdown), if it moved since the last one.
  std::optional<ExtendedSequenceNumber> final_checkpoint(PullShard& shard);
  // The shard is done; `lost` when its lease was lost (acks answer kLeaseLost). Buffered
  // records are dropped; nothing of this shard is handed out any more.
  void finish(PullShard& shard, bool lost);

  // ---- from the application ----
  // Up to `max` records, waiting until `deadline` for the first (closed, until `deadline` or
  // stop()).
  std::vector<PulledRecord> take(std::size_t max, std::chrono::steady_clock::time_point deadline);
  Status ack(PullShard& shard, std::uint64_t index);
  // Hands `record` to the dead-letter sink with `reason` (asking again after a backoff while
  // it refuses, as long as the shard is read), then acknowledges it (pull_nack.cpp).
  Status nack(PullShard& shard, std::uint64_t index, const Record& record,
              const std::string& reason);

  // ---- from PullConsumer ----
  // Stops handing records out (take() waits for its deadline and returns nothing; pace()
  // accepts no batch). The
  // worker's shutdown then stops each shard (stop_offering) and waits for its acks.
  void close();
  // After the worker stopped: acks answer kCancelled; take() returns at once.
  void stop();
  PullStats stats() const;

 private:
  // Why an ack of `index` cannot be taken now (lease lost, shard finished, acknowledged
  // already); OK when it can.
  Status ack_refusal_locked(const PullShard& shard, std::uint64_t index) const;
  // Marks the record acknowledged and pops the acknowledged prefix of the window; true when
  // the watermark moved.
  bool mark_acked_locked(PullShard& shard, std::uint64_t index);
  // When an ack wakes the shard's consumer (reading may go on, its end or a checkpoint is
  // due); nothing when it does not.
  std::optional<Clock::MonoTime> wake_after_ack_locked(PullShard& shard, bool moved);
  bool takeable_locked(const PullShard& shard) const;
  bool has_room_locked(const PullShard& shard) const;
  void make_ready_locked(PullShard& shard);
  void drop_locked(PullShard& shard);
  // The shard's logger (the worker's) while it is read. Lines are logged after the lock is
  // released: a logger may block, and nothing should wait behind it.
  Logger* logger_locked(const PullShard& shard) const;
  // The dead-letter sink's answers to nack(). Its refusals are one series for the hub,
  // whatever the record (a sink that is down refuses every record nacked meanwhile): logged
  // at the 1st, 3rd, 10th... with the count, and its end once when the sink accepts again.
  void sink_accepted(const PullShard& shard, const std::string& sink_name);
  void sink_refused(const PullShard& shard, const std::string& sink_name, const Record& record,
                    const Status& why);
  // Waits `backoff` before a refusing dead-letter sink is asked again, or less once the shard
  // ends (finish(), stop()): a handoff or a shutdown does not wait the backoff out.
  void wait_before_asking_again(const PullShard& shard, std::chrono::milliseconds backoff);

  const PullLimits limits_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable records_cv_;  // records ready, or closed
  std::condition_variable ended_cv_;    // a shard finished (nack's backoff)
  // The hub refers to its shards weakly: a shard owns the hub (records outlive the consumer),
  // so a strong reference back would be a cycle that nothing frees when a shard is dropped
  // without finish(). Owners of a shard: its PullProcessor and the PulledRecords taken.
  std::deque<std::weak_ptr<PullShard>> ready_;
  std::map<const PullShard*, std::weak_ptr<PullShard>> active_;
  bool closed_ = false;
  bool stopped_ = false;  // stop(): nobody waits in take() any more
  std::size_t buffered_total_ = 0;
  std::size_t unacked_total_ = 0;
  std::uint64_t acked_total_ = 0;
  std::uint64_t stuck_total_ = 0;
  std::uint64_t checkpoints_total_ = 0;
  std::uint64_t sink_refusals_ = 0;  // the dead-letter sink's refusals since it last accepted
};

}  // namespace kcl::pull
