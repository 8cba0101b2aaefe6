// LeaseLeader: the leader's pass (LeaseAssignment::kLeader), run every leader_poll_interval
// by the agent, and by the simulation and tests on a ManualClock:
//  1. observe: reads every worker entry; times each worker's silence from the last change of
//     its (incarnation, heartbeat) this leader saw, on its own clock (an older heartbeat of
//     the same incarnation, a lagging replica, is no change; the leader writes nothing into
//     an entry but a fence); fences (a delete conditional on that value) every worker silent
//     for failover_time, and the previous leader named in the lock it took over;
//  2. scan: reads the lease table only when it must (a new term, a worker gone, a worker's
//     leasesVersion note, every lease_scan_interval);
//  3. plan (assignment_planner.h) and execute: orphans are assigned (take_lease for the new
//     owner), a live worker's excess handed off (initiate_handoff); a write whose answer was
//     lost is read again; a failed move waits for the next pass, and the pass stops when
//     the store fails (two moves in a row, or a write and the read after it);
//  4. calls the workers' attention (LeaderPassResult::attention) when a move concerns
//     another worker, one missed a heartbeat, or one joined; every worker finds its leases
//     by reading the table (LeaseAdopter::discover).
// While the membership keeps changing, free leases and rebalancing wait until it has not
// changed for settle_time (failover_time / 2 at most); leases of fenced workers and expired
// leases move at once. A lease whose owner is neither a registered worker nor fenced by this
// leader (worker-takes, the Java KCL, one fenced by an earlier leader) is taken once its
// leaseCounter has not moved for failover_time; one handed to a worker gone whose old owner
// never completes, once it has not moved for handoff_timeout + failover_time.
//
// Thread safety: one thread at a time runs begin/run_pass/end (the pass on the pass lane,
// the rest on the coordinator); the callbacks are called from run_pass's thread; stats()
// from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "assignment/assignment_planner.h"
#include "coordination/coordination_store.h"
#include "kcl/clock.h"
#include "kcl/lease.h"
#include "kcl/lease_config.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"
#include "leases/lease_store.h"

namespace kcl::assignment {

struct LeaderPassResult {
  Status status;          // the first failure (the pass stopped, or left a move to the next)
  int workers = 0;        // live workers seen
  int leases = 0;         // assignable leases (not at SHARD_END)
  bool scanned = false;   // the lease table was read
  int fenced = 0;         // workers fenced this pass
  int assigned = 0;       // leases assigned (free or orphaned)
  int handoffs = 0;       // graceful handoffs started
  bool balanced = false;  // the plan had nothing to move
  // A move of this pass concerns the leader itself: it looks at the table at once.
  bool moved_self = false;
  // Something is about to move that workers reading only the lock should hear of soon (a
  // worker joined, one missed a heartbeat, a lease of another worker moved): the leader
  // calls their attention (CoordinationStore::call_attention).
  bool attention = false;
};

struct LeaderStats {
  std::int64_t passes = 0;
  std::int64_t scans = 0;
  std::int64_t fenced = 0;
  std::int64_t assigned = 0;
  std::int64_t handoffs = 0;
};

class LeaseLeader {
 public:
  LeaseLeader(leases::LeaseStore& leases, coordination::CoordinationStore& coordination,
              const LeaseConfig& config, const Clock& clock, MetricsSink& metrics, Logger* logger);

  // Starts leading. `previous` is the lock entry as it was before this worker took it: when
  // it still named an owner (its lock lapsed), that incarnation is fenced.
  void begin(const std::optional<coordination::LeaderEntry>& previous);
  void end();
  bool active() const { return active_; }

  // Asked before a pass and before each write of one: a reason not to act as leader now
  // (its own renewals have not succeeded for too long, see AssignmentAgent), or nothing.
  using Authority = std::function<std::optional<std::string>()>;
  void set_authority(Authority authority) { authority_ = std::move(authority); }
  // What this worker's heartbeat would report now (lease count, loads, draining):
  // the leader does not write its own entry while it leads, so this stands in for it.
  using SelfReport = std::function<coordination::WorkerEntry()>;
  void set_self_report(SelfReport report) { self_report_ = std::move(report); }

  LeaderPassResult run_pass();
  // After a pass: whether the next should come soon (see the .cpp).
  bool wants_attention(const LeaderPassResult& r) const;
  // A new leader, until the membership first settles: it reads the membership every
  // settle_time / 4 meanwhile (a fleet starting, or one whose leader just changed).
  bool first_settling() const { return settling_.first; }
  // When the membership will count as settled if nothing changes meanwhile; empty when it is.
  std::optional<Clock::MonoTime> settles_at() const;
  // This worker's own registration (incarnation, when its write was answered): when the
  // leader first sees that entry, the membership changed then, not when it looked (a worker
  // that starts alone is settled settle_time after it registered).
  void note_own_registration(std::string incarnation, Clock::MonoTime at) {
    settling_.own_registration = std::make_pair(std::move(incarnation), at);
  }
  LeaderStats stats() const;

 private:
  struct Observed {
    coordination::WorkerEntry entry;
    // When this leader first saw its (incarnation, heartbeat) as it is: silence is timed from
    // here.
    Clock::MonoTime changed_at;
    // Its heartbeat is overdue and the workers' attention was called for it (once per value).
    bool suspected = false;
  };
  struct Unknown {  // an owner neither live nor fenced by this leader, or a receiver gone
    std::int64_t counter = 0;
    Clock::MonoTime since;
  };

  void log(LogLevel level, const std::string& message) const;

  // The steps of a pass (see the header).
  Status observe(LeaderPassResult& r, bool& changed);
  bool misses_a_known_worker(const coordination::CoordinationView& view) const;
  void note_entries(const coordination::CoordinationView& view, bool& changed);
  Status may_fence(const coordination::WorkerEntry& w,
                   const std::optional<coordination::LeaderEntry>& lock) const;
  Status fence_previous_leader(const std::optional<coordination::LeaderEntry>& lock,
                               LeaderPassResult& r, bool& changed);
  Status fence_silent(const std::optional<coordination::LeaderEntry>& lock, LeaderPassResult& r,
                      bool& changed);
  Status scan_if_due(LeaderPassResult& r);
  Status scan(LeaderPassResult& r);
  // Leases to place whatever their owner says; judges unknown owners (reads when due).
  std::vector<std::string> find_orphans(Status& status);
  bool judge_known(const Lease& lease, std::vector<std::string>& orphans, Status& status);
  bool judge_unknown(const Lease& lease, std::vector<std::string>& orphans, Status& status);
  Clock::MonoTime unmoved_since(const std::string& key, std::int64_t counter);
  bool settled();
  // What carrying out one move came to: done (or nothing to do), its write failed while the
  // store still answered (the lease waits for the next pass; the others go on), or the store
  // failed twice over (the write and the read after it: the pass stops).
  enum class MoveOutcome { kDone, kFailed, kStoreDown };
  void execute(const Plan& plan, bool rebalance, LeaderPassResult& r);
  MoveOutcome hand_off(const Move& move, const Lease& cached, LeaderPassResult& r);
  MoveOutcome assign(const Move& move, LeaderPassResult& r);
  // A move concerns `worker` (see the .cpp).
  void tell(const std::string& worker, LeaderPassResult& r);
  void finish_pass(const LeaderPassResult& r);
  LeaderPassResult end_failed_pass(LeaderPassResult& r);
  // Keeps `failure` in r.status unless an earlier one is there.
  static void note_failure(LeaderPassResult& r, Status failure);
  // A fresh read of `key` (kept in the cache); empty when the lease is gone.
  Result<std::optional<Lease>> reread(const std::string& key);

  leases::LeaseStore& leases_;
  coordination::CoordinationStore& coordination_;
  const LeaseConfig config_;
  const Clock& clock_;
  MetricsSink& metrics_;
  Logger* logger_;

  // Whether this worker may still act; a reason when not.
  Status authorised() const;

  Authority authority_;
  SelfReport self_report_;
  coordination::WorkerEntry self_report_taken_;
  std::optional<Clock::MonoTime> self_reported_at_;
  bool active_ = false;
  std::optional<std::pair<std::string, std::string>> fence_previous_;  // id, incarnation
  std::map<std::string, Observed> workers_;
  std::set<std::string> dead_;  // fenced by this leader, leases still to move
  std::map<std::string, Lease> cache_;
  std::map<std::string, Unknown> unknown_;
  // Leases this term assigned, with the counter the assigning take wrote: not handed off
  // until their owner's own take has moved it (hand_off()).
  std::map<std::string, std::int64_t> assigned_counter_;
  bool scan_needed_ = true;
  bool attention_due_ = false;  // LeaderPassResult::attention of this pass
  // When the membership changed and whether it has settled (settled()).
  struct Settling {
    std::optional<Clock::MonoTime> last_change;  // membership changed (join, leave, fence)
    std::optional<Clock::MonoTime> burst_start;  // first change not yet settled
    bool first = false;                          // a new term, not yet settled
    std::optional<Clock::MonoTime> changed_at;   // the latest change not yet settled()
    std::optional<std::pair<std::string, Clock::MonoTime>> own_registration;
  } settling_;
  std::optional<Clock::MonoTime> last_scan_;
  std::optional<std::int64_t> leases_version_;

  // Counted by the pass, read by stats() from any thread.
  struct Counts {
    std::atomic<std::int64_t> passes{0}, scans{0}, fenced{0}, assigned{0}, handoffs{0};
  } counts_;
};

}  // namespace kcl::assignment
