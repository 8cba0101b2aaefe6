// AssignmentAgent: one worker's part in leader-based assignment (LeaseAssignment::kLeader),
// as three explicit steps that LeaderAssignment runs on real time (a StepRunner, one thread
// each, so a slow lease-table scan never delays a heartbeat) and tests and the simulation call
// on a ManualClock:
//
//  heartbeat_step()  registers or renews the membership (membership.h); on the leader, also
//                    renews the leader lock. A leader that loses its lock, or cannot renew it
//                    in time, gives up its incarnation (every lease), because the next leader
//                    may fence that incarnation at once.
//  poll_step()       reads this worker's entry and the lock: acts on the lease keys the leader
//                    posted (LeaseAdopter::look_at), notices a fenced membership, checks
//                    handoffs waiting to come in, and takes the lock when nobody holds it or
//                    it has not moved for failover_time (conditional on what was read).
//  leader_step()     on the leader: one LeaseLeader pass.
//
// Each step returns when it wants to run again. leave() is the last step of a graceful
// shutdown, after the leases were handed back: the lock is released (so another worker leads
// at once) and the entry removed.
//
// Thread safety: each step from one thread at a time (different steps may run at once);
// leave() after the steps stopped; accessors from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "assignment/assignment_strategy.h"
#include "assignment/coordination_store.h"
#include "assignment/lease_adopter.h"
#include "assignment/lease_leader.h"
#include "assignment/membership.h"
#include "assignment/reported_series.h"
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
  AssignmentAgent(CoordinationStore& coordination, leases::LeaseStore& leases,
                  leases::HeldLeases& held, MembershipHold& hold, leases::LoadMeter* load,
                  const LeaseConfig& config, const Clock& clock, MetricsSink& metrics,
                  Logger* logger, std::uint64_t seed);

  Clock::MonoTime heartbeat_step();
  Clock::MonoTime poll_step();
  Clock::MonoTime leader_step();
  // Graceful shutdown begins: nothing more is adopted, and the leader learns at once (a
  // heartbeat) that this worker takes nothing more.
  void drain();
  Status leave();

  bool leading() const { return leading_.load(); }
  std::uint64_t leader_terms() const { return terms_.load(); }
  Membership& membership() { return membership_; }
  const LeaseLeader& leader() const { return leader_; }
  LeaseAdopter& adopter() { return adopter_; }
  const LeaseConfig& config() const { return config_; }
  // The failing series of this worker's coordination calls (heartbeats, lock renewals, own-
  // entry polls, leader passes, inbox posts); empty when every one's last call succeeded.
  std::vector<FailingCalls> failing_calls() const;
  const Clock& clock() const { return clock_; }

 private:
  void log(LogLevel level, const std::string& message) const;
  std::chrono::milliseconds jittered(std::chrono::milliseconds base);
  // Stops leading (the incarnation goes too unless `graceful`).
  void stop_leading(const Status& why, bool abandon_incarnation);
  void try_lead(const std::optional<LeaderEntry>& seen, Clock::MonoTime now);
  bool renew_lock();
  std::optional<std::string> assign_veto() const;
  // False when some keys could not be looked at (they stay in the inbox).
  bool look_at_inbox(const WorkerEntry& self);
  bool poll_leases(const WorkerEntry& self);
  bool observe_lock(const std::optional<LeaderEntry>& seen, const std::string& incarnation,
                    Clock::MonoTime now);

  // What the heartbeat reports, and what is done when the membership ends.
  WorkerEntry heartbeat_report();
  void membership_ended(const Status& reason);

  CoordinationStore& coordination_;
  leases::HeldLeases& held_;
  leases::LoadMeter* load_;
  const LeaseConfig config_;
  const Clock& clock_;
  MetricsSink& metrics_;
  Logger* logger_;
  LeaseAdopter adopter_;
  Membership membership_;
  LeaseLeader leader_;  // used by leader_step only
  // Failing series of this worker's coordination calls (logged and exported).
  ReportedSeries heartbeats_;
  ReportedSeries lock_renewals_;
  ReportedSeries polls_;
  ReportedSeries passes_;

  mutable std::mutex mu_;
  std::mt19937_64 rng_;                        // guarded by mu_
  std::optional<LeaderEntry> lock_held_;       // guarded by mu_
  std::optional<Clock::MonoTime> lock_basis_;  // guarded by mu_: start of the last renewal
  std::optional<LeaderEntry> lock_seen_;       // guarded by mu_: as last read
  Clock::MonoTime lock_changed_at_{};          // guarded by mu_
  std::optional<LeaderEntry> lock_previous_;   // guarded by mu_: before this worker took it
  // guarded by mu_: the lock as seen before a take whose answer was lost
  std::optional<LeaderEntry> taken_from_;
  std::uint64_t term_started_ = 0;  // guarded by mu_: term that leader_ began
  // poll thread only: the (incarnation, recheck) of the last recheck acted on
  std::pair<std::string, std::int64_t> recheck_seen_;
  std::atomic<bool> leading_{false};
  std::atomic<std::uint64_t> terms_{0};
};

}  // namespace kcl::assignment
