// DynamoDbCoordinationStore: the coordination table in DynamoDB (see coordination_store.h).
//
// Table: LeaseConfig::coordinator_table_name when configured. Otherwise resolve_table() picks,
// in this order: "<lease table>-KclCppCoordinatorState" when it exists; "<lease
// table>-CoordinatorState" (the name the Java KCL 3.0-3.4 gives its coordinator state table,
// shared with it) when it exists; for a lease table in the Java KCL 3.5 single-table layout
// (the probe given says so), "<lease table>-KclCppCoordinatorState"; else "<lease
// table>-CoordinatorState". A Java KCL 3.5 application takes a "<app>-CoordinatorState" table
// for a 3.0-3.4 one that has not moved to the single table yet, so kcl-cpp never creates
// that name beside a single-table lease table; and workers that start together resolve the
// same name, since the lease table's entity items do not go away. Hash key "key" (S), the
// lease table's billing mode. Its entries are kcl-cpp's own (keys start with "kcl-cpp/"), so
// they never collide with the entries of the Java KCL 3.x:
//
//   key = "kcl-cpp/leader"            ownerName S (absent: nobody leads), ownerIncarnation S,
//                                     leaderCounter N, leasesVersion N
//   key = "kcl-cpp/worker/<id>"       workerId S, incarnation S, heartbeat N, leaseCount N,
//                                     draining BOOL (an inbox SS that earlier versions
//                                     wrote is ignored)
//
// Every conditional write is one PutItem / UpdateItem / DeleteItem with a ConditionExpression;
// reads are consistent. A malformed leader entry is kInternal naming the entry and the
// attribute. read_all() skips a worker entry whose identity (workerId, incarnation,
// heartbeat) cannot be read, and reads the rest of one whose other attributes cannot (left at
// their defaults); both are logged once per series, so one bad entry does not stop the fleet's
// leader. A role that may not describe "<lease table>-KclCppCoordinatorState" (the Java KCL
// 3.x's documented policy names only its own tables) resolves as if it did not exist.
//
// Thread safety: all methods may be called from many threads at once.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/unreadable_items.h"
#include "coordination/coordination_store.h"
#include "dynamodb/dynamodb_client.h"
#include "kcl/lease_config.h"

namespace kcl::coordination {

class DynamoDbCoordinationStore final : public CoordinationStore {
 public:
  // Whether the lease table is in the Java KCL 3.5 single-table layout.
  using LayoutProbe = std::function<Result<bool>()>;

  // `single_table_probe` may be empty: the lease table is taken as not single-table.
  // `logger` (may be null) hears of entries skipped as unreadable.
  DynamoDbCoordinationStore(std::shared_ptr<dynamodb::DynamoDbClient> client,
                            const LeaseConfig& config, LayoutProbe single_table_probe = {},
                            Logger* logger = nullptr);

  // Picks the table (see above) once; later calls return the first success. Called by
  // create_table_if_not_exists(); readers that create nothing (kcl leases) call it first.
  Status resolve_table();
  Status create_table_if_not_exists() override;
  Result<CoordinationView> read_all(Consistency consistency) override;
  Result<std::optional<LeaderEntry>> read_leader(Consistency consistency) override;
  Result<WorkerEntry> register_worker(const WorkerEntry& entry) override;
  Result<WorkerEntry> heartbeat(const WorkerEntry& held, const WorkerEntry& report) override;
  Status fence_worker(const WorkerEntry& seen) override;
  Status deregister_worker(const WorkerEntry& held) override;
  Result<LeaderEntry> acquire_leadership(const std::optional<LeaderEntry>& seen,
                                         std::string_view worker_id,
                                         std::string_view incarnation) override;
  Result<LeaderEntry> renew_leadership(const LeaderEntry& held) override;
  Result<LeaderEntry> call_attention(const LeaderEntry& held) override;
  Status release_leadership(const LeaderEntry& held) override;
  Status note_leases_changed() override;

  const std::string& table_name() const { return table_; }

 private:
  // A renewal of the lock held, with attention + 1 when `attention`.
  Result<LeaderEntry> renew_lock(const LeaderEntry& held, bool attention);
  Result<dynamodb::WriteResult> update(std::string_view what, const std::string& key,
                                       dynamodb::Expression update,
                                       const dynamodb::Expression& condition, bool return_new);

  std::shared_ptr<dynamodb::DynamoDbClient> client_;
  // Heartbeats and lock renewals: one attempt, a deadline well inside the renew interval,
  // so a stalled connection costs one attempt, not the membership.
  std::shared_ptr<dynamodb::DynamoDbClient> renew_client_;
  std::string table_;
  bool resolved_ = false;
  LeaseConfig config_;
  LayoutProbe single_table_probe_;
  Logger* logger_;
  base::UnreadableItems unreadable_{"a readable worker entry",
                                    "an entry without a readable identity counts as absent"};
};

}  // namespace kcl::coordination
