// LeaseCoordinator: one worker's lease taker and renewer.
//
// Driven by two explicit passes, so tests and simulations run it deterministically on a
// ManualClock; LeaseCoordinatorRunner (lease_coordinator_runner.h) calls them on real time.
//
//  run_take_pass()   lists the lease table; notes, on this worker's monotonic clock, when
//                    each lease's counter was last seen to change; takes free and expired
//                    leases (random order) up to this worker's share, else steals from the
//                    most loaded worker.
//  run_renew_pass()  gives up leases it has not renewed in time, then renews the others
//                    (one conditional increment each).
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
// The holder measures from the *start* of each of its successful writes, which is before it
// landed, and gives the lease up failover_time - lost_lease_margin after the start of its
// last successful one: strictly before the taker may take. Writes that failed, or whose
// outcome is unknown (timeouts), never extend the holder's deadline. Both sides measure
// intervals on their own monotonic clocks; only their rates must agree (to well within the
// margin).
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
// Fencing. Every write this worker makes to a held lease (renew, checkpoint, release) is
// conditional on the counter and owner it holds, and records the new counter on success.
// Writes to one lease are serialized (a per-lease mutex), so this worker's own renewal and
// checkpoint never race each other's condition. When a condition still fails, the lease is
// re-read: if it is still owned by this worker, the counter moved only by this worker's own
// writes whose result it did not see (a timeout after DynamoDB applied the write), so the
// stored lease (counter, checkpoint) is adopted and the write retried; otherwise the lease is lost,
// the lease-lost callback fires and the caller gets kLeaseLost naming the new owner.
//
// Leader-based assignment (LeaseConfig::assignment == kLeader). No take or renew passes run;
// instead (see assignment_agent.h, which drives these):
//  - Hold. Every held lease is held until the worker's membership basis (the start of its
//    last successful heartbeat, see membership.h) + failover_time - lost_lease_margin, so one
//    write per worker keeps all its leases. set_membership_basis(nullopt) gives them all up.
//  - Gain. look_at() reads the leases the leader posted to this worker: one assigned to it
//    (leaseOwner = this worker, no checkpointOwner) is adopted with take_lease (counter + 1,
//    conditional on what was read), which fences any earlier holder's writes; one handed to
//    it while the old owner still reads (checkpointOwner = that owner) waits in
//    poll_incoming_handoffs() until the old owner has removed checkpointOwner, or until
//    handoff_timeout, after which it is taken anyway.
//  - Hand off. A held lease whose checkpointOwner is this worker and whose leaseOwner is
//    another is to be handed off: the listener's on_handoff_requested fires (once); the
//    worker stops the shard's consumer gracefully (the processor checkpoints) and calls
//    complete_handoff(), which removes checkpointOwner (counter + 1, fenced like every write).
//    If the consumer has not stopped within handoff_timeout less a margin (two polls, at
//    least lost_lease_margin) of this worker learning of the handoff, the lease is given up
//    here (lost) before the receiver takes it anyway after handoff_timeout.
//    Checkpoints remain possible meanwhile: writes are fenced on both owner attributes, and
//    a condition that fails because the leader started a handoff re-reads the lease and
//    finds this worker still its checkpoint owner (the Java KCL 3.x's "actual owner").
//
// Metrics (MetricsSink): "leases.held" gauge; "leases.taken", "leases.stolen", "leases.lost",
// "leases.released" counts; "leases.renew_latency" timing (one successful renewal);
// "leases.failed_conditions" count tagged operation = take|steal|renew|checkpoint|release.
//
// Thread safety: all methods may be called from any thread. Take passes run one at a time
// (a second caller waits); a renew pass, checkpoint writes and a take pass may run at once.
// Listener callbacks run on the thread of the pass or write that noticed the change, with no
// lock of the coordinator held; they must be quick and must not block on this coordinator's
// passes.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kcl/clock.h"
#include "kcl/lease.h"
#include "kcl/lease_config.h"
#include "kcl/metrics.h"
#include "kcl/status.h"
#include "leases/lease_store.h"

namespace kcl::leases {

// Told when this worker gains or loses a lease.
class LeaseListener {
 public:
  virtual ~LeaseListener() = default;
  // This worker now holds `lease` (as written by the take). Start a shard consumer for it.
  // A lease can be gained again after it was lost (e.g. after a partition, when no one else
  // took it): the consumer of the earlier tenure may still be stopping.
  virtual void on_lease_gained(const Lease& lease) = 0;
  // This worker no longer holds the lease: stop its shard consumer now. `reason` says why
  // (kLeaseLost: taken by another worker, deleted, or not renewed in time). Not called for
  // release()/release_all(), which the caller asked for.
  virtual void on_lease_lost(const std::string& lease_key, const Status& reason) = 0;
  // kLeader: the leader asked this worker to hand `lease_key` to `new_owner`. Stop its shard
  // consumer gracefully (a final checkpoint), then call complete_handoff(lease_key).
  virtual void on_handoff_requested(const std::string& lease_key, const std::string& new_owner) {
    (void)lease_key;
    (void)new_owner;
  }
};

// What look_at() / poll_incoming_handoffs() did.
struct LookResult {
  Status status;                     // the first failure (the keys not handled are retried)
  std::vector<std::string> handled;  // keys looked at to the end (clear them from the inbox)
  std::vector<std::string> gained;
  std::vector<std::string> handoffs_requested;
  std::vector<std::string> lost;
  std::vector<std::string> forced;  // taken after handoff_timeout
};

struct TakePassResult {
  Status status;                    // failure of the scan, or the first write failure
  int leases_seen = 0;              // leases in the table
  int workers_seen = 0;             // workers counted for the target (including this one)
  int target = 0;                   // this worker's share
  int held_before = 0;              // leases held when the pass started
  int available = 0;                // free or expired leases seen
  std::vector<std::string> taken;   // free or expired leases taken
  std::vector<std::string> stolen;  // leases taken from another live worker
  int failed_conditions = 0;        // takes that lost a race
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

struct RenewPassResult {
  Status status;  // the first failure other than a lost lease
  int renewed = 0;
  int skipped = 0;                // written (checkpointed) recently: counted as renewed
  std::vector<std::string> lost;  // leases given up by this pass (callback fired)
  int failed = 0;                 // renewals that failed transiently (lease still held)
};

class LeaseCoordinator {
 public:
  // `config` must be valid (LeaseConfig::validate() empty). `store`, `clock` and `metrics`
  // must outlive the coordinator. `seed` drives the random choices (fixed in tests).
  LeaseCoordinator(LeaseStore& store, LeaseConfig config, const Clock& clock,
                   MetricsSink& metrics = NoopMetricsSink::instance(),
                   std::uint64_t seed = std::random_device{}());
  LeaseCoordinator(const LeaseCoordinator&) = delete;
  LeaseCoordinator& operator=(const LeaseCoordinator&) = delete;

  // Set before the first pass; nullptr for none. The listener must outlive the coordinator.
  void set_listener(LeaseListener* listener);

  TakePassResult run_take_pass();
  RenewPassResult run_renew_pass();

  // The leases this worker holds and may still act on (not past their renewal deadline),
  // each with the counter this worker last wrote or read: the value its next write is
  // conditional on. Sorted by key.
  std::vector<Lease> held_leases() const;
  std::optional<Lease> held_lease(std::string_view lease_key) const;
  bool holds(std::string_view lease_key) const;
  std::size_t held_count() const;

  // Tenures. Each take of a lease by this worker starts a new tenure, numbered uniquely
  // within this coordinator. A writer that acts for one tenure (a shard consumer and its
  // checkpointer) passes its number to update_checkpoint/refresh_held: if the lease was lost
  // and taken again since, the write is refused with kLeaseLost, even though this worker
  // holds the lease again (the new tenure's consumer may already have moved on, and a late
  // checkpoint of the old one would move the checkpoint backwards). Empty when not held.
  std::optional<std::uint64_t> tenure_of(std::string_view lease_key) const;

  // The earliest time at which a held lease must be given up unless renewed first (the
  // runner wakes up then); empty when nothing is held.
  std::optional<Clock::MonoTime> next_deadline() const;

  // Writes checkpoint fields of a held lease, fenced on this worker's counter and ownership
  // (see the class comment). Returns the lease as written (its new counter is now the held
  // one). Errors: kLeaseLost (not held, taken by another worker, deleted, or its renewal
  // deadline passed, or held in another tenure than `tenure`; nothing was written),
  // kUnavailable (retry), others from the store.
  Result<Lease> update_checkpoint(std::string_view lease_key, const CheckpointFields& fields,
                                  std::optional<std::uint64_t> tenure = std::nullopt);

  // Re-reads a held lease from the table (consistent read) and, if this worker still owns
  // it, adopts what is stored (counter, checkpoint, pending checkpoint) and returns it. For a
  // writer whose earlier write had an unknown outcome (it may have been applied although its
  // answer was lost). Does not extend the renewal deadline. Errors: kLeaseLost (not held any
  // more, owned by another worker, released or deleted, or held in another tenure than
  // `tenure`), kUnavailable and others from the store (still held; retry).
  Result<Lease> refresh_held(std::string_view lease_key,
                             std::optional<std::uint64_t> tenure = std::nullopt);

  // Hands one lease back (owner removed, counter bumped) so another worker can take it on
  // its next pass. kLeaseLost if it was not held any more.
  Status release(std::string_view lease_key);
  // Stops taking, then releases every held lease. Returns the first failure other than
  // kLeaseLost; leases that could not be released are dropped from the held set anyway
  // (they expire after failover_time).
  Status release_all();

  // ---- kLeader ----
  // The start of the last successful renewal of this worker's membership: every held lease
  // is held until basis + failover_time - lost_lease_margin. Empty: not a member; every held
  // lease is given up (listener told, with `reason`), and so are handoffs waiting to come in.
  void set_membership_basis(std::optional<Clock::MonoTime> basis, const Status& reason = {});
  // The keys of the leases given up when the membership last ended and not looked at
  // (look_at) since: a worker that registers again looks at them first, adopting at once
  // those the table still gives it, rather than waiting for the leader to notice.
  std::vector<std::string> given_up() const;
  // Reads each lease the leader posted and acts on it (see the class comment).
  LookResult look_at(const std::vector<std::string>& keys);
  // Checks the leases handed to this worker whose old owner has not finished yet.
  LookResult poll_incoming_handoffs();
  bool has_pending_incoming() const;
  // What this worker holds or is taking over: the keys of its held leases (not past their
  // deadline) and of the leases handed to it whose old owner has not finished yet. Sorted.
  std::vector<std::string> claimed_keys() const;
  // What the heartbeat reports (WorkerEntry::lease_digest): lease_set_digest() of the claimed
  // keys, each marked with what this worker knows of it: "<key>" held, "<key>>" held and to
  // be handed off, "<key><" handed to it (lease_claim_mark()).
  std::string claimed_digest() const;
  // The old owner's last step of a handoff (after the consumer stopped): removes
  // checkpointOwner so the new owner starts. kLeaseLost if the lease was taken meanwhile.
  Status complete_handoff(std::string_view lease_key);
  // Held leases the leader asked this worker to hand off: key -> new owner.
  std::map<std::string, std::string> pending_handoffs() const;

  // Bytes of record data processed for a held lease (its shard consumer reports each batch).
  void note_processed(std::string_view lease_key, std::size_t bytes);
  // Each held lease's recent throughput in KB/s (bytes processed, smoothed over about half a
  // minute), as of now; what the heartbeat publishes for balancing by load.
  // Leases held for less than a second are left out (no estimate yet).
  std::map<std::string, double> throughput_kbps();

  // No more take passes (they return at once), no adoption of assigned leases; renewals
  // continue. For graceful shutdown.
  void stop_taking();
  bool taking_stopped() const { return taking_stopped_.load(); }

  const LeaseConfig& config() const { return config_; }
  const std::string& worker_id() const { return config_.worker_id; }
  const Clock& clock() const { return clock_; }

 private:
  struct Held {
    Lease lease;                 // guarded by mu_
    Clock::MonoTime renewed_at;  // guarded by mu_: start of the last successful write
    // guarded by mu_: start of the last successful checkpoint write (it renews the lease)
    std::optional<Clock::MonoTime> checkpointed_at;
    std::uint64_t tenure = 0;   // set before it is published in held_
    bool handoff_told = false;  // guarded by mu_: on_handoff_requested fired
    // guarded by mu_: when this worker learned of the handoff; it gives the lease up by
    // itself before the receiver may take it anyway (handoff_timeout)
    std::optional<Clock::MonoTime> handoff_seen_at;
    std::atomic<std::uint64_t> bytes_processed{0};
    // guarded by mu_: the throughput estimate and what it was last computed from
    std::uint64_t bytes_at_sample = 0;
    std::optional<Clock::MonoTime> sampled_at;
    double kbps = 0;
    bool kbps_ready = false;  // one full sample taken: kbps means something
    std::mutex write_mu;      // one write to this lease at a time
  };
  struct Incoming {
    Clock::MonoTime since;  // first seen handed to this worker
    std::string from;       // the old owner
  };
  // What this worker has seen of a lease in its scans.
  struct Observed {
    std::int64_t counter = 0;
    Clock::MonoTime changed_at;    // when this worker first saw `counter`
    std::uint64_t generation = 0;  // the take pass that last saw the lease
  };
  enum class WriteKind { kRenew, kCheckpoint, kRelease, kRefresh, kHandoff };
  struct PendingLoss {
    std::string key;
    Status reason;
  };

  static std::string_view op_name(WriteKind kind);
  Clock::MonoTime deadline_of(const Held& h) const;
  std::shared_ptr<Held> find_held(std::string_view key) const;
  // Removes `h` from the held set if it is still there; returns whether it was.
  bool drop_held(const std::shared_ptr<Held>& h);
  void notify_lost(std::vector<PendingLoss> losses);
  void report_held_gauge();
  Result<Lease> write_held(std::string_view key, WriteKind kind, const CheckpointFields* fields,
                           std::optional<std::uint64_t> tenure, std::vector<PendingLoss>& losses);
  // The held-lease writer's steps (see write_held).
  struct WriteContext;
  Status give_up(WriteContext& w, std::string why);
  Result<Lease> reread_held(WriteContext& w);
  Result<Lease> store_write(WriteContext& w, const CheckpointFields* fields);
  void record_write(WriteContext& w, const Lease& written, Clock::MonoTime start);
  std::optional<Result<Lease>> letting_go_landed(WriteContext& w);
  // The take pass's steps (see run_take_pass).
  struct TakeView;
  void observe(const std::vector<Lease>& leases, TakeView& view);
  void drop_taken_elsewhere(const std::vector<Lease>& leases, TakeView& view);
  void classify(const std::vector<Lease>& leases, TakeView& view, TakePassResult& result);
  void take_available(TakeView& view, int needed, TakePassResult& result);
  void steal(const std::vector<Lease>& leases, const TakeView& view, int target, int needed,
             TakePassResult& result);
  bool try_take(const Lease& seen, bool steal, TakePassResult& result);
  // Publishes a lease just taken as held (new tenure) and tells the listener.
  void gain(const Lease& taken, Clock::MonoTime start);
  // A held lease's handoff was requested (seen in `fresh`): record it, tell the listener once.
  void note_handoff(const std::shared_ptr<Held>& h, const Lease& fresh);
  // Adopts `seen` (leaseOwner = this worker) with take_lease; false when the store failed.
  bool adopt(const Lease& seen, LookResult& result);
  bool leader_mode() const { return config_.assignment == LeaseAssignment::kLeader; }

  LeaseStore& store_;
  const LeaseConfig config_;
  const Clock& clock_;
  MetricsSink& metrics_;
  std::atomic<LeaseListener*> listener_{nullptr};
  std::atomic<bool> taking_stopped_{false};

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Held>, std::less<>> held_;
  std::uint64_t next_tenure_ = 1;                          // guarded by mu_
  std::optional<Clock::MonoTime> membership_basis_;        // guarded by mu_ (kLeader)
  std::map<std::string, Incoming, std::less<>> incoming_;  // guarded by mu_ (kLeader)
  std::set<std::string, std::less<>> given_up_;            // guarded by mu_ (kLeader)

  std::mutex take_mu_;  // one take pass at a time; guards observed_ and rng_
  std::unordered_map<std::string, Observed> observed_;
  std::uint64_t pass_generation_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace kcl::leases
