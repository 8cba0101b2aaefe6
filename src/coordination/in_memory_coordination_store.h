// InMemoryCoordinationStore: a CoordinationStore in a map, with the DynamoDB store's
// conditions, plus operation counts (items read, writes) for the simulation and fault
// injection for tests.
//
// Thread safety: all methods may be called from many threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "coordination/coordination_store.h"

namespace kcl::coordination {

struct CoordinationStoreStats {
  std::int64_t reads = 0;           // read calls (read_all, read_leader)
  std::int64_t eventual_reads = 0;  // of which eventually consistent
  std::int64_t items_read = 0;      // entries those reads returned
  // What DynamoDB would bill, from each entry's size as the DynamoDB store writes it (names
  // and values): a GetItem 1 read unit per 4 KB of its entry, a scan per 4 KB of its entries
  // together, half of that eventually consistent; a write 1 write unit per KB of the entry
  // written (a heartbeat), 1 for the others.
  double read_units = 0;
  double write_units = 0;
  std::int64_t writes = 0;  // every write call, whatever the outcome
  std::int64_t heartbeats = 0;
  std::int64_t leader_writes = 0;  // acquire / renew / release
  std::int64_t fences = 0;
  std::int64_t failed_conditions = 0;
};

class InMemoryCoordinationStore final : public CoordinationStore {
 public:
  Status create_table_if_not_exists() override { return Status::Ok(); }
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

  // --- tests and simulations ---
  CoordinationStoreStats stats() const;
  void reset_stats();
  // The next `calls` calls fail with `code` (before anything is applied).
  void fail_next(int calls, StatusCode code = StatusCode::kUnavailable);
  // Calls for this worker id fail with kUnavailable while set (a partitioned worker).
  void set_partitioned(std::string_view worker_id, bool partitioned);
  std::optional<WorkerEntry> peek_worker(std::string_view worker_id) const;
  std::optional<LeaderEntry> peek_leader() const;

 private:
  Result<LeaderEntry> renew_lock(const LeaderEntry& held, bool attention);
  Status fault_locked(std::string_view worker_id);
  void count_read_locked(Consistency consistency, std::int64_t items, double units);
  void count_write_locked(double units);
  Status condition_failed(std::string_view what);
  std::map<std::string, WorkerEntry, std::less<>>::iterator find_incarnation_locked(
      const WorkerEntry& entry);

  mutable std::mutex mu_;
  std::map<std::string, WorkerEntry, std::less<>> workers_;
  std::optional<LeaderEntry> leader_;
  CoordinationStoreStats stats_;
  int fail_calls_ = 0;
  StatusCode fail_code_ = StatusCode::kUnavailable;
  std::map<std::string, bool, std::less<>> partitioned_;
};

}  // namespace kcl::coordination
