// AssignmentAgent: the schedule of one worker's steps in leader-based assignment
// (LeaseAssignment::kLeader), written as coroutines (call_task.h) that LeaderAssignment's
// Coordinator runs on one thread and that tests and the simulation run inline (*_step()):
//
//  heartbeat_step()  registers or renews the membership (membership.h); on the leader, the
//                    leader lock's renewal holds it instead (leader_lock.h).
//  poll_step()       finds the leases the table gives this worker (LeaseAdopter::discover)
//                    and reads the lock, taking it when nobody holds it or it lapsed: every
//                    poll_interval while something moves (poll_active()); idle, the lock
//                    within a read budget per held lease, every fifth idle read a discovery
//                    instead, and active again when the lock's call for attention moves.
//  leader_step()     on the leader: one LeaseLeader pass, then a discovery when the pass
//                    moved a lease to or from this worker.
//
// Each step returns when it wants to run again. drain() begins a graceful stop (a stopping
// leader hands the lock over and assigns nothing more); release_all() and leave() end it.
// Why a lease the table gives a live worker is read within a bound, and who owns what:
// src/assignment/README.md.
//
// Thread safety: the agent's state belongs to the thread that runs its steps (the
// coordinator, or the caller of *_step(), drain() and leave() when none runs); its calls touch
// only their requests and thread-safe stores. leading() and failing_calls() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "assignment/assignment_strategy.h"
#include "assignment/call_task.h"
#include "assignment/leader_lock.h"
#include "assignment/lease_adopter.h"
#include "assignment/lease_leader.h"
#include "assignment/membership.h"
#include "coordination/coordination_store.h"
#include "coordination/reported_series.h"
#include "kcl/clock.h"
#include "kcl/lease_config.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"
#include "leases/held_leases.h"
#include "leases/load_meter.h"

namespace kcl::assignment {

class AssignmentAgent {
 public:
  // Everything given must outlive the agent. `load` and `logger` may be null.
  AssignmentAgent(coordination::CoordinationStore& coordination, leases::LeaseStore& leases,
                  leases::HeldLeases& held, MembershipHold& hold, leases::LoadMeter* load,
                  const LeaseConfig& config, const Clock& clock, MetricsSink& metrics,
                  Logger* logger, std::uint64_t seed);

  // The steps, each returning when it wants to run again.
  CallTask<Clock::MonoTime> heartbeat_task();
  CallTask<Clock::MonoTime> poll_task();
  CallTask<Clock::MonoTime> leader_task();
  // Graceful shutdown begins: nothing more is adopted, and the leader learns at once (a
  // heartbeat) that this worker takes nothing more.
  CallTask<Done> drain_task();
  // Once the consumers stopped: every held lease is handed back (HeldLeases::release_all(); a
  // handoff in progress completes), and a lease handed off to a worker that is gone or
  // stopping too is freed (LeaseAdopter::free_unread).
  CallTask<Status> release_task();
  CallTask<Status> leave_task();
  // The same, run inline (no call runner): tests and the simulation.
  Clock::MonoTime heartbeat_step() { return heartbeat_task().run_inline(); }
  Clock::MonoTime poll_step() { return poll_task().run_inline(); }
  Clock::MonoTime leader_step() { return leader_task().run_inline(); }
  void drain() { (void)drain_task().run_inline(); }
  Status release_all() { return release_task().run_inline(); }
  Status leave() { return leave_task().run_inline(); }
  // Where the calls run (the coordinator); null runs them inline.
  void set_call_runner(CallRunner* runner);
  // Called (from the heartbeat step) when the poll step should run now; may be empty.
  void set_poll_waker(std::function<void()> wake) { wake_poll_ = std::move(wake); }
  // Called when this worker becomes the leader, so the leader step runs now; may be empty.
  void set_leader_waker(std::function<void()> wake) { wake_leader_ = std::move(wake); }

  bool leading() const { return lock_.leading(); }
  void set_on_leading(std::function<void()> fn) { lock_.set_on_elected(std::move(fn)); }
  Membership& membership() { return membership_; }
  const LeaseLeader& leader() const { return leader_; }
  LeaseAdopter& adopter() { return adopter_; }
  const LeaseConfig& config() const { return config_; }
  // The failing series of this worker's coordination calls (heartbeats, lock renewals, own-
  // entry polls, leader passes); empty when every one's last call succeeded.
  std::vector<FailingCalls> failing_calls() const;
  const Clock& clock() const { return clock_; }

 private:
  void log(LogLevel level, const std::string& message) const;
  std::chrono::milliseconds jittered(std::chrono::milliseconds base);
  // Takes the lock (LeaderLock::try_lead); a new leader's step runs at once.
  CallTask<Done> try_lead(std::optional<coordination::LeaderEntry> seen, Clock::MonoTime now);
  std::optional<std::string> assign_veto() const;
  std::optional<std::string> hold_veto() const;
  CallTask<Done> poll_handoffs();
  // The leases the table gives this worker at its stop, handed back (leave()).
  CallTask<Status> hand_back_unread();
  // The workers' entries (a strongly consistent read), for a stop's hand-backs.
  CallTask<Result<coordination::CoordinationView>> read_workers();
  CallTask<bool> discover_leases();
  bool observe_lock(const std::optional<coordination::LeaderEntry>& seen,
                    const std::string& incarnation, Clock::MonoTime now);
  // Something changed: polls stay at poll_interval for the next failover_time.
  void note_activity();
  bool poll_active();
  // The poll that discovers and reads the lock (next in `interval`, or sooner while
  // busy), and the poll while nothing is in progress.
  CallTask<Clock::MonoTime> active_poll(coordination::WorkerEntry before,
                                        std::chrono::milliseconds interval);
  CallTask<Clock::MonoTime> idle_poll(coordination::WorkerEntry entry);
  // Whether a handoff to or from this worker waits, or keys wait to be looked at again.
  bool busy_after(bool unfinished) const;
  // How often an idle worker reads the lock, within its read budget.
  std::chrono::milliseconds idle_lock_read_interval() const;
  void schedule_lock_read(Clock::MonoTime now);
  std::chrono::milliseconds leader_idle_interval(const LeaderPassResult& r) const;

  // What the heartbeat reports, and what is done when the membership ends.
  coordination::WorkerEntry heartbeat_report();
  void membership_ended(const Status& reason);

  coordination::CoordinationStore& coordination_;
  leases::HeldLeases& held_;
  MembershipHold& hold_;
  leases::LoadMeter* load_;
  const LeaseConfig config_;
  const Clock& clock_;
  MetricsSink& metrics_;
  Logger* logger_;
  LeaseAdopter adopter_;
  Membership membership_;
  LeaderLock lock_;
  LeaseLeader leader_;  // used by leader_step only
  // Failing series of this worker's coordination calls (logged and exported).
  coordination::ReportedSeries heartbeats_;
  coordination::ReportedSeries polls_;        // reads of the leader lock
  coordination::ReportedSeries discoveries_;  // LeaseAdopter::discover
  coordination::ReportedSeries passes_;

  CallRunner* runner_ = nullptr;
  std::mt19937_64 rng_;
  std::uint64_t term_started_ = 0;  // term that leader_ began
  // The poll's schedule: what it acted on last, and when it reads what next.
  struct PollSchedule {
    // the busy state the last poll left behind, when the lock is next read while idle
    bool busy = false;
    Clock::MonoTime next_lock_read{};
    // idle reads of the lock so far, made or failed (every kReadsPerDiscovery-th is a
    // discovery instead), and when the leader next discovers
    std::uint64_t idle_reads = 0;
    Clock::MonoTime next_discovery{};
    Clock::MonoTime active_until{};  // polls are active until then
  } poll_;
  std::function<void()> wake_poll_;
  std::function<void()> wake_leader_;
  // this worker's latest registration (incarnation, when it was answered)
  std::optional<std::pair<std::string, Clock::MonoTime>> registered_;
  // A call for the workers' attention failed: the next lock renewal makes it.
  bool attention_pending_ = false;
};

}  // namespace kcl::assignment
