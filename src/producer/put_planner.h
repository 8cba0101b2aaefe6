// producer/put_planner.h: which records go in the producer's next PutRecords call. The
// planner holds the records waiting to be sent, one queue per shard of the shard map (and one
// for records of no known shard), and decides, from the time the caller passes in:
//  - linger: a shard's records wait until the first of them is `linger` old, unless a full
//    call's worth (500 Kinesis records or 5 MiB) may go now, the caller flushes or closes, or
//    put() waits for room (then a shard that may send all it holds goes at once);
//  - ordering: at most max_in_flight_per_shard calls of a shard in flight; with 1 (ordered
//    mode) a partition key is in at most one Kinesis record of a call, and a failed record is
//    put back at the front of its shard's queue, so no later record of its key overtakes it;
//  - aggregation: with `aggregate`, a shard's leading small records packed into one KPL
//    aggregate of at most aggregation_max_bytes (its own partition and hash keys included);
//  - rate: each shard's ShardRate (producer/shard_rate.h) decides when it may send and how
//    much; a throttle answer cuts it;
//  - retries: the records of a failed Kinesis record go back after the retry policy's delay
//    for their shard, or fail for good (not retryable, out of attempts, quota spent).
// No threads, no lock, no I/O: the dispatcher (producer.cpp) holds the lock around it, makes
// the calls and answers the records.
//
// Thread safety: a plain value (one thread at a time).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "aws/retry.h"
#include "base/cache_prefetch.h"
#include "kcl/clock.h"
#include "kcl/producer.h"
#include "kinesis/kinesis_types.h"
#include "producer/key_set.h"
#include "producer/kpl_aggregator.h"
#include "producer/shard_map.h"
#include "producer/shard_rate.h"

namespace kcl::producer {

// How long the records of an aggregate written to another shard than predicted wait for the
// shard map to be read again before they are sent anyway (PutPlanner::on_result).
inline constexpr std::chrono::milliseconds kMisroutedHold{2000};

// The Kinesis limits of one PutRecords call and of one record.
inline constexpr std::size_t kMaxCallRecords = 500;
inline constexpr std::size_t kMaxCallBytes = 5u << 20;
inline constexpr std::size_t kMaxRecordBytes = 1u << 20;
// How many records ahead a loop over a call's or a queue's records asks for their cache
// lines (base/cache_prefetch.h): the records were last written on another thread.
inline constexpr std::size_t kPrefetchAhead = 8;
// The most bytes of a record's data asked for ahead.
inline constexpr std::size_t kPrefetchDataBytes = 512;

// How a record is answered: nothing (a spare item), a callback, a callback that takes the
// record back, or a future's promise. One of them, so an item is three cache lines, not four.
using PutAnswer =
    std::variant<std::monostate, PutCallback, PutRecordCallback, std::promise<Result<PutResult>>>;

// One record put() accepted.
struct PutItem {
  // What the planner reads of a queued record first, together on one line.
  HashKey hash = 0;
  std::uint64_t key_id = 0;  // the partition key's hash, for the ordered check (KeySet)
  std::size_t bytes = 0;     // data and partition key
  Clock::MonoTime enqueued{};
  int attempts = 0;
  std::string pk, data, ehk;
  PutAnswer answer;
};

// One Kinesis record of a call: `count` records of PlannedCall::items from `first` (count >= 2:
// packed into `aggregate`), predicted to go to shard PlannedCall::shards[shard].
struct PlannedEntry {
  std::uint32_t shard = 0;
  std::uint32_t first = 0;
  std::uint32_t count = 1;
  std::uint32_t bytes = 0;  // what the shard's limit counts: data and partition key
  std::string aggregate;
  // Set by PutPlanner::on_result when the service wrote the aggregate to another shard than
  // predicted: its records went back to be sent again (or failed), the caller answers none.
  bool resent = false;
  bool aggregated() const { return count >= 2; }
};

// One PutRecords call: its records belong to it until on_result().
struct PlannedCall {
  std::vector<std::string> shards;  // the shards it takes records from ("": unknown)
  std::vector<PlannedEntry> entries;
  std::vector<std::unique_ptr<PutItem>> items;
  std::size_t bytes = 0;    // its Kinesis records' data and keys
  Clock::MonoTime built{};  // when its records were taken from their shards
  bool empty() const { return entries.empty(); }
};

// The cache lines of items[i] (none past the end): a call's or a shard queue's.
template <class Items>
void prefetch_item(const Items& items, std::size_t i) {
  if (i < items.size()) base::prefetch_object(items[i].get());
}
// The first bytes of items[i]'s data (its item's lines asked for earlier); a large record's
// rest comes as the hardware sees it read in order.
template <class Items>
void prefetch_data(const Items& items, std::size_t i) {
  if (i < items.size()) {
    base::prefetch_bytes(items[i]->data.data(),
                         std::min(items[i]->data.size(), kPrefetchDataBytes));
  }
}

class PutPlanner {
 public:
  // What add() changed for the caller's plan.
  struct Added {
    bool first_of_shard = false;  // the record is its shard's first queued
    bool fills_call = false;      // the queued records just reached a full call
    Clock::MonoTime deadline{};   // when its linger ends
  };
  // What, besides the records, makes a call due now.
  struct Urgency {
    bool flush = false;            // flush() or shutdown() waits: no lingering
    bool waiting_putters = false;  // put() waits for room: no record can join
  };
  // The next call (empty when none is due) and when to look again.
  struct Next {
    PlannedCall call;
    Clock::MonoTime wake{};
  };
  // Records whose outcome is known, for the caller to answer.
  using Done = std::vector<std::pair<std::unique_ptr<PutItem>, Result<PutResult>>>;
  // What one answered call did to its records.
  struct Settled {
    std::uint64_t succeeded = 0, failed = 0, retried = 0, throttled = 0;
    bool refresh_needed = false;  // a record went to another shard than the map said
    // Aggregates written to another shard than the map said, their records sent again.
    std::uint64_t aggregates_resent = 0;
  };
  // Totals since the planner was made.
  struct Counts {
    std::uint64_t records_succeeded = 0, records_failed = 0, records_retried = 0, throttled = 0;
  };

  // `policy` gives the retries' delays and quota; it outlives the planner.
  PutPlanner(const ProducerConfig& config, aws::RetryPolicy& policy);

  // Installs a new shard map: records queued for shards no longer open move to the open ones
  // (per the new map); a closed shard's calls in flight stay counted until answered.
  void set_map(ShardMap map, Clock::MonoTime now);
  const ShardMap& map() const { return map_; }

  // Queues a checked record (its hash, key_id and bytes filled) on its shard at `now`.
  Added add(std::unique_ptr<PutItem> item, Clock::MonoTime now);

  // The call to make now, per the rules above (its shards count it as in flight), or an
  // empty one; and when a shard may become sendable or its linger ends.
  Next next_call(Clock::MonoTime now, Urgency urgency);

  // Whether next_call() at `now` would make a call, taking nothing; lowers `wake` to when it
  // should look again otherwise.
  bool call_due(Clock::MonoTime now, Urgency urgency, Clock::MonoTime& wake);

  // The answer to `call` (a failure of the call as a whole, or one result per entry): the
  // records taken go to `done` when they failed for good; those to retry go back to their
  // shards; those that succeeded stay in `call` (the caller answers them). Frees the
  // shards' flight, counts the window and cuts the rate on a throttle.
  // An aggregate the service wrote to another shard than the map predicted (a split or a
  // merge the map has not seen) is sent again, as the KPL does: a consumer that follows the
  // Java KCL drops an aggregate holding a record whose hash key lies outside the shard it was
  // read from, so the copy written there may never be delivered. Its records go back to the
  // front of their shards' queues, held until set_map() installs the map read again (which
  // moves them to the shards that replaced theirs) or kMisroutedHold passes, and the entry is
  // marked `resent`; a record out of attempts fails instead, saying where it was written.
  Settled on_result(PlannedCall& call, const Result<kinesis::PutRecordsResult>& result,
                    Clock::MonoTime now, Done& done);

  // Takes every queued record out (closing).
  std::vector<std::unique_ptr<PutItem>> drain();

  std::size_t queued_records() const { return queued_records_; }
  std::size_t queued_bytes() const { return queued_bytes_; }
  const Counts& counts() const { return counts_; }
  // The rate of shard `id` (null when it has no queue): for tests.
  const ShardRate* rate_of(const std::string& id) const;

  // The failure an entry of a PutRecords answer stands for.
  static Status entry_failure(const kinesis::PutRecordsEntryResult& r);

 private:
  struct ShardQueue {
    ShardQueue(std::string shard_id, ShardRate r) : id(std::move(shard_id)), rate(r) {}
    std::string id;  // "" for records of no known shard
    std::deque<std::unique_ptr<PutItem>> items;
    std::size_t queued_bytes = 0;  // of `items`
    int in_flight = 0;
    Clock::MonoTime not_before{};
    int retry_round = 0;
    int quota_taken = 0;
    ShardRate rate;
    // Since when the shard may send (sendable, with the tokens for a worthwhile send).
    std::optional<Clock::MonoTime> ready_since;
  };
  // The next Kinesis record of a shard: how many of its records, and the bytes it takes.
  struct Plan {
    std::size_t records = 1;
    std::size_t bytes = 0;
  };
  // One shard's failed records of a call, in call order, with the failure to back off for.
  using FailedSlot = std::pair<std::vector<std::unique_ptr<PutItem>>, Status>;
  using Failed = std::map<std::string, FailedSlot>;
  // Per shard of a call (as PlannedCall::shards): whether some record succeeded, failed, was
  // throttled; the Kinesis records and bytes it sent, and those that count as written (a
  // call that failed as a whole may have been written).
  struct ShardOutcome {
    bool succeeded = false, failed = false, throttled = false;
    double sent_records = 0, sent_bytes = 0, written_records = 0, written_bytes = 0;
  };

  ShardQueue& queue_for(HashKey hash, Clock::MonoTime now);
  ShardQueue& queue_named(const std::string& id, Clock::MonoTime now);
  bool sendable(const ShardQueue& q, Clock::MonoTime now) const;
  Clock::MonoTime rate_ready_at(ShardQueue& q, Clock::MonoTime now);
  std::chrono::milliseconds coalesce() const;
  bool take_from_shard(ShardQueue& q, Clock::MonoTime now, PlannedCall& call,
                       Clock::MonoTime& wake);
  Plan plan_record(const ShardQueue& q, const KeySet* ordered_keys);
  void take_items(ShardQueue& q, std::size_t records, PlannedCall& call, KeySet* ordered_keys);
  bool entry_failed(PlannedCall& call, const PlannedEntry& e, const Status& failure,
                    FailedSlot& slot, Done& done);
  void settle_shards(const PlannedCall& call, const std::vector<ShardOutcome>& outcomes,
                     Clock::MonoTime now);
  void retry_failed(Failed& failed, Clock::MonoTime now, Done& done);
  void requeue_front(std::vector<std::unique_ptr<PutItem>>& items, Clock::MonoTime not_before,
                     Clock::MonoTime now);
  void resend_misrouted(PlannedCall& call, PlannedEntry& e, const std::string& written_to,
                        std::vector<std::unique_ptr<PutItem>>& resend, Done& done);

  const ProducerConfig config_;
  aws::RetryPolicy& policy_;
  ShardMap map_;
  std::vector<ShardQueue*> range_queues_;  // the queue of each of map_'s ranges
  std::map<std::string, ShardQueue> shards_;
  // Shards no longer open in map_ with calls unanswered: no shard sends until they answer.
  std::set<std::string> closed_in_flight_;
  std::size_t queued_records_ = 0;
  std::size_t queued_bytes_ = 0;
  KplAggregator agg_;
  KeySet call_keys_;  // the keys of the call being built (ordered mode)
  Counts counts_;
};

}  // namespace kcl::producer
