// A deterministic simulation of many workers sharing one lease table, for planning scale and
// for testing balance: N workers (each its HeldLeases and strategy, with its own clock
// offsets) over an InMemoryLeaseStore holding M leases, with joins, crashes, graceful leaves
// and pauses, on a fake clock. It runs the real lease code in either mode
// (LeaseConfig::assignment):
//  - kWorkerTakes: each worker runs its take pass every take_interval and its renew pass every
//    renew_interval (each jittered by interval_jitter), as WorkerTakesAssignment does;
//  - kLeader: each worker runs AssignmentAgent's heartbeat, poll and leader steps when they
//    ask to run, as LeaderAssignment does, over an InMemoryCoordinationStore; a worker asked
//    to hand a lease off completes the handoff at its next poll (as if its processor
//    checkpointed at once).
//
// It reports, per phase (the start and each event): the time until the split is balanced
// (every lease owned by a running worker, most - least <= 1), the leases that changed hands
// before and after that (after balance must be 0: no thrash), and for the run the DynamoDB
// operations (counted by the store) per shard per minute.
//
// It also checks the safety invariant: when a worker takes an expired lease, its previous
// owner (if still running or paused) no longer believes it holds it.
//
// Thread safety: run_lease_simulation is a pure function of its options; it may be run from
// several threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "coordination/in_memory_coordination_store.h"
#include "kcl/clock.h"
#include "kcl/lease_config.h"
#include "kcl/status.h"
#include "leases/in_memory_lease_store.h"

namespace kcl::leases {

using coordination::CoordinationStoreStats;

// A clock that reads another clock plus fixed offsets: gives each simulated worker its own
// monotonic epoch and its own (skewed) wall clock.
class OffsetClock final : public Clock {
 public:
  OffsetClock(const Clock& base, std::chrono::nanoseconds mono_offset,
              std::chrono::nanoseconds wall_offset)
      : base_(base), mono_offset_(mono_offset), wall_offset_(wall_offset) {}
  MonoTime now() const override { return base_.now() + mono_offset_; }
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  MonoTime deadline, const std::function<bool()>& done) const override {
    return base_.wait_until(lock, cv, deadline - mono_offset_, done);
  }
  WallTime wall_now() const override {
    return base_.wall_now() + std::chrono::duration_cast<WallTime::duration>(wall_offset_);
  }

 private:
  const Clock& base_;
  std::chrono::nanoseconds mono_offset_;
  std::chrono::nanoseconds wall_offset_;
};

struct SimulationEvent {
  enum class Kind {
    kJoin,   // `count` new workers start (first take pass at once)
    kCrash,  // `count` random running workers stop dead (their leases expire)
    kLeave,  // `count` random running workers shut down gracefully (release_all)
    kPause,  // one random running worker stops for `pause_for`, then carries on
  };
  std::chrono::milliseconds at{0};
  Kind kind = Kind::kJoin;
  int count = 1;
  std::chrono::milliseconds pause_for{0};
};

struct SimulationOptions {
  int workers = 3;  // started at time 0 (spread over start_spread)
  int shards = 10;  // leases in the table, all free at the start
  // Lease settings of every worker; application_name and worker_id are filled in.
  LeaseConfig lease;
  // The initial workers start at uniformly random times in [0, start_spread). Default 0 =
  // one take interval.
  std::chrono::milliseconds start_spread{0};
  std::vector<SimulationEvent> events;
  std::chrono::milliseconds duration{std::chrono::minutes(10)};
  std::uint64_t seed = 1;
  // Traffic per shard in KB/s (by shard index; missing or empty: none). With kLeader, each
  // worker's coordinator is told the bytes its held leases process, as shard consumers do,
  // so the leader can balance by load.
  std::vector<double> shard_kbps;
};

struct SimulationPhase {
  std::string label;  // e.g. "start 3 workers", "crash 1", "join 2"
  std::chrono::milliseconds started{0};
  int running_workers = 0;  // when the phase started
  // From the start of the phase until balanced; empty if it never balanced before the next
  // phase (or the end).
  std::optional<std::chrono::milliseconds> time_to_balance;
  std::int64_t takes_of_free = 0;        // free leases taken (unowned, or handed back)
  std::int64_t takes_of_expired = 0;     // expired leases taken from another worker
  std::int64_t steals = 0;               // leases stolen for balance
  std::int64_t moves_after_balance = 0;  // any owner change after balance (thrash): want 0
  // kLeader: leader passes that assigned or handed off leases before the phase balanced.
  std::int64_t assignment_passes = 0;
  std::int64_t handoffs = 0;  // kLeader: graceful handoffs completed in the phase
  int min_held = 0;           // at the end of the phase, over running workers
  int max_held = 0;
  // With shard_kbps: the most and the least loaded running worker's load over the mean, at
  // the end.
  double max_load_over_mean = 0;
  double min_load_over_mean = 0;

  // time_to_balance in take intervals (rounded up).
  std::optional<double> passes_to_balance(std::chrono::milliseconds take_interval) const;
};

struct SimulationReport {
  LeaseAssignment assignment = LeaseAssignment::kLeader;
  int shards = 0;
  int peak_workers = 0;
  std::chrono::milliseconds take_interval{0};
  std::chrono::milliseconds renew_interval{0};
  std::chrono::milliseconds failover_time{0};
  std::chrono::milliseconds simulated{0};
  std::vector<SimulationPhase> phases;
  LeaseStoreStats stats;                // whole run
  LeaseStoreStats steady_stats;         // from the last balance to the end (balanced, no events)
  CoordinationStoreStats coordination;  // kLeader: the coordination table, whole run
  CoordinationStoreStats steady_coordination;  // kLeader: from the last balance to the end
  std::chrono::milliseconds steady_duration{0};
  // Expired leases taken while their previous owner still believed it held them: must be 0.
  std::int64_t invariant_violations = 0;
  // Leases whose owner in the table differs from the simulation's bookkeeping at the end:
  // must be 0.
  std::int64_t bookkeeping_mismatches = 0;

  bool all_phases_balanced() const;
  std::int64_t total_moves_after_balance() const;
  // Per shard per minute, over `stats` and `over`.
  static double per_shard_minute(std::int64_t count, int shards, std::chrono::milliseconds over);
  // Items read (both tables) and writes (both tables) in the steady state, per shard per
  // minute.
  double steady_items_read_per_shard_minute() const;
  double steady_writes_per_shard_minute() const;
  std::string to_text() const;
};

// Errors: kInvalidArgument when the options are inconsistent (e.g. no workers and no joins,
// an invalid lease configuration).
Result<SimulationReport> run_lease_simulation(const SimulationOptions& options);

}  // namespace kcl::leases
