// LeaseTaker: the take pass of worker-takes (LeaseAssignment::kWorkerTakes, the Java KCL
// 2.x's way of sharing leases), an explicit pass over the held-lease core, so that tests and
// the simulation run it deterministically on a ManualClock (WorkerTakesAssignment runs it on
// real time, beside the renew pass of lease_renewer.h). run_take_pass() lists the lease
// table; notes, on this worker's monotonic clock, when each lease's counter was last seen to
// change; takes free and expired leases (random order) up to this worker's share, else steals
// from the most loaded worker.
//
// Liveness without trusting clocks. A lease is expired for this worker when its
// leaseCounter has not changed for failover_time since this worker first saw the current
// value (the time is taken from this worker's Clock::now() when the scan returned). A lease
// seen for the first time counts as just changed. Wall clocks are never read.
//
// Safety argument (why the holder stops before a new owner starts). Let R be the last
// renewal (or checkpoint) of the holder that reached the table before a taker's scan. The
// taker saw the current counter no earlier than R landed, and takes no earlier than
// failover_time after that, conditional on that counter (so only if nothing landed since).
// The holder's hold (RenewalHold, worker_takes_assignment.h) ends failover_time -
// lost_lease_margin after the *start* of its last successful write, which was before it
// landed: strictly before the taker may take. Writes that failed, or whose outcome is unknown
// (timeouts), never extend the hold. Both sides measure intervals on their own monotonic
// clocks; only their rates must agree (to well within the margin).
//
// Balance. Target = ceil(leases / workers) capped by max_leases_per_worker, where workers =
// this worker plus every other owner of an unexpired lease (as the Java KCL 2.x). Free and
// expired leases are taken first, at most max(take_ramp_floor, held) per pass (see
// LeaseConfig::take_ramp_floor). Only when none is free or expired does it steal, from the
// most loaded worker (random among equals), as the Java KCL: min(needed, its excess over the
// target) leases, or 1 when this worker needs more than one and that worker is at the target,
// never more than max_leases_to_steal_at_once. The state in which no worker takes anything is
// exactly most - least <= 1, so once balanced no lease moves. A steal re-reads the lease
// (consistent read) and is conditional on that counter, so a lease renewed since the scan is
// not stolen with stale data.
//
// Metrics: "leases.taken", "leases.stolen" counts; "leases.failed_conditions" tagged
// operation = take|steal.
//
// Thread safety: all methods may be called from any thread. Take passes run one at a time
// (a second caller waits); a renew pass and checkpoint writes may run beside one.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "kcl/clock.h"
#include "kcl/lease.h"
#include "kcl/lease_config.h"
#include "kcl/metrics.h"
#include "kcl/status.h"
#include "leases/held_leases.h"
#include "leases/lease_store.h"

namespace kcl::assignment {

// A lease (not ended) owned by another worker whose counter has not moved for the failover
// time: no live worker holds it, unless some worker takes it.
struct OrphanedLease {
  std::string lease_key;
  std::string owner;
  Clock::MonoTime since;  // when this worker last saw its counter change
};

struct TakePassResult {
  Status status;                        // failure of the scan, or the first write failure
  int leases_seen = 0;                  // leases in the table
  int workers_seen = 0;                 // workers counted for the target (including this one)
  int target = 0;                       // this worker's share
  int held_before = 0;                  // leases held when the pass started
  int available = 0;                    // free or expired leases seen
  std::vector<std::string> taken;       // free or expired leases taken
  std::vector<std::string> stolen;      // leases taken from another live worker
  std::vector<OrphanedLease> orphaned;  // expired leases of others this pass did not take
  int failed_conditions = 0;            // takes that lost a race
  // Leases not ended that no live worker holds after the pass (free, or expired, and not
  // taken by it): the gauge kcl_leases_unheld.
  int unheld = 0;
  // The pass stopped below the target because of the start-up ramp. Informational: do not
  // pass again early because of it. The ramp works by giving workers that start at about the
  // same time one take interval to become visible (by owning leases) before anyone takes
  // more; an early follow-up lets the first worker take nearly everything again (the
  // simulation shows 10 workers x 100 shards then needing ~10 passes and 50 steals to balance
  // instead of 1 pass and none).
  bool limited_by_ramp = false;
  // When the earliest "suspect" lease expires: one owned by another worker whose counter has
  // not moved for more than 1.5 renew intervals (its owner missed a renewal) but that is not
  // expired yet. A runner that passes again at that time (rather than a full take interval
  // later) takes a crashed worker's leases within failover_time + take_interval of the crash.
  // Empty when no lease is suspect (the steady state: no extra scans).
  std::optional<Clock::MonoTime> next_expiry;
};

class LeaseTaker {
 public:
  // Everything given must outlive the taker. `seed` drives the random choices.
  LeaseTaker(leases::HeldLeases& held, leases::LeaseStore& store, const LeaseConfig& config,
             const Clock& clock, MetricsSink& metrics, std::uint64_t seed);

  TakePassResult run_take_pass();
  // No more take passes (they return at once); waits for a pass in progress to end, so a
  // lease it takes is in the held set afterwards (and handed back with the rest).
  void stop_taking();
  bool taking_stopped() const { return stopped_.load(); }

 private:
  // What this worker has seen of a lease in its scans.
  struct Observed {
    std::int64_t counter = 0;
    Clock::MonoTime changed_at;    // when this worker first saw `counter`
    std::uint64_t generation = 0;  // the take pass that last saw the lease
  };
  struct TakeView;
  void observe(const std::vector<Lease>& leases, TakeView& view);
  void drop_taken_elsewhere(const std::vector<Lease>& leases, TakeView& view);
  void classify(const std::vector<Lease>& leases, TakeView& view, TakePassResult& result);
  void take_available(TakeView& view, int needed, TakePassResult& result);
  void steal(const std::vector<Lease>& leases, const TakeView& view, int target, int needed,
             TakePassResult& result);
  bool try_take(const Lease& seen, bool steal, TakePassResult& result);
  // After a take that failed (its answer lost, or a retry of it refused by the condition it
  // had itself changed): the lease as the table holds it when the take landed after all (this
  // worker the owner, the counter one past `seen`), else nothing.
  std::optional<Lease> landed_take(const Lease& seen);

  leases::HeldLeases& held_;
  leases::LeaseStore& store_;
  const LeaseConfig config_;
  const Clock& clock_;
  MetricsSink& metrics_;
  std::atomic<bool> stopped_{false};

  std::mutex take_mu_;  // one take pass at a time; guards what follows
  std::unordered_map<std::string, Observed> observed_;
  std::uint64_t pass_generation_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace kcl::assignment
