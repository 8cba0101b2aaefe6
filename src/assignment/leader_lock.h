// LeaderLock: the leader lock of the coordination table as this worker knows it.
//
// What it keeps: the lock as this worker holds it (the entry its renewals are conditional on,
// and the start of the last renewal, which bounds its hold: Membership::set_leader_basis), the
// lock as last read (and when it last changed, from which a lapse is judged), the holder this
// worker took it from (fenced by the next leader pass), and a take whose answer was lost
// (while that is unknown, this worker holds its leases only as long as a leader holding a lock
// taken then would).
//
// The rules:
//  - Take the lock when nobody holds it, when it names this worker, or when it has not moved
//    for failover_time (observe() says so; try_lead() takes it, conditional on what was read).
//  - A leader that loses the lock (someone else's take landed) or cannot renew it within its
//    hold gives its incarnation up too (every lease): the next leader may fence it at once.
//  - Handing the lock back at a graceful stop (hand_back(), release()) keeps the incarnation.
//
// Thread safety: belongs to the thread that runs the agent's steps (the coordinator); its
// calls run on the renew lane (renewals, release) and the poll lane (a take, as the read that
// decided it). leading() may be read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "assignment/call_task.h"
#include "assignment/membership.h"
#include "coordination/coordination_store.h"
#include "coordination/reported_series.h"
#include "kcl/clock.h"
#include "kcl/lease_config.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"

namespace kcl::assignment {

class LeaderLock {
 public:
  // Everything given must outlive the lock; `logger` may be null.
  LeaderLock(coordination::CoordinationStore& coordination, Membership& membership,
             const LeaseConfig& config, const Clock& clock, MetricsSink& metrics, Logger* logger);

  // Where the calls run (null: inline).
  void set_call_runner(CallRunner* runner) { runner_ = runner; }
  // Called (on the coordinator's thread) each time this worker begins to lead. Set before use.
  void set_on_elected(std::function<void()> fn) { on_elected_ = std::move(fn); }

  // What a read of the lock says.
  struct Observed {
    bool lead = false;      // try to take it (try_lead)
    bool activity = false;  // a new holder, or its call for attention moved
  };
  // The lock as a poll read it (`incarnation` is this worker's when the read was sent). A
  // stopping worker (`stopping`) never takes it.
  Observed observe(const std::optional<coordination::LeaderEntry>& seen,
                   const std::string& incarnation, Clock::MonoTime now, bool stopping);
  // Takes the lock on what was read (or renews it when the read shows this incarnation's take
  // landed unseen). True when this worker leads from now.
  CallTask<bool> try_lead(std::optional<coordination::LeaderEntry> seen, Clock::MonoTime now);
  // Renews the lock this worker holds, calling the workers' attention with the renewal when
  // `attention`; false when the renewal failed (the lock stays held until its deadline).
  CallTask<bool> renew(bool attention);
  // Stops leading; the incarnation goes too unless `abandon_incarnation` is false.
  void stop(const Status& why, bool abandon_incarnation);
  // A graceful stop: no longer the leader, and the lock handed back so that another worker
  // leads at once.
  CallTask<Done> hand_back();
  // The last step of a graceful stop: the lock released if still held. Its failure, other
  // than that someone else holds it now.
  CallTask<Status> release();

  bool held() const { return held_.has_value(); }
  bool leading() const { return leading_.load(); }
  std::uint64_t terms() const { return terms_; }
  // A take of the lock whose answer was lost is being confirmed (read the lock strongly).
  bool confirming_take() const { return taken_from_.has_value(); }
  // The holder this worker took the lock from, for the new term's first pass to fence.
  const std::optional<coordination::LeaderEntry>& previous() const { return previous_; }
  // When the lock as last read, held by someone, lapses unless it changes; empty when nobody
  // held it.
  std::optional<Clock::MonoTime> lapses_at() const;
  const coordination::ReportedSeries& renewals() const { return renewals_; }

 private:
  void log(LogLevel level, const std::string& message) const;

  coordination::CoordinationStore& coordination_;
  Membership& membership_;
  const LeaseConfig config_;
  const Clock& clock_;
  MetricsSink& metrics_;
  Logger* logger_;
  coordination::ReportedSeries renewals_;
  CallRunner* runner_ = nullptr;
  std::function<void()> on_elected_;

  std::optional<coordination::LeaderEntry> held_;
  // The lock as held when its hand-back failed: release() tries again at leave, so the next
  // leader does not find this (live, draining) incarnation named in it.
  std::optional<coordination::LeaderEntry> unreleased_;
  std::optional<Clock::MonoTime> basis_;           // start of the last renewal
  std::optional<coordination::LeaderEntry> seen_;  // as last read
  Clock::MonoTime changed_at_{};
  std::optional<coordination::LeaderEntry> previous_;  // before this worker took it
  std::optional<coordination::LeaderEntry>
      taken_from_;  // the lock as seen before a take whose answer was lost
  std::uint64_t terms_ = 0;
  // Read by other threads (the leader's pass on its lane, report()).
  std::atomic<bool> leading_{false};
};

}  // namespace kcl::assignment
