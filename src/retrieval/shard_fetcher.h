// retrieval/shard_fetcher.h: polling retrieval (GetShardIterator + GetRecords through
// kinesis::KinesisClient, one attempt per call) for one shard, the polling RecordsSource,
// step by step, into a bounded queue of batches.
//
// The fetcher owns no thread and never sleeps. Its owner (the shard consumer, run on the
// worker's pool) calls fetch_step(), which makes at most one Kinesis call when one is due and
// says when the next step should run; the consumer takes what was fetched with take_batch().
//
//   consumer thread(s)                       ShardFetcher
//   ------------------                       ------------
//   step = fetch_step()  ───────────────────▶ maybe one call ──▶ queue of FetchedBatch
//   schedule again at step.next_step_at                            │
//   take_batch() ◀─────────────────────────────────────────────────┘
//
// Pacing (see RetrievalConfig): starts of calls of one kind are at least min_call_interval
// apart (a new iterator is used at once; a call after a failure waits for the interval from
// the failed one); each answer's bytes are paid for at max_read_bytes_per_second before the
// next GetRecords (the shard's read budget: refills at that rate, holds one second of it,
// empty at the start, charged when an answer arrives; a 10 MiB answer keeps the next call 5 s
// after the call that read it), and a call past the first asks for about one second of that
// budget; after a response with records or MillisBehindLatest > 0 the next call is due as
// soon as both allow; after an empty, caught-up response it waits idle_time_between_calls;
// transient failures (throttling, 5xx, timeouts, after the AWS client's own retries) back
// off exponentially with full jitter, forever; no GetRecords call is made while the queue
// holds max_prefetch_records or max_prefetch_bytes (one response may overshoot the bound).
//
// Positions. TRIM_HORIZON, LATEST and AT_TIMESTAMP map to the iterator types of the same
// name. A checkpoint (S, N) resumes AT_SEQUENCE_NUMBER S and drops every delivered record
// whose (sequence, sub-sequence) is <= (S, N) (a plain record has sub-sequence 0, so a plain
// record S is dropped; of a KPL aggregate S only the sub-records after N are kept). AFTER S
// would be wrong: (S, 0) may be sub-record 0 of an aggregate, and AFTER S would lose its
// sub-records 1..n. Sequence numbers are compared as decimal strings (length, then
// lexicographically), see retrieval::compare_sequence_numbers.
//
// Expired iterator: a new iterator AFTER_SEQUENCE_NUMBER the last record fetched (the whole
// Kinesis record, so all of an aggregate's sub-records were already queued), or from the
// original start position when nothing was fetched yet: nothing lost, nothing repeated.
// (Before the first record, LATEST restarts at the then latest position, as the Java KCL
// does.)
//
// Errors. kNotFound (stream deleted, shard gone) ends the fetcher with a kNotFound Status
// saying "stream S was deleted or shard X no longer exists: ...". kUnavailable and
// kDeadlineExceeded are transient (backoff). kExpiredIterator is handled as above. Anything
// else (invalid argument, permission denied, a malformed response, ...) ends the fetcher
// with that Status, prefixed with the stream and shard. A malformed response (kInternal) is
// retried like a transient failure up to 5 times in a row, then ends the fetcher. Batches fetched
// before the end stay in the queue and can still be taken.
//
// End of shard: a response without NextShardIterator produces a final batch with
// shard_end = true (holding that response's records and ChildShards, possibly none), after
// which the fetcher is finished. Other responses produce a batch only when they carry
// records to deliver; an empty response only updates millis_behind_latest().
//
// KPL: every record goes through retrieval::deaggregate(); corrupt aggregates are delivered
// as they came and counted (corrupt_aggregates()).
//
// Thread safety: fetch_step() must be called by one thread at a time (successive calls may
// come from different threads if the caller orders them, as a pool does). take_batch(),
// has_room() and every accessor may be called from any thread, concurrently with
// fetch_step(). The KinesisClient and the Clock must outlive the fetcher.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aws/retry.h"
#include "kcl/clock.h"
#include "kcl/record.h"
#include "kcl/retrieval_config.h"
#include "kcl/status.h"
#include "kinesis/kinesis_client.h"
#include "kinesis/kinesis_types.h"
#include "retrieval/queued_records_source.h"

namespace kcl::retrieval {

// The queue, the finished and shard-ended flags and their accessors (take_batch(), has_room(),
// drained(), terminal_error(), shard_ended(), queued_*(), millis_behind_latest(),
// corrupt_aggregates()) are QueuedRecordsSource's.
class ShardFetcher final : public QueuedRecordsSource {
 public:
  // `config` is validated at the first fetch_step(); problems end the fetcher with
  // kInvalidArgument listing them (as does a checkpoint whose sequence number is not a
  // decimal number). `jitter_seed` seeds the backoff jitter (tests pass a fixed one).
  ShardFetcher(kinesis::KinesisClient& client, std::string stream, std::string shard_id,
               StartPosition start, RetrievalConfig config, const Clock& clock,
               std::optional<std::uint64_t> jitter_seed = std::nullopt);

  ShardFetcher(const ShardFetcher&) = delete;
  ShardFetcher& operator=(const ShardFetcher&) = delete;

  // Makes at most one call (GetShardIterator or GetRecords) if one is due, and never waits.
  // One thread at a time (see the thread-safety note above).
  FetchStep fetch_step() override;

  // Calls made to Kinesis (GetShardIterator + GetRecords), whatever their outcome.
  std::uint64_t calls_made() const noexcept { return calls_.load(std::memory_order_relaxed); }
  // Transient failures seen (throttling, 5xx, timeouts), each followed by a backoff.
  std::uint64_t throttles_seen() const noexcept {
    return throttles_.load(std::memory_order_relaxed);
  }
  // ExpiredIterator responses seen.
  std::uint64_t iterators_expired() const noexcept {
    return expired_.load(std::memory_order_relaxed);
  }
  // Records dropped by the resume filter (at or below the starting checkpoint).
  std::uint64_t records_skipped_by_checkpoint() const noexcept {
    return skipped_.load(std::memory_order_relaxed);
  }

  const std::string& stream() const noexcept { return stream_; }
  const std::string& shard_id() const noexcept { return shard_id_; }
  const StartPosition& start_position() const noexcept { return start_; }

 private:
  enum class State { kNew, kNeedIterator, kReading, kDone };

  FetchStep step_get_iterator();
  FetchStep step_get_records();
  // Handles a failed call: backoff, a new iterator, or the end of the fetcher.
  FetchStep on_failure(const Status& status);
  FetchStep fail(Status status);
  FetchStep on_false_end(const Status& open);
  // The budget of one call (one attempt by default); counts the call.
  aws::CallOptions call_options(std::chrono::milliseconds timeout);
  // Where the next GetShardIterator points (the start, or after the last record fetched).
  kinesis::IteratorPosition iterator_position() const;
  Clock::MonoTime earliest_next_call() const;
  // GetRecords calls are paced among themselves: the service limits each call per shard on
  // its own (5 GetRecords and 5 GetShardIterator a second), so a new iterator is used at once.
  Clock::MonoTime earliest_next_records_call() const;
  // Charges an answer of `bytes` to the shard's read budget (see the .cpp).
  void pay_for_answer(std::size_t bytes, Clock::MonoTime call_start, Clock::MonoTime answered);
  // The Limit of the next GetRecords (see the .cpp).
  int records_limit() const;

  kinesis::KinesisClient& client_;
  const std::string stream_;
  const std::string shard_id_;
  const StartPosition start_;
  const RetrievalConfig config_;
  const Clock& clock_;

  // ---- owned by the fetch_step() caller ----
  State state_ = State::kNew;
  std::string iterator_;
  std::string last_fetched_sequence_;               // of the last Kinesis record fetched
  bool resume_filter_ = false;                      // dropping records <= the starting checkpoint
  std::optional<Clock::MonoTime> last_call_start_;  // of either call
  std::optional<Clock::MonoTime> last_records_call_start_;  // of the last GetRecords
  // When the shard's read budget is out of debt (max_read_bytes_per_second); empty before the
  // first answer or without pacing by bytes.
  std::optional<Clock::MonoTime> read_paid_until_;
  std::size_t record_bytes_ = 0;  // mean size of a record in the last answer with records
  Clock::MonoTime next_due_{};    // earliest time of the next call
  // Which failures are retried and after how long (aws/retry.h, SeriesRule::records_source).
  aws::RetrySeries retries_;
  // Answers in a row that ended the shard while ListShards showed it open (on_false_end).
  int false_ends_ = 0;
  static constexpr int kFalseEndsBeforeFailing = 5;
  // Reused from call to call; between calls it holds neither a body nor a records vector.
  kinesis::GetRecordsResult result_;

  // ---- read by the accessors (the queue and flags are QueuedRecordsSource's) ----
  std::atomic<std::uint64_t> calls_{0};
  std::atomic<std::uint64_t> throttles_{0};
  std::atomic<std::uint64_t> expired_{0};
  std::atomic<std::uint64_t> skipped_{0};
};

}  // namespace kcl::retrieval
