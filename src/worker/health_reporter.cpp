#include "worker/health_reporter.h"

#include <cstdio>

namespace kcl::worker {

HealthReporter::HealthReporter(std::chrono::milliseconds stall_threshold, MetricsSink& metrics,
                               const Clock& clock,
                               std::function<void(LogLevel, const std::string&)> log)
    : metrics_(metrics), clock_(clock), log_(std::move(log)) {
  if (stall_threshold.count() > 0) {
    detector_ = std::make_unique<lifecycle::StallDetector>(stall_threshold);
  }
}

void HealthReporter::look(std::map<std::string, std::optional<lifecycle::StallSignal>> signals,
                          const std::vector<assignment::UnheldLease>& unheld) {
  if (!detector_) return;
  const Clock::MonoTime now = clock_.now();
  // Leases another worker named as owner stopped renewing, and no one took.
  for (const assignment::UnheldLease& u : unheld) {
    if (signals.count(u.lease_key)) continue;
    signals[u.lease_key] = lifecycle::StallSignal{
        lifecycle::kStallNoLiveOwner,
        "lease held by worker " + u.owner + ", which stopped renewing it " +
            lifecycle::seconds_text(now - u.since) + " ago; no live worker holds it",
        u.since};
  }
  const std::vector<lifecycle::StallEvent> events = detector_->look(now, signals);
  std::vector<lifecycle::ShardStall> stalled = detector_->stalled();
  metrics_.gauge("worker.shards_stalled", static_cast<double>(stalled.size()), {});
  {
    std::lock_guard<std::mutex> lock(mu_);
    stalled_ = std::move(stalled);
  }
  for (const auto& e : events) report(e, now);
}

// A stall is logged when it begins, at its 3rd look and each power of ten while it lasts
// (base/repeat_report.h), and when it ends; the gauge is 1 while it lasts.
void HealthReporter::report(const lifecycle::StallEvent& e, Clock::MonoTime now) {
  const lifecycle::ShardStall& s = e.stall;
  const MetricTag tags[] = {{"shard", s.shard}, {"cause", s.cause}};
  const std::string lasted = lifecycle::seconds_text(now - s.since);
  switch (e.kind) {
    case lifecycle::StallEvent::Kind::kStarted:
      metrics_.gauge("shard.stalled", 1, MetricTags(tags, 2));
      log_(LogLevel::kWarn,
           "shard " + s.shard + " stalled (" + s.cause + ") for " + lasted + ": " + s.detail);
      break;
    case lifecycle::StallEvent::Kind::kContinues:
      log_(LogLevel::kWarn, "shard " + s.shard + " still stalled (" + s.cause + ") after " +
                                lasted + " (look " + std::to_string(s.looks) + "): " + s.detail);
      break;
    case lifecycle::StallEvent::Kind::kEnded:
      metrics_.gauge("shard.stalled", 0, MetricTags(tags, 2));
      log_(LogLevel::kInfo, "shard " + s.shard + " no longer stalled (" + s.cause + ", " + lasted +
                                " since it began)");
      break;
  }
}

void HealthReporter::report_leading(const assignment::AssignmentReport& report) {
  if (report.leading) metrics_.gauge("leader.is_leader", *report.leading ? 1 : 0, {});
}

std::vector<observability::StalledShard> HealthReporter::stalled_shards() const {
  std::vector<lifecycle::ShardStall> stalled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stalled = stalled_;
  }
  const auto mono_now = clock_.now();
  const auto wall_now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  std::vector<observability::StalledShard> out;
  for (const auto& s : stalled) {
    const auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(mono_now - s.since);
    out.push_back({s.shard, s.cause, s.detail, wall_now_ms - ago.count()});
  }
  return out;
}

observability::HealthState worker_health(const WorkerState& state,
                                         std::vector<observability::StalledShard> stalled,
                                         Clock::MonoTime now) {
  observability::HealthState h;
  if (state.ended && !state.ended->ok()) {
    h.live = false;
    h.live_reason = state.ended->to_string();
  }
  h.ready = h.live && state.ready;
  if (h.ready && state.report) {
    // Coordination calls that keep failing (heartbeats, polls, lock renewals, passes).
    for (const auto& f : state.report().failing) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.1f",
                    std::chrono::duration<double>(now - f.since).count());
      h.warnings.push_back(f.operation + " failing for " + secs + " s, " +
                           std::to_string(f.consecutive) +
                           " times in a row: " + f.last.to_string());
    }
  }
  if (h.ready) h.stalled = std::move(stalled);
  if (!h.ready) {
    h.ready_reason = !h.live       ? "the worker failed: " + h.live_reason
                     : state.ended ? "the worker has stopped"
                                   : "starting: syncing shards to leases, or shutting down";
  }
  return h;
}

}  // namespace kcl::worker
