// HeldLeases: the leases one worker holds and every write it makes to them, whichever way it
// came to hold them (the two ways are in src/assignment: leader-based and worker-takes; this
// core knows neither).
//
//  - The held set. Each take of a lease by this worker starts a tenure, numbered uniquely
//    within this object. A writer that acts for one tenure (a shard consumer and its
//    checkpointer) passes its number: if the lease was lost and taken again since, its write
//    is refused with kLeaseLost, although this worker holds the lease again (the new
//    tenure's consumer may have moved on, and a late checkpoint of the old one would move
//    the checkpoint backwards).
//  - The hold. How long a lease stays held is the HoldPolicy's call, given the start of the
//    lease's last successful write and when a handoff of it was seen (worker-takes: failover -
//    margin after the lease's last renewal; leader-based: failover - margin after the
//    membership's last renewal). A lease past its deadline is not reported as held, and its
//    next write gives it up instead (the listener is told).
//  - Fenced writes: renew, checkpoint, release, complete a handoff, and refresh (a re-read).
//
// Safety argument (why a write of this worker never lands on another worker's lease). Every
// write is conditional on the counter and owners this worker holds, and sets counter + 1 on
// success (a handoff's completion and a release included), recording the new counter. One
// worker's writes to one lease are serialized (a per-lease mutex), so its own renewal and
// checkpoint never race each other's condition. When a condition fails, the lease is re-read
// (consistently): if this worker is still its actual owner (leaseOwner, or checkpointOwner
// while a handoff it gives is pending) and the counter is at most one past the one held, only
// its own write whose answer it did not see moved the counter (a timeout after DynamoDB
// applied the write; the writes after it are conditional on the same counter, so one lands at
// most) or the leader started a handoff (which moves only the owners): the stored lease is
// adopted and the write retried. A counter further on means another worker held the lease
// meanwhile and it came back to this one's id: lost, as is a lease another worker owns, and
// the caller gets kLeaseLost naming why. Failed
// writes, and writes of unknown outcome, never extend the hold. Whoever takes a lease over
// does so only after this worker's hold has ended by the policy's rule (assignment/
// assignment_strategy.h states each strategy's side), so a worker acting on a lease it holds is
// never acting on one another worker holds.
//
// Metrics (MetricsSink): "leases.held" gauge; "leases.lost", "leases.released",
// "leases.handed_off", "leases.handoffs_requested" counts; "leases.renew_latency" timing;
// "leases.failed_conditions" tagged operation; "checkpoint.result" tagged result.
//
// Thread safety: all methods may be called from any thread. Listener callbacks run on the
// thread of the call that noticed the change, with no lock of this object held; they must be
// quick and must not call back into this object's writes.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
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
  // The lease is to be handed to `new_owner` (a pending handoff, checkpointOwner = this
  // worker). Stop its shard consumer gracefully (a final checkpoint), then call
  // HeldLeases::complete_handoff(lease_key).
  virtual void on_handoff_requested(const std::string& lease_key, const std::string& new_owner) {
    (void)lease_key;
    (void)new_owner;
  }
};

// What the hold policy is told about one held lease.
struct HoldState {
  Clock::MonoTime renewed_at;  // start of its last successful write (take, renewal, checkpoint)
  std::optional<Clock::MonoTime> handoff_seen_at;  // when this worker learned of a handoff
};

// How long a held lease stays held (see the class comment). Called with HeldLeases' lock held:
// an implementation must not call back into HeldLeases, and must be thread-safe.
class HoldPolicy {
 public:
  virtual ~HoldPolicy() = default;
  virtual Clock::MonoTime deadline(const HoldState& state) const = 0;
};

// basis + failover_time - lost_lease_margin: the end of a hold renewed at `basis`. Every hold
// rule of both strategies is this with its own basis.
Clock::MonoTime hold_deadline(Clock::MonoTime basis, const LeaseConfig& config);

// A held lease as seen from outside.
struct HeldSummary {
  std::string lease_key;
  std::int64_t counter = 0;  // what this worker's next write is conditional on
  bool current = true;       // not past its deadline
  bool handing_off = false;  // a handoff to another worker is pending and was told
};

// What a renewal did (the worker-takes renewer's pass counts them).
enum class RenewOutcome {
  kRenewed,
  kBusy,     // another write of this lease was in flight; it renews the lease if it lands
  kLost,     // given up: taken, deleted, or its deadline passed (listener told)
  kFailed,   // transient failure; still held until its deadline
  kNotHeld,  // not held (nothing to do)
};

class HeldLeases {
 public:
  // `config` must be valid; `store`, `clock` and `metrics` must outlive this object.
  HeldLeases(LeaseStore& store, LeaseConfig config, const Clock& clock, MetricsSink& metrics,
             std::shared_ptr<const HoldPolicy> policy);
  HeldLeases(const HeldLeases&) = delete;
  HeldLeases& operator=(const HeldLeases&) = delete;

  // Set before any lease is gained; nullptr for none. Must outlive this object.
  void set_listener(LeaseListener* listener);

  // ---- what is held ----
  // The leases held and not past their deadline, each with the counter this worker last
  // wrote or read (the value its next write is conditional on). Sorted by key.
  std::vector<Lease> held_leases() const;
  std::optional<Lease> held_lease(std::string_view lease_key) const;
  bool holds(std::string_view lease_key) const;
  std::size_t held_count() const;
  // Every held lease, past its deadline or not (see HeldSummary::current). Sorted by key.
  std::vector<HeldSummary> summaries() const;
  // The tenure of a held lease (past its deadline or not); empty when not held.
  std::optional<std::uint64_t> tenure_of(std::string_view lease_key) const;
  // The earliest deadline of a held lease; empty when nothing is held.
  std::optional<Clock::MonoTime> next_deadline() const;
  // Held leases whose handoff was requested: key -> new owner.
  std::map<std::string, std::string> pending_handoffs() const;

  // ---- fenced writes (see the class comment) ----
  // The checkpoint fields; returns the lease as written. kLeaseLost (not held, another
  // owner, past its deadline, or another tenure than `tenure`; nothing written),
  // kUnavailable (retry), others from the store.
  Result<Lease> update_checkpoint(std::string_view lease_key, const CheckpointFields& fields,
                                  std::optional<std::uint64_t> tenure = std::nullopt);
  // Re-reads a held lease (consistently) and adopts what is stored when this worker still
  // owns it: for a writer whose earlier write had an unknown outcome. Does not extend the
  // hold. kLeaseLost as above; kUnavailable and others from the store (still held).
  Result<Lease> refresh_held(std::string_view lease_key,
                             std::optional<std::uint64_t> tenure = std::nullopt);
  // One renewal (counter + 1). A lease checkpointed within `recent` counts as renewed.
  RenewOutcome renew(std::string_view lease_key, Status* failure = nullptr);
  bool checkpointed_within(std::string_view lease_key, Clock::MonoTime::duration recent) const;
  // Hands a lease back (owner removed, counter + 1). kLeaseLost when it was not held.
  Status release(std::string_view lease_key);
  // Releases every held lease; returns the first failure other than kLeaseLost. Leases that
  // could not be released are dropped anyway (they expire by their owner's silence). A lease
  // being handed off (known or found by the release) completes its handoff instead: the lease
  // as written goes into `handed_over` when given.
  Status release_all(std::vector<Lease>* handed_over = nullptr);
  // The old owner's last step of a handoff (after the consumer stopped): removes
  // checkpointOwner so the new owner starts. kLeaseLost when the lease was taken meanwhile.
  Status complete_handoff(std::string_view lease_key);

  // ---- for the assignment strategies ----
  // A lease this worker just took (the write started at `start`): a new tenure; the
  // listener is told.
  void gain(const Lease& taken, Clock::MonoTime start);
  // The table shows `seen`, a lease this worker holds, at a higher counter under another
  // owner (or none): given up now (listener told). Returns whether it was. Skipped while a
  // write of this worker to the lease is in flight (that write finds out).
  bool lose_if_moved(const Lease& seen);
  // Gives up one lease (listener told with `reason`); false when it was not held.
  bool lose(std::string_view lease_key, const Status& reason);
  // Gives up every lease (listener told with `reason`); returns their keys.
  std::vector<std::string> lose_all(const Status& reason);
  // A handoff of a held lease was found (`fresh` names the new owner): recorded, the
  // listener told once. Owners are adopted from `fresh` when its counter is the held one (a
  // handoff moves only the owners).
  void note_handoff(const Lease& fresh);

  const LeaseConfig& config() const { return config_; }
  const std::string& worker_id() const { return config_.worker_id; }
  const Clock& clock() const { return clock_; }
  LeaseStore& store() { return store_; }

 private:
  struct Held;
  enum class WriteKind { kRenew, kCheckpoint, kRelease, kRefresh, kHandoff };
  struct PendingLoss {
    std::string key;
    Status reason;
  };
  struct WriteContext;

  static std::string_view op_name(WriteKind kind);
  Clock::MonoTime deadline_of(const Held& h) const;
  std::shared_ptr<Held> find_held(std::string_view key) const;
  bool drop_held(const std::shared_ptr<Held>& h);
  void notify_lost(std::vector<PendingLoss> losses);
  void report_held_gauge();
  Result<Lease> write_held(std::string_view key, WriteKind kind, const CheckpointFields* fields,
                           std::optional<std::uint64_t> tenure, std::vector<PendingLoss>& losses);
  Result<Lease> begin_write(WriteContext& w, const std::string& key,
                            std::optional<std::uint64_t> tenure);
  Result<Lease> write_attempts(WriteContext& w, const CheckpointFields* fields);
  Status give_up(WriteContext& w, std::string why);
  Result<Lease> reread_held(WriteContext& w);
  Result<Lease> store_write(WriteContext& w, const CheckpointFields* fields);
  void record_write(WriteContext& w, const Lease& written, Clock::MonoTime start);
  std::optional<Result<Lease>> letting_go_landed(WriteContext& w);

  LeaseStore& store_;
  const LeaseConfig config_;
  const Clock& clock_;
  MetricsSink& metrics_;
  const std::shared_ptr<const HoldPolicy> policy_;
  std::atomic<LeaseListener*> listener_{nullptr};

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Held>, std::less<>> held_;  // guarded by mu_
  std::uint64_t next_tenure_ = 1;                                   // guarded by mu_
};

}  // namespace kcl::leases
