// retrieval/records_source.h: where a shard consumer gets its records from. Polling
// (ShardFetcher: GetShardIterator + GetRecords) is the first implementation; enhanced fan-out
// (SubscribeToShard's pushed events) is the second. The shard consumer and `kcl tail` use
// this interface only.
//
// The shape: a source owns no thread and never sleeps. Its owner calls fetch_step() when the
// previous step said it is due; a step does a bounded amount of work (at most one call for
// polling; decoding what arrived for a push source) and says when it wants to run next.
// What it fetched waits in a bounded queue (the prefetch bound, RetrievalConfig) until the
// consumer takes it with take_batch(); at the bound a step does nothing and says so
// (wait_for_take), so a slow processor bounds memory instead of growing it. A push source
// calls the wake-up given to set_wakeup() when data arrives between steps.
//
//   consumer task ── take_batch() ─▶ process_records        fetch task ── fetch_step() ─▶ call
//        ▲                                                        │ queued a batch
//        └──────────────── wake (schedule now) ◀──────────────────┘
//
// Errors: a transient failure (throttling, 5xx, timeouts, a malformed answer) is retried by
// the source with the shared backoff (aws/retry.h, full jitter), forever; a terminal one
// ends the source (finished(), terminal_error()); batches fetched before stay takeable.
//
// Thread safety: fetch_step() by one thread at a time (successive calls may come from
// different threads of a pool); take_batch(), has_room() and the accessors from any thread,
// concurrently with fetch_step().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/capacity_recycler.h"
#include "kcl/clock.h"
#include "kcl/record.h"
#include "kcl/start_position.h"
#include "kcl/status.h"
#include "kinesis/kinesis_types.h"

namespace kcl::retrieval {

using kcl::StartPosition;

// Large record vectors given back by finished batches, for later batches to fill (keeps at
// most 8 vectors and 16 MiB; see base/capacity_recycler.h).
base::CapacityRecycler<std::vector<kcl::Record>>& record_vector_recycler();

// What one GetRecords response yielded for the consumer.
struct FetchedBatch {
  FetchedBatch() = default;
  FetchedBatch(const FetchedBatch&) = default;
  FetchedBatch& operator=(const FetchedBatch&) = default;
  FetchedBatch(FetchedBatch&&) noexcept = default;
  FetchedBatch& operator=(FetchedBatch&&) noexcept = default;
  // Hands a large records vector to record_vector_recycler().
  ~FetchedBatch();

  std::vector<kcl::Record> records;  // in shard order, deaggregated, resume filter applied
  std::int64_t millis_behind_latest = 0;
  bool shard_end = false;                         // the last batch of the shard; nothing follows
  std::vector<kinesis::ChildShard> child_shards;  // from the final response, if it had any
  // Memory the batch holds: the response body its records point into and the records.
  std::size_t bytes = 0;
};

enum class FetchOutcome {
  kNotDue,           // nothing done: the next call is due at next_step_at
  kQueueFull,        // nothing done: the prefetch queue is at its bound (wait_for_take)
  kGotIterator,      // GetShardIterator succeeded
  kRecords,          // GetRecords returned records to deliver; one batch was queued
  kNoRecords,        // GetRecords returned nothing to deliver; no batch
  kRetrying,         // a transient failure (throttled, 5xx, timeout); backing off
  kIteratorExpired,  // the iterator expired; a new one is asked for next
  kShardEnd,         // end of shard: the final batch was queued; now finished
  kFailed,           // a terminal error (see terminal_error()); now finished
  kFinished,         // finished before this call: nothing done
};
std::string_view to_string(FetchOutcome outcome) noexcept;

struct FetchStep {
  FetchOutcome outcome = FetchOutcome::kNotDue;
  // When fetch_step() should run next (monotonic, the fetcher's Clock). time_point::max()
  // when finished, and when wait_for_take is set.
  Clock::MonoTime next_step_at = Clock::MonoTime::max();
  // The queue is full: run fetch_step() again once take_batch() has returned a batch.
  bool wait_for_take = false;
  // Records in the batch this step queued (0 when none).
  std::size_t records_queued = 0;
};

class RecordsSource {
 public:
  virtual ~RecordsSource() = default;

  // Does at most one bounded piece of work if one is due, and never waits.
  virtual FetchStep fetch_step() = 0;
  // Pops the oldest fetched batch, if any.
  virtual std::optional<FetchedBatch> take_batch() = 0;
  // True when the queue is below both prefetch bounds.
  virtual bool has_room() const = 0;
  // No more work will be done (end of shard or terminal error); batches may remain.
  virtual bool finished() const noexcept = 0;
  // finished() and nothing left to take.
  virtual bool drained() const = 0;
  // The error that ended the source; ok() when none.
  virtual Status terminal_error() const = 0;
  virtual std::size_t queued_records() const = 0;
  virtual std::size_t queued_bytes() const = 0;
  // MillisBehindLatest of the last answer (0 before the first).
  virtual std::int64_t millis_behind_latest() const noexcept = 0;
  // Aggregates that failed to deaggregate (delivered as they came).
  virtual std::uint64_t corrupt_aggregates() const noexcept = 0;
  // The last transient failure (the one a kRetrying step backs off from), in words; empty
  // before the first.
  virtual std::string last_retry_reason() const { return {}; }
  // A push source calls `wake` (from any thread) when data arrives between steps; a polling
  // source never needs to.
  virtual void set_wakeup(std::function<void()> wake) { (void)wake; }
};

// Makes the records source of shard `shard_id` of stream `stream` (the stream's name; a
// worker reading several streams has shards of the same id in each), reading from `start`.
using RecordsSourceFactory = std::function<std::shared_ptr<RecordsSource>(
    const std::string& stream, const std::string& shard_id, const StartPosition& start)>;

}  // namespace kcl::retrieval
