// ShardSyncer: keeps the lease table in step with the shards of the stream.
//
// One pass (sync_once):
//   1. list the leases (a scan);
//   2. list the shards (ListShards, every page), after the scan, so that the listing is at
//      least as new as the leases (see leases_to_delete);
//   3. create the missing leases (lineage.h: leases_to_create), parents first, each with
//      create_lease_if_not_exists. kAlreadyExists means another worker created it first,
//      which is fine. Any other failure stops the pass there, so a child's lease is never
//      created while its parent's creation is still due;
//   4. set childShardIds on the leases of closed shards whose children are listed
//      (update_child_shard_ids; it does not touch leaseCounter, so it never disturbs the
//      holder). A lease deleted meanwhile (kNotFound) is skipped;
//   5. delete the leases that nobody needs any more (lineage.h: leases_to_delete).
//
// In a multi-stream table (a syncer given a stream identifier) the pass works on that
// stream's leases only, keyed "<stream identifier>:<shard id>" with the streamName and
// shardId attributes (leases/stream_identifier.h); the lineage rules see them by shard id,
// exactly as a one-stream table's. A one-stream syncer refuses a table holding multi-stream
// leases and a multi-stream one a table holding one-stream leases (kFailedPrecondition,
// naming one; nothing is written): each would take the other's leases for those of shards
// that are gone.
//
// Every worker runs it at start and periodically, possibly at the same moment as others:
// all decisions depend only on the listing and the table, creation is create-if-absent,
// and deletion removes only leases in a terminal state (finished with every child started,
// or trimmed and not needed by any child), so concurrent passes converge to the same table
// and never create a lease twice. A pass that sees a table a concurrent pass has half
// filled takes the same decisions as one that saw it empty (see lineage.h).
//
// Errors (the pass stops at the first one; a later pass continues from what is in the
// table): listing: kNotFound "stream ... does not exist", kUnavailable (throttled: retry at
// the next interval), others as KinesisClient reports them; store: as LeaseStore reports.
//
// Metrics (MetricsSink counts, emitted when non-zero): "shardsync.leases_created",
// "shardsync.leases_deleted", "shardsync.child_ids_updated"; and "shardsync.failures"
// (1 per failed pass, tagged stage = list_shards|list_leases|create|child_ids|delete).
//
// Thread safety: sync_once may be called from several threads at once (it keeps no state
// between passes) provided the shard lister may; the one made by kinesis_shard_lister may.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kcl/initial_position.h"
#include "kcl/metrics.h"
#include "kcl/status.h"
#include "kinesis/kinesis_client.h"
#include "kinesis/kinesis_types.h"
#include "leases/lease_store.h"

namespace kcl::shardsync {

// Lists every shard of the stream (all pages), open and closed.
using ShardLister = std::function<Result<std::vector<kinesis::Shard>>()>;

// A lister calling KinesisClient::list_shards(stream) with no filter (closed shards
// included: lineage needs them). kNotFound becomes "stream \"<name>\" does not exist".
// `client` must outlive the lister.
ShardLister kinesis_shard_lister(kinesis::KinesisClient& client, std::string stream_name);

// kFailedPrecondition naming a lease of the other kind when `all` holds one: a one-stream
// lease where `multi_stream`, a multi-stream one otherwise; OK when every lease is of the kind.
Status check_lease_table_kind(const std::vector<Lease>& all, bool multi_stream);

struct SyncResult {
  std::size_t shards = 0;             // shards listed
  std::size_t leases = 0;             // leases in the table before this pass
  std::size_t leases_created = 0;     // created by this pass
  std::size_t already_existed = 0;    // creations another worker did first (kAlreadyExists)
  std::size_t child_ids_updated = 0;  // childShardIds writes
  std::size_t leases_deleted = 0;     // deleted by this pass
  bool operator==(const SyncResult&) const = default;
};

class ShardSyncer {
 public:
  // `store` and `metrics` must outlive the syncer.
  // `stream_identifier`: the stream's identifier in a multi-stream table; empty for a
  // one-stream table.
  ShardSyncer(ShardLister lister, leases::LeaseStore& store, InitialPosition initial_position,
              MetricsSink& metrics = NoopMetricsSink::instance(),
              std::string stream_identifier = {});

  // Convenience: lists with kinesis_shard_lister(client, stream_name); `client` must outlive
  // the syncer.
  static ShardSyncer for_stream(kinesis::KinesisClient& client, std::string stream_name,
                                leases::LeaseStore& store, InitialPosition initial_position,
                                MetricsSink& metrics = NoopMetricsSink::instance());

  // One pass, as described above. Idempotent: a second pass over an unchanged stream and
  // table writes nothing. `leases`, when given, is the lease table as listed before (by the
  // caller, once for several streams' passes: each pass then costs no scan of its own); the
  // listing of shards still comes after it, and a pass that finds a lease to create reads
  // the table afresh first (a lease created and deleted since the caller's listing must not
  // be created again).
  Result<SyncResult> sync_once(const std::vector<Lease>* leases = nullptr);

  const InitialPosition& initial_position() const { return initial_position_; }

 private:
  // This stream's leases of `all`, keyed by shard id; kFailedPrecondition when the table
  // holds leases of the other kind (see above).
  Result<std::vector<Lease>> own_leases(const std::vector<Lease>& all) const;
  // The lease key of `shard_id` in the table.
  std::string stored_key(const std::string& shard_id) const;
  Status create_missing(const std::vector<kinesis::Shard>& shards, std::vector<Lease>& view,
                        SyncResult& result);
  Status update_child_ids(const std::vector<kinesis::Shard>& shards,
                          const std::vector<Lease>& existing,
                          const std::vector<std::string>& to_delete, SyncResult& result);
  Status delete_unneeded(const std::vector<std::string>& to_delete, SyncResult& result);
  void report(const SyncResult& result);
  ShardLister lister_;
  leases::LeaseStore* store_;
  InitialPosition initial_position_;
  MetricsSink* metrics_;
  std::string stream_identifier_;
};

}  // namespace kcl::shardsync
