// CoordinationStore: the small table beside the lease table that leader-based assignment
// needs (LeaseAssignment::kLeader): one entry per running worker (its membership: a heartbeat
// counter and what it reports) and one leader entry (the leader lock). Workers learn their
// leases from the lease table, never from this one. An `inbox` attribute that earlier versions
// wrote into worker entries is ignored.
// Two implementations with identical semantics: DynamoDbCoordinationStore (a DynamoDB table,
// by default "<lease table>-CoordinatorState", hash key "key" (S)) and
// InMemoryCoordinationStore (deterministic tests and the simulation).
//
// Liveness works as for leases, without trusting clocks: an entry's counter (a worker's
// heartbeat, the leader's leaderCounter) is bumped by its holder with a write conditional on
// the value it holds; an observer that sees a counter unchanged for failover_time on its own
// monotonic clock may fence the holder with a write conditional on that value. See
// membership.h for the safety argument.
//
// Results as for LeaseStore: kConditionFailed when a condition did not hold (re-read and
// decide), kUnavailable when the outcome is unknown (throttled, timeout), kNotFound when the
// table is missing.
//
// Thread safety: implementations are safe to call from many threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/status.h"

namespace kcl::coordination {

// A running worker, as its entry holds it.
struct WorkerEntry {
  std::string worker_id;
  // Random per registration: a worker that lost its membership registers again as a new
  // incarnation, so writes meant for the old one (a heartbeat, a fence) cannot land on the
  // new one.
  std::string incarnation;
  std::int64_t heartbeat = 0;    // bumped by the worker every renew interval
  std::int64_t lease_count = 0;  // leases it held at its last heartbeat
  bool draining = false;         // shutting down: the leader assigns it nothing more
  // Where the worker serves its status endpoint ("http://HOST:PORT"), for the fleet view of
  // the other workers; written once at registration (never by a heartbeat); empty: none.
  std::string status_url;
  // Lease key -> KB/s processed recently, for balancing by load (one decimal).
  std::map<std::string, double> lease_kbps;
  bool operator==(const WorkerEntry&) const = default;
};

// The leader lock.
struct LeaderEntry {
  std::optional<std::string> owner;  // absent when no worker leads
  // The owner's membership incarnation: a leader's membership ends with its lock (see
  // membership.h), so the next leader fences exactly that incarnation at once.
  std::string owner_incarnation;
  std::int64_t counter = 0;  // bumped by every write of the lock
  // Bumped by any worker that changed the set of leases (created or deleted some), so the
  // leader reads the lease table again without waiting for its periodic scan.
  std::int64_t leases_version = 0;
  // Bumped by the leader when something is about to move (a worker joined, one has missed a
  // heartbeat and may be fenced, a lease of a worker moved): idle workers read the lock alone,
  // and one that sees this move finds its leases in the lease table and polls the lock at
  // poll_interval for a failover time.
  std::int64_t attention = 0;
  bool operator==(const LeaderEntry&) const = default;
};

struct CoordinationView {
  std::optional<LeaderEntry> leader;
  std::vector<WorkerEntry> workers;  // sorted by worker id
};

// How a read sees the table. A strongly consistent read costs DynamoDB twice an eventually
// consistent one (1 read unit per 4 KB against 0.5), and may be stale by a moment. Every write
// of this store is conditional on what its caller read, and every liveness judgement waits for
// a value to stay unchanged for failover_time from when it was first seen, so a stale read
// can delay a judgement or make a conditional write fail, never make one land that should not
// (membership.h). Reads that would act on an absence (a known worker's entry missing) confirm
// it with a strongly consistent read first.
enum class Consistency { kStrong, kEventual };

class CoordinationStore {
 public:
  virtual ~CoordinationStore() = default;

  // Creates the table if it does not exist and waits until it is ACTIVE; a table with
  // another key schema is kFailedPrecondition.
  virtual Status create_table_if_not_exists() = 0;

  // The leader entry and every worker entry (one read of the whole table).
  virtual Result<CoordinationView> read_all(Consistency consistency) = 0;
  // The leader entry alone (empty when there is none).
  virtual Result<std::optional<LeaderEntry>> read_leader(Consistency consistency) = 0;

  // Writes the entry of a new incarnation of `entry.worker_id` (heartbeat 0, lease_count and
  // status_url from `entry`), replacing any earlier entry of that id. kConditionFailed when
  // the entry already is this incarnation's: an earlier attempt whose answer was lost landed
  // (and may have been heartbeated since, which a second write would move back).
  virtual Result<WorkerEntry> register_worker(const WorkerEntry& entry) = 0;
  // heartbeat + 1 (an atomic increment), and leaseCount, draining and leaseKbps from
  // `report` (its lease_count, draining and lease_kbps), conditional on
  // the incarnation of `held` only: a heartbeat whose answer was lost (it may have landed)
  // does not make the next one fail, and every heartbeat that lands moves the value, which
  // is what fence_worker() is conditional on.
  // Returns the entry as written.
  virtual Result<WorkerEntry> heartbeat(const WorkerEntry& held, const WorkerEntry& report) = 0;
  // Removes the entry of a worker found silent, conditional on the incarnation and heartbeat
  // `seen`: after it, that incarnation can never renew its membership again.
  virtual Status fence_worker(const WorkerEntry& seen) = 0;
  // Removes this worker's own entry (graceful leave), conditional on its incarnation.
  virtual Status deregister_worker(const WorkerEntry& held) = 0;

  // Takes the leader lock: conditional on the entry being as `seen` (counter and owner), or
  // absent when `seen` is empty. Bumps the counter.
  virtual Result<LeaderEntry> acquire_leadership(const std::optional<LeaderEntry>& seen,
                                                 std::string_view worker_id,
                                                 std::string_view incarnation) = 0;
  // counter + 1 (an atomic increment), conditional on the owner and owner incarnation of
  // `held` only, for the same reason as heartbeat(): a worker taking the lock over writes
  // its own name, so a renewal of the old holder can never land after that.
  virtual Result<LeaderEntry> renew_leadership(const LeaderEntry& held) = 0;
  // As renew_leadership, and attention + 1 (LeaderEntry::attention).
  virtual Result<LeaderEntry> call_attention(const LeaderEntry& held) = 0;
  // Removes the owner (counter + 1), conditional on the counter and owner of `held`, so
  // another worker may lead at once.
  virtual Status release_leadership(const LeaderEntry& held) = 0;
  // leasesVersion + 1 (creating the leader entry if needed); never conditional.
  virtual Status note_leases_changed() = 0;
};

}  // namespace kcl::coordination
