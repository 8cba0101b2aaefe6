// WorkerTakesAssignment: the worker-takes strategy (LeaseAssignment::kWorkerTakes; see
// assignment_strategy.h, lease_taker.h and lease_renewer.h) on real time, its two passes on
// lanes of their own (renewals must not wait behind a slow table scan):
//  - renewer: run_renew_pass() every renew_interval (jittered), and sooner when a held
//    lease's deadline would come first, so a lease that cannot be renewed is given up on time;
//  - taker: run_take_pass() every take_interval (jittered), and at
//    TakePassResult::next_expiry when a lease looks abandoned (so a crashed worker's leases go
//    within failover + take interval of the crash).
//
// RenewalHold is its hold rule: failover_time - lost_lease_margin after the start of the
// lease's last successful write.
//
// Thread safety: as AssignmentStrategy.
#pragma once

#include <memory>
#include <mutex>
#include <random>

#include "assignment/assignment_strategy.h"
#include "assignment/coordinator.h"
#include "assignment/lease_renewer.h"
#include "assignment/lease_taker.h"
#include "coordination/reported_series.h"

namespace kcl::assignment {

class RenewalHold final : public leases::HoldPolicy {
 public:
  explicit RenewalHold(const LeaseConfig& config) : config_(config) {}
  Clock::MonoTime deadline(const leases::HoldState& state) const override {
    return leases::hold_deadline(state.renewed_at, config_);
  }

 private:
  const LeaseConfig config_;
};

class WorkerTakesAssignment final : public AssignmentStrategy {
 public:
  WorkerTakesAssignment(const LeaseConfig& config, const AssignmentParts& parts);
  ~WorkerTakesAssignment() override;

  leases::HeldLeases& held() override { return held_; }
  Status prepare() override { return Status::Ok(); }
  void start() override { runner_.start(); }
  void drain() override { taker_.stop_taking(); }
  void leases_changed() override {}
  void stop() override { runner_.stop(); }
  Status leave() override { return Status::Ok(); }
  bool runs_periodic_shard_sync() const override { return true; }
  std::string directory_note() const override {
    return "none: worker-takes assignment keeps no directory of the workers' status endpoints, "
           "so lag and records/s are shown for this worker's shards only";
  }
  AssignmentReport report() const override;

  LeaseTaker& taker() { return taker_; }
  RenewPassResult renew_pass() { return run_renew_pass(held_, config_); }

 private:
  Clock::MonoTime renew_step();
  Clock::MonoTime take_step();
  std::chrono::milliseconds jittered(std::chrono::milliseconds base);

  const LeaseConfig config_;
  const Clock& clock_;
  MetricsSink& metrics_;
  leases::HeldLeases held_;
  LeaseTaker taker_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_;  // guarded by rng_mu_
  // The take and renew passes failing in a row (a Scan denied, the table throttled): logged
  // once per series with the count, and reported (AssignmentReport::failing, /healthz).
  coordination::ReportedSeries takes_;
  coordination::ReportedSeries renewals_;
  mutable std::mutex report_mu_;
  std::vector<OrphanedLease> orphaned_;  // guarded by report_mu_: the last take pass's
  Coordinator runner_;  // the renew pass on its renew lane, the take pass on its poll lane
};

}  // namespace kcl::assignment
