#include "shardsync/shard_syncer.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <utility>

#include "base/status_macros.h"
#include "leases/stream_identifier.h"
#include "shardsync/lineage.h"

namespace kcl::shardsync {
namespace {

void count_if_any(MetricsSink& metrics, std::string_view name, std::size_t n) {
  if (n > 0) metrics.count(name, static_cast<double>(n), {});
}

}  // namespace

ShardLister kinesis_shard_lister(kinesis::KinesisClient& client, std::string stream_name) {
  return [&client, stream = std::move(stream_name)]() -> Result<std::vector<kinesis::Shard>> {
    auto shards = client.list_shards(stream);
    if (shards.ok()) return shards;
    const Status& s = shards.status();
    if (s.code() == StatusCode::kNotFound) {
      std::string message = "stream \"" + stream + "\" does not exist";
      if (!s.message().empty()) message += " (" + s.message() + ")";
      return s.aws() ? Status(s.code(), std::move(message), *s.aws())
                     : Status(s.code(), std::move(message));
    }
    return s.with_context("listing the shards of stream \"" + stream + "\": ");
  };
}

ShardSyncer::ShardSyncer(ShardLister lister, leases::LeaseStore& store,
                         InitialPosition initial_position, MetricsSink& metrics,
                         std::string stream_identifier)
    : lister_(std::move(lister)),
      store_(&store),
      initial_position_(initial_position),
      metrics_(&metrics),
      stream_identifier_(std::move(stream_identifier)) {}

ShardSyncer ShardSyncer::for_stream(kinesis::KinesisClient& client, std::string stream_name,
                                    leases::LeaseStore& store, InitialPosition initial_position,
                                    MetricsSink& metrics) {
  return ShardSyncer(kinesis_shard_lister(client, std::move(stream_name)), store, initial_position,
                     metrics);
}

// 3. Missing leases, parents first. Stops at the first real failure: creating a child while
// its parent's creation failed would make the parent look finished (rule 1 of
// leases_to_create) and it would never be read. `view` gains what was created.
Status ShardSyncer::create_missing(const std::vector<kinesis::Shard>& shards,
                                   std::vector<Lease>& view, SyncResult& result) {
  for (Lease& lease : leases_to_create(shards, view, initial_position_)) {
    Lease stored = lease;
    if (!stream_identifier_.empty()) {
      stored.lease_key = stored_key(lease.lease_key);
      stored.stream_identifier = stream_identifier_;
      stored.shard_id = lease.lease_key;
    }
    Status s = store_->create_lease_if_not_exists(stored);
    if (s.code() == StatusCode::kAlreadyExists) {
      // Another worker's pass created it first (with the same content, by the same rules).
      ++result.already_existed;
    } else if (!s.ok()) {
      return s.with_context("creating lease " + stored.lease_key + ": ");
    } else {
      ++result.leases_created;
    }
    view.push_back(std::move(lease));
  }
  return Status::Ok();
}

// 4. childShardIds of closed shards (not on leases about to be deleted).
Status ShardSyncer::update_child_ids(const std::vector<kinesis::Shard>& shards,
                                     const std::vector<Lease>& existing,
                                     const std::vector<std::string>& to_delete,
                                     SyncResult& result) {
  for (const ChildIdsUpdate& update : child_shard_id_updates(shards, existing)) {
    if (std::binary_search(to_delete.begin(), to_delete.end(), update.lease_key)) continue;
    const std::string key = stored_key(update.lease_key);
    Status s = store_->update_child_shard_ids(key, update.child_shard_ids);
    if (s.code() == StatusCode::kNotFound) continue;  // deleted meanwhile by another pass
    if (!s.ok()) return s.with_context("setting childShardIds of lease " + key + ": ");
    ++result.child_ids_updated;
  }
  return Status::Ok();
}

// 5. Leases nobody needs any more. Each is in a terminal state (see leases_to_delete), so
// deciding from the scan is safe even if the table moved on since: checkpoints only move
// forward, and a child that started stays started.
Status ShardSyncer::delete_unneeded(const std::vector<std::string>& to_delete, SyncResult& result) {
  for (const std::string& shard : to_delete) {
    const std::string key = stored_key(shard);
    Status s = store_->delete_lease(key);
    if (!s.ok()) return s.with_context("deleting lease " + key + ": ");
    ++result.leases_deleted;
  }
  return Status::Ok();
}

void ShardSyncer::report(const SyncResult& result) {
  count_if_any(*metrics_, "shardsync.leases_created", result.leases_created);
  count_if_any(*metrics_, "shardsync.child_ids_updated", result.child_ids_updated);
  count_if_any(*metrics_, "shardsync.leases_deleted", result.leases_deleted);
}

// A one-stream syncer in a multi-stream table (keys "<account>:<stream>:<epoch>:<shard>")
// would create a second set of leases and delete the others as those of shards gone, and a
// multi-stream syncer in a one-stream table the same the other way round. Shard ids never
// hold a ':'.
Status check_lease_table_kind(const std::vector<Lease>& all, bool multi_stream) {
  for (const Lease& l : all) {
    const bool multi_lease = !leases::lease_stream_identifier(l).empty();
    if (multi_lease == multi_stream) continue;
    return Status(StatusCode::kFailedPrecondition,
                  multi_stream
                      ? "the lease table holds the one-stream lease " + l.lease_key +
                            ", but this worker reads several streams through it; it changes "
                            "nothing in this table. Use another application name "
                            "(LeaseConfig::table_name) for a multi-stream application"
                      : "the lease table holds the multi-stream lease " + l.lease_key +
                            " (the Java KCL's <account>:<stream>:<epoch>:<shard> keys), but "
                            "this worker reads one stream through it; it changes nothing in "
                            "this table. Configure the worker with its streams "
                            "(WorkerConfig::streams), or use another application name");
  }
  return Status::Ok();
}

Result<std::vector<Lease>> ShardSyncer::own_leases(const std::vector<Lease>& all) const {
  KCL_RETURN_IF_ERROR(check_lease_table_kind(all, !stream_identifier_.empty()));
  std::vector<Lease> own;
  own.reserve(all.size());
  for (const Lease& l : all) {
    if (leases::lease_stream_identifier(l) != stream_identifier_) continue;
    Lease view = l;
    view.lease_key = std::string(leases::lease_shard_id(l));
    own.push_back(std::move(view));
  }
  return own;
}

std::string ShardSyncer::stored_key(const std::string& shard_id) const {
  return stream_identifier_.empty() ? shard_id
                                    : leases::multi_stream_lease_key(stream_identifier_, shard_id);
}

Result<SyncResult> ShardSyncer::sync_once(const std::vector<Lease>* leases) {
  SyncResult result;
  // Counts are reported whether or not the pass completes (what was written, was written).
  auto fail = [&](std::string_view stage, Status status) -> Result<SyncResult> {
    report(result);
    const MetricTag tags[] = {{"stage", stage}};
    metrics_->count("shardsync.failures", 1, tags);
    return status.with_context("shard sync: ");
  };
  // 1. Leases, then 2. shards: in this order the listing is at least as new as every lease
  // read, so a lease whose shard is not listed was trimmed, not created by another worker
  // from a listing newer than ours (leases_to_delete guards against that too).
  Result<std::vector<Lease>> leased =
      leases != nullptr ? Result<std::vector<Lease>>(*leases) : store_->list_leases();
  if (!leased.ok()) return fail("list_leases", leased.status().with_context("listing leases: "));
  auto own = own_leases(*leased);
  if (!own.ok()) return fail("list_leases", own.status());
  std::vector<Lease> existing = std::move(own).value();
  auto listed = lister_();
  if (!listed.ok()) return fail("list_shards", listed.status());
  const std::vector<kinesis::Shard>& shards = *listed;
  result.shards = shards.size();
  // A listing of the leases the caller read earlier may miss a lease created and deleted
  // since (a shard read to its end and cleaned up once its children started): from it, that
  // shard would get a lease again and be read again, after its children. Before creating
  // anything (a reshard: rare) the table is read afresh.
  if (leases != nullptr && !leases_to_create(shards, existing, initial_position_).empty()) {
    auto fresh = store_->list_leases();
    if (!fresh.ok()) return fail("list_leases", fresh.status().with_context("listing leases: "));
    auto fresh_own = own_leases(*fresh);
    if (!fresh_own.ok()) return fail("list_leases", fresh_own.status());
    existing = std::move(fresh_own).value();
  }
  result.leases = existing.size();
  std::vector<Lease> view = existing;
  if (Status s = create_missing(shards, view, result); !s.ok()) return fail("create", s);
  // The listing is complete when it was read to the last page; an empty listing is never
  // trusted to mean "every shard is gone".
  const std::vector<std::string> to_delete = leases_to_delete(shards, view, !shards.empty());
  if (Status s = update_child_ids(shards, existing, to_delete, result); !s.ok()) {
    return fail("child_ids", s);
  }
  if (Status s = delete_unneeded(to_delete, result); !s.ok()) return fail("delete", s);
  report(result);
  return result;
}

}  // namespace kcl::shardsync
