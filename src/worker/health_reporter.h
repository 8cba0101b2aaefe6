// worker/health_reporter.h: the worker's health as its pages, logs and gauges show it.
//
// The scheduler hands it, about once a second, what every consumer says is in its way and
// what the assignment strategy reports; it judges which shards are stalled
// (lifecycle/stall_detector.h), logs a stall when it begins, while it lasts (at its 3rd look
// and each power of ten) and when it ends, sets the gauges (shard.stalled,
// worker.shards_stalled, leader.is_leader) and keeps the stalled list the pages read.
// worker_health() puts that list together with the worker's state for /healthz, /readyz and
// the status page.
//
// Thread safety: look() and report_leading() on one thread (the scheduler); stalled_shards()
// from any thread; worker_health() is pure.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "assignment/assignment_strategy.h"
#include "kcl/clock.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"
#include "lifecycle/stall_detector.h"
#include "observability/status_server.h"

namespace kcl::worker {

// The worker's state that worker_health() reads besides its stalls.
struct WorkerState {
  std::optional<Status> ended;  // set once the worker has stopped: how it ended
  bool ready = false;           // shards synced, lease threads running, not stopping
  // The assignment's report (read only when ready).
  std::function<assignment::AssignmentReport()> report;
};

// /healthz and /readyz: live unless the worker ended with a failure; ready while `ready`,
// with the coordination calls that keep failing as warnings and `stalled` (read when ready).
observability::HealthState worker_health(const WorkerState& state,
                                         std::vector<observability::StalledShard> stalled,
                                         Clock::MonoTime now);

class HealthReporter {
 public:
  // `stall_threshold` 0 = stalls are not judged. `log` writes one line of the worker's log.
  HealthReporter(std::chrono::milliseconds stall_threshold, MetricsSink& metrics,
                 const Clock& clock, std::function<void(LogLevel, const std::string&)> log);

  // Whether stalls are judged (a threshold was set); look() is a no-op otherwise.
  bool judges_stalls() const { return detector_ != nullptr; }
  // One look: each shard this worker reads (lease key -> what is in its way, or nothing),
  // and the leases no live worker holds as the strategy sees them (unless read here).
  void look(std::map<std::string, std::optional<lifecycle::StallSignal>> signals,
            const std::vector<assignment::UnheldLease>& unheld);
  // The strategy's "am I the leader" as a gauge (the "no leader" alert); none without one.
  void report_leading(const assignment::AssignmentReport& report);

  // The stalled shards with wall-clock times, for /readyz and /status.json.
  std::vector<observability::StalledShard> stalled_shards() const;

 private:
  void report(const lifecycle::StallEvent& e, Clock::MonoTime now);

  MetricsSink& metrics_;
  const Clock& clock_;
  std::function<void(LogLevel, const std::string&)> log_;
  std::unique_ptr<lifecycle::StallDetector> detector_;  // null when stalls are not judged
  mutable std::mutex mu_;
  std::vector<lifecycle::ShardStall> stalled_;  // guarded by mu_: the detector's, copied
};

}  // namespace kcl::worker
