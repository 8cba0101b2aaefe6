// kcl/pull_consumer.h: read a stream by pulling records and acknowledging each one when the
// application has finished it, in any order and from any thread. The checkpoint of each
// shard follows its low watermark: the last record such that it and every earlier record of
// the shard were acknowledged.
//
//   kcl::PullConsumerConfig config;
//   config.worker.stream_name = "orders";
//   config.worker.leases.application_name = "order-audit";
//   kcl::PullConsumer consumer(config);
//   if (auto s = consumer.start(); !s.ok()) { ... }
//   while (running) {
//     std::optional<kcl::PulledRecord> r = consumer.next(std::chrono::milliseconds(200));
//     if (!r) continue;                            // nothing yet (or shut down)
//     pool.submit([r = std::move(*r)]() mutable {  // hand it to any thread
//       handle(r.record());
//       (void)r.ack();                              // when done; any order
//     });
//   }
//   consumer.shutdown();                            // waits for acks, checkpoints, hands back
//
// Callbacks or pulling? Use kcl::Worker with a RecordProcessor (kcl/worker.h) when a shard's
// records are handled in order, batch by batch, on the thread that receives them: it is the
// simplest and the cheapest. Pull when the application handles records concurrently (a
// thread pool, calls to slow services in flight together, batching by destination) and
// finishes them out of order: the pull consumer keeps the bookkeeping (which records are
// done, how far it is safe to checkpoint) that is easy to get wrong on top of callbacks.
//
// What it guarantees:
//  - Records of all the shards this worker holds come through one consumer; within a shard,
//    next() returns them in shard order. Shards take turns, so one busy shard does not
//    starve the others.
//  - The checkpoint of a shard never passes a record that was not acknowledged, never moves
//    backwards, and is written at most every `checkpoint_interval` per shard and at
//    shutdown, fenced on the lease like every checkpoint (kcl/processor.h).
//  - Planned moves deliver nothing twice. When a shard's lease moves gracefully (the leader
//    hands it to another worker, or this consumer shuts down), the shard's records stop
//    being offered at once (records read but not yet taken are simply not offered: the next
//    owner reads them from the checkpoint), the consumer waits for the records already
//    taken to be acknowledged (in any order, from any thread), checkpoints the watermark and
//    only then lets the lease go; the next owner starts right after the last record taken.
//    The wait is bounded: by the lease handoff_timeout less twice the handoff margin
//    (LeaseConfig; 26 s by default) for a handoff, by shutdown_ack_timeout at shutdown. A
//    record acknowledged after that is harmless: its ack returns kCancelled and writes
//    nothing, the checkpoint stays below it, and the next owner delivers it (and the
//    records after it) again.
//  - Otherwise at-least-once: a record taken but not acknowledged when its lease is lost
//    (the process died or missed its renewals) is delivered again by the next owner.
//    Records of a shard whose lease was lost are not delivered any more, and their acks
//    return kLeaseLost and write nothing.
//  - Memory is bounded: a shard whose records held back from its checkpoint (taken and not
//    acknowledged, or acknowledged after one that is not) reach `max_unacked_per_shard` (or
//    whose records taken and not acknowledged reach `max_unacked_bytes_per_shard`) is not
//    offered by next() and stops reading; the other shards go on. A stuck record shows up as
//    lag (and once in the log and the metric "pull.stuck_records"), not as growth.
//  - A shard's end is checkpointed (SHARD_END) once all its records are acknowledged; its
//    child shards start only then, so order per partition key holds across a split.
//
// Thread safety: every member may be called from any thread. A PulledRecord may be moved
// to, and acknowledged from, any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/record.h"
#include "kcl/status.h"
#include "kcl/worker.h"

namespace kcl {

namespace pull {
class PullShard;  // internal: one shard's records as handed on, and their acks
class PullHub;    // internal: the queue all shards feed
}  // namespace pull

struct PullConsumerConfig {
  // The stream, application, lease, retrieval and processing settings (kcl/worker.h).
  WorkerConfig worker;
  // Records of one shard taken by next() and held back from its checkpoint (not yet
  // acknowledged, or acknowledged after one that is not): at this bound the shard is not
  // offered by next() and its reading pauses (records buffered but not taken count toward
  // the reading pause too, so a shard holds at most this plus one batch).
  // Default 10,000, range 1..1,000,000.
  std::size_t max_unacked_per_shard = 10000;
  // The same bound in bytes of memory: each record counts its share of the batch it came in
  // (the GetRecords answer or fan-out event its data points into, and the record itself),
  // which is about 2.5 times its data for records of 100 B. Default 16 MiB, range
  // 1 KiB..1 GiB.
  std::size_t max_unacked_bytes_per_shard = 16u << 20;
  // How often each shard's watermark is checkpointed (when it moved). Default 1 s,
  // range 10 ms..1 h.
  std::chrono::milliseconds checkpoint_interval{1000};
  // A record taken but not acknowledged for this long is reported once (a warning naming
  // its shard and sequence number, and the metric "pull.stuck_records"). Default 60 s,
  // range 1 s..24 h.
  std::chrono::milliseconds stuck_record_warning{60000};
  // shutdown() waits this long for records taken but not acknowledged before it
  // checkpoints what was acknowledged (each shard as soon as all of its records taken are
  // acknowledged). A lease handed to another worker waits by the lease handoff_timeout
  // instead (see above). Default 30 s, range 0..1 h.
  std::chrono::milliseconds shutdown_ack_timeout{30000};

  // Every problem with this configuration (including the worker's), in plain words; empty
  // when valid.
  std::vector<std::string> validate() const;
};

// One record taken from a PullConsumer. Move-only and cheap to move; acknowledges nothing
// on destruction (a record never acknowledged holds its shard's checkpoint back, and is
// delivered again after the lease moves or the process restarts).
class PulledRecord {
 public:
  PulledRecord(PulledRecord&&) noexcept;
  PulledRecord& operator=(PulledRecord&&) noexcept;
  PulledRecord(const PulledRecord&) = delete;
  PulledRecord& operator=(const PulledRecord&) = delete;
  ~PulledRecord();

  const Record& record() const { return record_; }
  // The stream the record came from (a consumer may read several: WorkerConfig::streams).
  const std::string& stream_name() const;

  // The application finished this record. At most once per record; from any thread.
  // Returns OK; kLeaseLost when the shard's lease was lost since the record was taken
  // (nothing is written; the next owner delivers it again); kFailedPrecondition when this
  // record was already acknowledged (or moved from); kCancelled when the shard's lease was
  // handed on or the consumer shut down before this ack (the wait for it ran out: the final
  // checkpoint was written without this record, which the next owner delivers again).
  [[nodiscard]] Status ack();
  // The application gives up on this record (a poison record): it is handed to the
  // dead-letter sink, config.worker.processing.dead_letter_sink (kcl/dead_letter.h), with
  // `reason` as its error and 1 as its attempts, and counts as acknowledged once the sink
  // accepted it, so the watermark (and the checkpoint) passes it only then. While the sink
  // refuses, nack() blocks and asks again after the processing failure backoff (logged once
  // per series with the count), until it accepts or the shard stops being read. At most once
  // per record, instead of ack(); from any thread. Returns as ack() does, and
  // kFailedPrecondition (nothing done; ack() or nack() may still follow) when no sink is
  // configured. Counted in the metric records.dead_lettered {stream, shard, sink}.
  [[nodiscard]] Status nack(std::string_view reason);

 private:
  friend class pull::PullHub;
  PulledRecord(std::shared_ptr<pull::PullShard> shard, std::uint64_t index, Record record);

  std::shared_ptr<pull::PullShard> shard_;  // null once moved from
  std::uint64_t index_ = 0;
  bool acked_ = false;
  Record record_;
};

// What a pull consumer holds at a moment.
struct PullStats {
  std::size_t shards = 0;           // shards handing records on (leases held and initialized)
  std::size_t buffered = 0;         // records read, not yet taken by next()
  std::size_t unacked = 0;          // records taken, not yet acknowledged
  std::uint64_t acked = 0;          // acknowledgements accepted since start
  std::uint64_t stuck_records = 0;  // records reported as stuck (stuck_record_warning)
  std::uint64_t checkpoints = 0;    // watermark checkpoints written
};

class PullConsumer {
 public:
  explicit PullConsumer(PullConsumerConfig config, Dependencies deps = {});
  ~PullConsumer();  // shutdown() if still running
  PullConsumer(const PullConsumer&) = delete;
  PullConsumer& operator=(const PullConsumer&) = delete;

  // Validates the configuration and starts the worker in the background; returns once it
  // runs. Errors as Worker::start (kInvalidArgument lists every configuration problem).
  Status start();

  // The next record, waiting up to `timeout` (milliseconds::max(): for ever); nullopt on
  // timeout. Before start() and while shutdown() drains, nothing comes: it waits out its
  // timeout (or the end of shutdown()); once shutdown() returned, nullopt at once.
  std::optional<PulledRecord> next(std::chrono::milliseconds timeout);
  // Up to `max` records (at least one unless it times out), waiting up to `timeout` for the
  // first. Records of a shard stay in shard order within and across batches.
  std::vector<PulledRecord> next_batch(std::size_t max, std::chrono::milliseconds timeout);

  // Graceful stop: next() hands out nothing more; each shard waits up to shutdown_ack_timeout
  // for its records taken but not acknowledged, checkpoints its watermark and hands its
  // lease back (the same path as a handoff). Blocks until done; returns why the worker stopped (OK
  // after a clean stop). Calling it again returns the same result. (The same meaning as
  // Worker::shutdown() and Producer::shutdown().)
  Status shutdown();
  // Begins the same graceful stop on a thread of its own and returns at once; the future is
  // ready when shutdown() would have returned. Threads still holding records can go on
  // acknowledging them meanwhile. Calling it again returns the same future.
  std::shared_future<Status> begin_shutdown();

  // Waits at most `timeout` for the worker to stop by itself (a fatal error); its reason
  // when it has.
  std::optional<Status> wait_for(std::chrono::milliseconds timeout);

  PullStats stats() const;
  const std::string& worker_id() const;
  // The embedded HTTP endpoint's base URL when WorkerConfig::http_address is set.
  std::string http_url() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kcl
