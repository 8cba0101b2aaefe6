// StreamSet: the streams a worker reads, and the shard sync of each.
//
// One stream (WorkerConfig::stream_name): a one-stream lease table and one ShardSyncer, run at
// start and every shard_sync_interval (jittered), and at once when asked (a shard finished:
// its children's leases). A stream that no longer exists (ResourceNotFound) is fatal.
//
// Several (WorkerConfig::streams or stream_tracker): a multi-stream lease table in the Java
// KCL's format. Each stream's identifier "<account>:<stream>:<creation epoch>" is resolved
// once with DescribeStreamSummary (the account from its ARN), at most kResolvesPerSecond of
// them a second (AWS allows an account 20), and its syncer is due on a schedule spread over the
// sync interval (stream i of n first at start + i/n of it), so the ListShards calls of many
// streams do not come together; one scan of the lease table serves every stream's sync for
// half the interval (not one scan per stream). Where the periodic gate says this worker does not
// sync (leader-based assignment: a worker that does not lead), start() checks only the lease
// table's kind and syncs nothing: the streams are resolved and synced by the worker that runs
// the periodic sync, at once when it starts to (sync_unsynced_soon()), so a fleet of N workers
// starting together on S streams makes S DescribeStreamSummary calls, not N x S, and one
// worker creates the leases. The tracker is read every
// stream_poll_interval: a stream added is resolved and synced (its shards start at its
// initial position); a stream missing from the list is former: its leases go on being read
// (by whoever holds them) and are deleted former_stream_deletion_delay after this worker
// first saw it missing, unless it came back (0: never). A stream that no longer exists has
// its leases deleted at once and is resolved again while it is listed (a stream created
// again under the same name is another stream: a new creation epoch). A deletion that fails
// (a throttle, a 5xx) is kept, with the stream's identifier, and tried again at each shard
// sync interval until it succeeds (as the Java KCL's "Will retry later"); a former stream
// listed again before then keeps its leases. At start, a stream whose sync fails (an access
// error, a throttle past the retries) does not hold the others back: it is logged and tried
// again 5 s later; only when no stream syncs does start() fail. Failures in a row, of a deletion or
// of a stream's sync, are logged at the 1st, 3rd, 10th, 100th... with their count
// (base/failure_series.h).
//
// Thread safety: start() and tick() from the worker's controlling (scheduler) thread;
// initial_position_of() and names() from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/failure_series.h"
#include "kcl/clock.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"
#include "kcl/status.h"
#include "kcl/worker.h"
#include "kinesis/kinesis_client.h"
#include "leases/lease_store.h"
#include "shardsync/shard_syncer.h"

namespace kcl::worker {

// The colon-separated fields of an ARN: arn, partition, service, region, account, resource
// (more when the resource has colons).
std::vector<std::string> arn_fields(std::string_view arn);
// Why `name` is not a Kinesis stream name (1..128 of a-z A-Z 0-9 _ . -); empty when it is.
std::optional<std::string> stream_name_problem(const std::string& name);
// Why `position` cannot be where a stream's shards without a checkpoint start (AFTER_CHECKPOINT
// is a resume point: lineage would write its sequence number as every root lease's
// checkpoint); empty when it can.
std::optional<std::string> initial_position_problem(const InitialPosition& position);

class StreamSet {
 public:
  using Log = std::function<void(LogLevel, const std::string&)>;
  // What one turn changed.
  struct Turn {
    std::size_t leases_created = 0;
    std::size_t leases_deleted = 0;
    bool changed() const { return leases_created + leases_deleted > 0; }
  };

  // `kinesis`, `store`, `metrics` and `clock` must outlive the set.
  StreamSet(const WorkerConfig& config, kinesis::KinesisClient& kinesis, leases::LeaseStore& store,
            MetricsSink& metrics, const Clock& clock, Log log);

  bool multi_stream() const { return multi_; }

  // The first sync of every stream (after resolving them), or, several streams where the
  // periodic gate says no, a check of the lease table's kind alone. Errors: the first failure (a
  // stream that does not exist, a table of the other kind, ...); the caller retries
  // transient ones. A multi-stream worker starts with the streams it could resolve and sync
  // when at least one failed for a reason other than configuration, and says which.
  Result<Turn> start();

  // The streams this worker has not synced yet are due now (it has just begun to run the
  // periodic sync).
  void sync_unsynced_soon();

  // One scheduler turn: reads the tracker when due, syncs the streams that are due and, whatever
  // the periodic gate says, those named in `now` ("" names every stream), deletes the leases of
  // former and deleted streams when due. Errors: one stream's fatal failure (one-stream mode:
  // the stream does not exist).
  Result<Turn> tick(const std::set<std::string>& now = {});

  // When tick() next has something to do.
  Clock::MonoTime next_due() const;
  // Asked before each periodic sync (not a sync_all one, nor start()'s): false skips it. With
  // leader-based assignment only the leader syncs periodically (as the Java KCL 3.x's
  // PeriodicShardSyncManager): each sync scans the whole lease table, and one worker finding
  // new shards is enough. Set before the first tick().
  void set_periodic_gate(std::function<bool()> gate) { periodic_gate_ = std::move(gate); }
  // The next tick() reads the tracker (whatever stream_poll_interval says).
  void list_now() { next_list_ = Clock::MonoTime{} + std::chrono::nanoseconds(1); }

  // Where a shard of `stream` without a checkpoint starts (its own, else the worker's).
  InitialPosition initial_position_of(const std::string& stream) const;
  // The streams read now, comma-separated (for logs and the status page).
  std::string names() const;
  // The streams read now (not former ones), by name.
  std::vector<std::string> stream_names() const;
  // The ARN of `stream` as DescribeStreamSummary gave it when the stream was resolved (several
  // streams only); empty when not resolved.
  std::optional<std::string> stream_arn_of(const std::string& stream) const;

 private:
  struct Entry {
    explicit Entry(const std::string& name) : sync_failures("shard sync of stream " + name) {}
    StreamConfig config;
    std::string identifier;  // empty in one-stream mode, or until resolved
    std::unique_ptr<shardsync::ShardSyncer> syncer;
    Clock::MonoTime next_sync{};
    std::optional<Clock::MonoTime> missing_since;  // former: when first seen missing
    base::FailureSeries sync_failures;             // this stream's syncs failed in a row
  };
  // The leases of a stream to delete (by its identifier) until a deletion succeeds.
  struct Deletion {
    Deletion(std::string stream_name, bool is_former)
        : stream(std::move(stream_name)),
          former(is_former),
          failures("deleting the leases of stream " + stream) {}
    const std::string stream;
    const bool former;  // no longer listed (else: no longer exists)
    base::FailureSeries failures;
  };

  std::vector<StreamConfig> configured_streams();
  void refresh_list(Clock::MonoTime now);
  Status resolve(Entry& e);
  // Syncs one stream; a deleted stream's leases are deleted. Adds to `turn`.
  Status sync(Entry& e, Turn& turn);
  Status delete_leases_of(const std::string& identifier, Turn& turn);
  // Notes the leases of `identifier` (stream `stream`) to be deleted and tries it now.
  void delete_later(const std::string& stream, const std::string& identifier, bool former,
                    Turn& turn);
  // Tries one deletion; true when done. A failure is logged per series and kept.
  bool try_deletion(const std::string& identifier, Deletion& d, Turn& turn);
  // The deletions that failed before, tried again when due.
  void retry_deletions(Clock::MonoTime now, Turn& turn);
  void schedule_spread(Clock::MonoTime now);
  // Several streams: kFailedPrecondition when the lease table holds one-stream leases.
  Status check_table_kind();

  const WorkerConfig& config_;
  const bool multi_;
  kinesis::KinesisClient& kinesis_;
  leases::LeaseStore& store_;
  MetricsSink& metrics_;
  const Clock& clock_;
  Log log_;
  std::map<std::string, Entry> entries_;  // by stream name
  Clock::MonoTime next_list_{};
  std::set<std::string> reported_bad_names_;          // tracker names already logged as invalid
  std::set<std::string> reported_bad_positions_;      // tracker positions logged as refused
  mutable std::mutex mu_;                             // guards positions_, names_ and arns_
  std::map<std::string, InitialPosition> positions_;  // by stream name
  std::string names_;
  std::map<std::string, std::string> arns_;  // stream name -> ARN, once resolved
  std::function<bool()> periodic_gate_;
  // Several streams only: the lease table as last listed for the syncs, and when.
  std::optional<std::vector<Lease>> listing_;
  Clock::MonoTime listing_at_{};
  Clock::MonoTime next_resolve_{};             // DescribeStreamSummary calls paced from here on
  std::map<std::string, Deletion> deletions_;  // by stream identifier: still to delete
  Clock::MonoTime next_deletion_{};            // when a failed deletion is tried again
};

// DescribeStreamSummary calls a worker makes at most in a second: half of an account's limit
// (20 a second,
// https://docs.aws.amazon.com/kinesis/latest/APIReference/API_DescribeStreamSummary.html),
// leaving the rest to a new leader's and to other applications.
inline constexpr int kResolvesPerSecond = 10;

}  // namespace kcl::worker
