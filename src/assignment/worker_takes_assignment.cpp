#include "assignment/worker_takes_assignment.h"

#include <algorithm>

#include "base/jitter.h"

namespace kcl::assignment {

using std::chrono::milliseconds;

namespace {

// A pass of worker-takes as one call on its lane: the passes share nothing but HeldLeases and
// the store, so the coordinator only times them.
CallTask<Clock::MonoTime> on_lane(CallRunner* runner, Lane lane,
                                  std::function<Clock::MonoTime()> pass) {
  co_return co_await call(runner, lane, std::move(pass));
}

}  // namespace

WorkerTakesAssignment::WorkerTakesAssignment(const LeaseConfig& config,
                                             const AssignmentParts& parts)
    : config_(config),
      clock_(*parts.clock),
      metrics_(*parts.metrics),
      held_(*parts.store, config, *parts.clock, *parts.metrics,
            std::make_shared<RenewalHold>(config)),
      taker_(held_, *parts.store, config, *parts.clock, *parts.metrics, parts.seed),
      rng_(parts.seed ^ 0x5851f42d4c957f2dULL),
      takes_("take_pass", "lease take pass", "worker " + config.worker_id, parts.logger,
             *parts.metrics, *parts.clock),
      renewals_("renew_pass", "lease renewal pass", "worker " + config.worker_id, parts.logger,
                *parts.metrics, *parts.clock),
      runner_(*parts.clock,
              {[this] { return on_lane(&runner_, Lane::kRenew, [this] { return renew_step(); }); },
               [this] { return on_lane(&runner_, Lane::kPoll, [this] { return take_step(); }); }}) {
}

WorkerTakesAssignment::~WorkerTakesAssignment() { runner_.stop(); }

milliseconds WorkerTakesAssignment::jittered(milliseconds base) {
  std::lock_guard<std::mutex> lock(rng_mu_);
  return base::jittered(base, config_.interval_jitter, rng_);
}

Clock::MonoTime WorkerTakesAssignment::renew_step() {
  const auto started = clock_.now();
  renewals_.record(renew_pass().status);
  auto next = started + jittered(config_.effective_renew_interval());
  if (auto deadline = held_.next_deadline()) {
    // Wake at the deadline (a pass then gives up what could not be renewed) -- not in a busy
    // loop if it is past.
    next = std::min(next, std::max(*deadline, clock_.now() + milliseconds(10)));
  }
  return next;
}

Clock::MonoTime WorkerTakesAssignment::take_step() {
  TakePassResult r = taker_.run_take_pass();
  takes_.record(r.status);
  if (r.status.ok()) {
    metrics_.gauge("fleet.leases_unheld", r.unheld, {});
    std::lock_guard<std::mutex> lock(report_mu_);
    orphaned_ = std::move(r.orphaned);
  }
  // Not sooner after a pass cut short by the ramp: see TakePassResult::limited_by_ramp.
  auto next = clock_.now() + jittered(config_.effective_take_interval());
  // A lease looks abandoned: look again the moment it expires.
  if (r.next_expiry) next = std::min(next, *r.next_expiry + milliseconds(1));
  return next;
}

AssignmentReport WorkerTakesAssignment::report() const {
  AssignmentReport r;
  r.strategy = "worker-takes";
  for (const coordination::ReportedSeries* s : {&takes_, &renewals_}) {
    if (auto since = s->series().since()) {
      r.failing.push_back(
          {s->operation(), s->series().consecutive(), *since, s->series().last_failure()});
    }
  }
  std::lock_guard<std::mutex> lock(report_mu_);
  for (const OrphanedLease& o : orphaned_) r.unheld.push_back({o.lease_key, o.owner, o.since});
  return r;
}

}  // namespace kcl::assignment
