// Membership: this worker's entry in the coordination table (LeaseAssignment::kLeader), which
// holds every lease the worker holds.
//
// One write per renew interval keeps the membership: a heartbeat (an atomic increment),
// conditional on the incarnation. The hold basis is the *start* of the last
// successful heartbeat (for the leader: the start of its last successful lock renewal); the worker
// holds its leases until basis + failover_time - lost_lease_margin (MembershipHold), and when that
// passes, or a heartbeat finds the entry fenced, it abandons the incarnation: every lease is given
// up (listeners told) and the worker registers again as a new incarnation holding nothing. Results
// of calls of an abandoned incarnation are ignored.
//
// Safety argument (why a worker stops before its leases are given to another). The leader
// moves a member's leases only after fencing its entry: a delete conditional on the
// incarnation and heartbeat it observed unchanged for failover_time on its own monotonic
// clock (lease_leader.h). The member's last successful heartbeat landed no later than the
// leader first saw that value, and started before it landed, so the member's deadline
// (start + failover_time - margin) is before the fence; after the fence no heartbeat of that
// incarnation can succeed, so its deadline never moves again. The leader itself: while it
// holds the lock its hold basis is the start of its last successful lock renewal (its own
// entry is not written meanwhile: set_held_by_lock), and another worker takes the lock only
// after seeing it unchanged for failover_time, so a leader that lost its lock has passed its
// deadline as a member too; the new leader may fence that incarnation (named in the lock) at
// once. Nobody else fences a leader's entry: only a leader fences, never itself. Both
// sides measure intervals on their own monotonic clocks; only their rates must agree (to
// well within the margin), as for the lease counters of LeaseAssignment::kWorkerTakes.
//
// Thread safety: MembershipHold from any thread. A Membership belongs to the thread that runs
// the agent's steps (the coordinator, coordinator.h); its calls run on the membership lane.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>

#include "assignment/call_task.h"
#include "coordination/coordination_store.h"
#include "kcl/clock.h"
#include "kcl/lease_config.h"
#include "kcl/metrics.h"
#include "leases/held_leases.h"

namespace kcl::assignment {

// The hold rule of leader-based assignment (a leases::HoldPolicy): every held lease is held
// until the membership's basis + failover_time - lost_lease_margin, and a lease being handed
// off also no longer than handoff_timeout less handoff_margin() after this worker learned of
// the handoff, before the receiver takes it anyway. No basis (not a member): nothing is held.
// Membership sets the basis.
// That margin: two polls, at least lost_lease_margin.
std::chrono::milliseconds handoff_margin(const LeaseConfig& config);
// How long the old owner of a lease being handed off may wait for its processor to finish
// (a pull consumer's records taken and not yet acknowledged): handoff_timeout less twice the
// margin, so the final checkpoint and the handoff's completion are written before the hold
// ends. Never negative.
std::chrono::milliseconds handoff_finish_bound(const LeaseConfig& config);

class MembershipHold final : public leases::HoldPolicy {
 public:
  explicit MembershipHold(const LeaseConfig& config) : config_(config) {}
  Clock::MonoTime deadline(const leases::HoldState& state) const override;
  void set_basis(std::optional<Clock::MonoTime> basis);
  // When every lease is given up unless the basis moves; empty when not a member.
  std::optional<Clock::MonoTime> hold_deadline() const;

 private:
  const LeaseConfig config_;
  mutable std::mutex mu_;
  std::optional<Clock::MonoTime> basis_;  // guarded by mu_
};

class Membership {
 public:
  struct Callbacks {
    // What the next heartbeat reports: lease_count and lease_kbps.
    std::function<coordination::WorkerEntry()> report;
    // The membership ended (abandoned, fenced or left): give every lease up with `reason`.
    std::function<void(const Status& reason)> ended;
  };
  // `store`, `hold`, `clock` and `metrics` must outlive the membership.
  Membership(coordination::CoordinationStore& store, MembershipHold& hold,
             const LeaseConfig& config, const Clock& clock, MetricsSink& metrics,
             std::uint64_t seed, Callbacks callbacks);

  struct RenewResult {
    Status status;            // the call's failure, if any
    bool registered = false;  // a new incarnation was registered
    bool abandoned = false;   // the incarnation was given up (fenced or lapsed)
  };
  // Registers a new incarnation when not a member, else heartbeats. Gives the incarnation up
  // when its hold has lapsed or the entry was fenced. One at a time (renewing()): two
  // registrations at once would make two incarnations.
  CallTask<RenewResult> renew();
  bool renewing() const { return renewing_; }
  // Where the calls run (null: inline).
  void set_call_runner(CallRunner* runner) { runner_ = runner; }
  // Gives the current incarnation up (listeners told with `reason`); the next renew()
  // registers a new one.
  void abandon(const Status& reason);
  // Graceful shutdown has begun: the next heartbeats say so (the leader assigns this worker
  // nothing more). Call renew() to say it at once.
  void set_draining();
  // Graceful leave: removes the entry (after the leases were handed back).
  CallTask<Status> leave();

  // The leader lock's part of the hold basis (empty when not leading).
  void set_leader_basis(std::optional<Clock::MonoTime> basis);
  // While set (this worker holds the leader lock), the lock's renewals alone hold the
  // membership and the heartbeats pause: nobody but the leader fences an entry, and the next
  // leader may fence this incarnation only after the lock lapsed, by when a hold counted from
  // the lock's renewals has lapsed too (the safety argument above). Cleared when the lock
  // goes; the basis is then the last heartbeat's again (which has lapsed unless the lock was
  // held briefly), so a worker that stops leading without leaving registers anew.
  void set_held_by_lock(bool held);

  // The status endpoint each new incarnation's entry names (WorkerEntry::status_url); set
  // before the first renew() so the first registration carries it.
  void set_status_url(std::string url);

  // The current incarnation's entry as last written or read; empty when not a member.
  std::optional<coordination::WorkerEntry> entry() const;
  // When the hold lapses unless renewed; empty when not a member.
  std::optional<Clock::MonoTime> deadline() const;
  // abandon()s when the hold has lapsed; true when it did.
  bool check_lapse();
  std::uint64_t incarnations() const;

 private:
  CallTask<RenewResult> register_incarnation(Clock::MonoTime start, std::int64_t lease_count,
                                             std::uint64_t generation, RenewResult result);
  std::optional<Clock::MonoTime> basis() const;
  void publish();
  // Not a member any more: entry, bases and the hold go.
  void end();
  std::string new_incarnation();

  coordination::CoordinationStore& store_;
  MembershipHold& hold_;
  const Callbacks callbacks_;
  const LeaseConfig config_;
  const Clock& clock_;
  MetricsSink& metrics_;
  CallRunner* runner_ = nullptr;
  bool renewing_ = false;
  std::mt19937_64 rng_;
  std::optional<coordination::WorkerEntry> entry_;
  std::optional<Clock::MonoTime> heartbeat_basis_;
  std::optional<Clock::MonoTime> leader_basis_;
  bool held_by_lock_ = false;
  std::uint64_t generation_ = 0;  // bumped per incarnation
  std::uint64_t incarnations_ = 0;
  bool draining_ = false;
  std::string status_url_;
  std::string registering_;              // the incarnation being registered, until it is
  Clock::MonoTime registering_since_{};  // its first attempt's start
};

}  // namespace kcl::assignment
