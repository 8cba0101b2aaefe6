#include "leases/lease_coordinator.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <thread>
#include <utility>

#include "leases/lease_digest.h"

namespace kcl::leases {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

std::string ms_text(Clock::MonoTime::duration d) {
  return std::to_string(duration_cast<milliseconds>(d).count()) + " ms";
}

}  // namespace

std::string_view LeaseCoordinator::op_name(WriteKind kind) {
  switch (kind) {
    case WriteKind::kRenew:
      return "renew";
    case WriteKind::kCheckpoint:
      return "checkpoint";
    case WriteKind::kRelease:
      return "release";
    case WriteKind::kRefresh:
      return "refresh";
    case WriteKind::kHandoff:
      return "handoff";
  }
  return "write";
}

LeaseCoordinator::LeaseCoordinator(LeaseStore& store, LeaseConfig config, const Clock& clock,
                                   MetricsSink& metrics, std::uint64_t seed)
    : store_(store), config_(std::move(config)), clock_(clock), metrics_(metrics), rng_(seed) {
  assert(config_.validate().empty());
}

void LeaseCoordinator::set_listener(LeaseListener* listener) { listener_.store(listener); }

Clock::MonoTime LeaseCoordinator::deadline_of(const Held& h) const {
  if (leader_mode()) {
    // One membership holds every lease (see membership.h); no basis, nothing held.
    if (!membership_basis_) return Clock::MonoTime::min();
    auto d = *membership_basis_ + config_.failover_time - config_.effective_lost_lease_margin();
    if (h.handoff_seen_at) {
      const auto margin = std::max<std::chrono::milliseconds>(
          config_.poll_interval * 2, config_.effective_lost_lease_margin());
      d = std::min(d, *h.handoff_seen_at + config_.handoff_timeout - margin);
    }
    return d;
  }
  return h.renewed_at + config_.failover_time - config_.effective_lost_lease_margin();
}

std::shared_ptr<LeaseCoordinator::Held> LeaseCoordinator::find_held(std::string_view key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(key);
  return it == held_.end() ? nullptr : it->second;
}

bool LeaseCoordinator::drop_held(const std::shared_ptr<Held>& h) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(h->lease.lease_key);
  if (it == held_.end() || it->second != h) return false;
  held_.erase(it);
  return true;
}

void LeaseCoordinator::notify_lost(std::vector<PendingLoss> losses) {
  if (losses.empty()) return;
  metrics_.count("leases.lost", static_cast<double>(losses.size()), {});
  LeaseListener* listener = listener_.load();
  if (listener != nullptr) {
    for (const auto& loss : losses) listener->on_lease_lost(loss.key, loss.reason);
  }
  report_held_gauge();
}

void LeaseCoordinator::report_held_gauge() {
  metrics_.gauge("leases.held", static_cast<double>(held_count()), {});
}

std::vector<Lease> LeaseCoordinator::held_leases() const {
  auto now = clock_.now();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Lease> out;
  out.reserve(held_.size());
  for (const auto& [key, h] : held_) {
    if (now < deadline_of(*h)) out.push_back(h->lease);
  }
  return out;
}

std::optional<Lease> LeaseCoordinator::held_lease(std::string_view lease_key) const {
  auto now = clock_.now();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(lease_key);
  if (it == held_.end() || now >= deadline_of(*it->second)) return std::nullopt;
  return it->second->lease;
}

std::optional<std::uint64_t> LeaseCoordinator::tenure_of(std::string_view lease_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(lease_key);
  if (it == held_.end()) return std::nullopt;
  return it->second->tenure;
}

bool LeaseCoordinator::holds(std::string_view lease_key) const {
  return held_lease(lease_key).has_value();
}

std::size_t LeaseCoordinator::held_count() const {
  auto now = clock_.now();
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<std::size_t>(std::count_if(
      held_.begin(), held_.end(), [&](const auto& kv) { return now < deadline_of(*kv.second); }));
}

std::optional<Clock::MonoTime> LeaseCoordinator::next_deadline() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<Clock::MonoTime> earliest;
  for (const auto& [key, h] : held_) {
    auto d = deadline_of(*h);
    if (!earliest || d < *earliest) earliest = d;
  }
  return earliest;
}

// ---- the held-lease writer, step by step ----

// One fenced write in progress (write_held and its steps).
struct LeaseCoordinator::WriteContext {
  std::shared_ptr<Held> h;
  WriteKind kind;
  Lease current;  // as this worker holds it: the write's condition
  Clock::MonoTime deadline;
  std::vector<PendingLoss>& losses;
  std::optional<Lease> handoff_seen;  // a re-read found a handoff: told after the locks
};

// Drops the lease (if it is still the one held) and reports the loss, except for a release,
// which the caller asked for.
Status LeaseCoordinator::give_up(WriteContext& w, std::string why) {
  Status reason(StatusCode::kLeaseLost, std::move(why));
  if (drop_held(w.h) && w.kind != WriteKind::kRelease) {
    w.losses.push_back({w.current.lease_key, reason});
  }
  return reason;
}

// Re-reads the lease (consistent read). Still ours (as owner, or as checkpoint owner while a
// handoff is pending): the counter, checkpoint and pending checkpoint in the table moved only
// through this worker's own writes whose results it did not see (e.g. a timeout after
// DynamoDB applied a renewal or checkpoint), or through the leader starting a handoff, which
// moves only the owners. Writes of this worker to this lease are serialized by write_mu, so
// nothing else of ours is in flight: adopt what the table holds. The deadline is not
// extended by the unseen write. Otherwise the lease is lost.
Result<Lease> LeaseCoordinator::reread_held(WriteContext& w) {
  const std::string& key = w.current.lease_key;
  auto fresh = store_.get_lease(key);
  if (!fresh.ok()) return fresh.status();
  if (!fresh->has_value()) return give_up(w, "the lease for " + key + " no longer exists");
  const Lease& now_in_table = **fresh;
  if (now_in_table.actual_owner() == worker_id()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = held_.find(key);
      if (it != held_.end() && it->second == w.h) w.h->lease = now_in_table;
    }
    if (now_in_table.checkpoint_owner && now_in_table.lease_owner &&
        *now_in_table.lease_owner != worker_id()) {
      w.handoff_seen = now_in_table;
    }
    return now_in_table;
  }
  if (now_in_table.actual_owner()) {
    return give_up(w, "the lease for " + key + " was taken by " + *now_in_table.actual_owner() +
                          " (leaseCounter " + std::to_string(w.current.lease_counter) + " -> " +
                          std::to_string(now_in_table.lease_counter) + "); worker " + worker_id() +
                          " no longer holds it");
  }
  return give_up(w, "the lease for " + key + " was released (no owner, leaseCounter " +
                        std::to_string(now_in_table.lease_counter) + "); worker " + worker_id() +
                        " no longer holds it");
}

// The store call of one attempt, conditional on w.current.
Result<Lease> LeaseCoordinator::store_write(WriteContext& w, const CheckpointFields* fields) {
  switch (w.kind) {
    case WriteKind::kRenew:
      return store_.renew_lease(w.current);
    case WriteKind::kCheckpoint:
      return store_.update_checkpoint(w.current, *fields);
    case WriteKind::kRelease:
      return store_.evict_lease(w.current);
    case WriteKind::kHandoff:
      if (w.current.checkpoint_owner != worker_id()) {
        return Status(
            StatusCode::kFailedPrecondition,
            "lease " + w.current.lease_key + " is not being handed off by worker " + worker_id());
      }
      return store_.evict_lease(w.current);  // removes checkpointOwner only
    case WriteKind::kRefresh:
      break;
  }
  return Status(StatusCode::kInternal, "a refresh is a read, not a write");
}

// A write landed: a release or handoff ends the hold; anything else is the held lease now
// (a renewal at `start`).
void LeaseCoordinator::record_write(WriteContext& w, const Lease& written, Clock::MonoTime start) {
  if (w.kind == WriteKind::kRelease || w.kind == WriteKind::kHandoff) {
    drop_held(w.h);
    metrics_.count(w.kind == WriteKind::kRelease ? "leases.released" : "leases.handed_off", 1, {});
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = held_.find(written.lease_key);
    if (it != held_.end() && it->second == w.h) {
      w.h->lease = written;
      w.h->renewed_at = start;
      if (w.kind == WriteKind::kCheckpoint) w.h->checkpointed_at = start;
    }
  }
  if (w.kind == WriteKind::kRenew) {
    metrics_.timing("leases.renew_latency", clock_.now() - start, {});
  }
}

// A release or handoff whose outcome is unknown (its answer was lost): the lease is read
// again, and when neither owner attribute names this worker any more the write landed (or
// someone took the lease meanwhile): either way this worker lets go now, rather than hold a
// lease another worker may start on. Empty when it is still ours or the read failed.
std::optional<Result<Lease>> LeaseCoordinator::letting_go_landed(WriteContext& w) {
  auto fresh = store_.get_lease(w.current.lease_key);
  if (!fresh.ok()) return std::nullopt;
  if (fresh->has_value() && (*fresh)->actual_owner() == worker_id()) return std::nullopt;
  record_write(w, fresh->value_or(w.current), clock_.now());
  if (!fresh->has_value()) {
    return Result<Lease>(Status(StatusCode::kLeaseLost,
                                "the lease for " + w.current.lease_key + " no longer exists"));
  }
  return Result<Lease>(**fresh);
}

// One fenced write to a held lease; see the class comment for the rules. Losses found on the
// way are appended to `losses` for the caller to report once no lock is held.
Result<Lease> LeaseCoordinator::write_held(std::string_view key, WriteKind kind,
                                           const CheckpointFields* fields,
                                           std::optional<std::uint64_t> tenure,
                                           std::vector<PendingLoss>& losses) {
  std::shared_ptr<Held> h = find_held(key);
  if (!h) {
    return Status(StatusCode::kLeaseLost,
                  "worker " + worker_id() + " does not hold the lease for " + std::string(key));
  }
  if (tenure && h->tenure != *tenure) {
    // Not a loss of the current tenure: nothing to drop or report.
    return Status(StatusCode::kLeaseLost,
                  "worker " + worker_id() + " lost the lease for " + std::string(key) +
                      " and took it again since this writer began (tenure " +
                      std::to_string(*tenure) + ", now " + std::to_string(h->tenure) +
                      "); only the new tenure may write to it");
  }
  WriteContext w{h, kind, {}, {}, losses, std::nullopt};
  // A handoff found by a re-read is told to the listener once every lock is released (the
  // notice is destroyed after write_lock).
  struct HandoffNotice {
    LeaseCoordinator* self;
    WriteContext* w;
    ~HandoffNotice() {
      if (w->handoff_seen) self->note_handoff(w->h, *w->handoff_seen);
    }
  } handoff_notice{this, &w};
  std::unique_lock<std::mutex> write_lock(h->write_mu, std::defer_lock);
  if (kind == WriteKind::kRenew) {
    // A checkpoint or release of this lease is in flight: it renews the lease if it succeeds,
    // and a failed one leaves the deadline where it was. Skip rather than block the pass.
    if (!write_lock.try_lock()) return Status(StatusCode::kCancelled, "write in progress");
  } else {
    write_lock.lock();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = held_.find(key);
    if (it == held_.end() || it->second != h) {
      return Status(StatusCode::kLeaseLost,
                    "worker " + worker_id() + " does not hold the lease for " + std::string(key));
    }
    w.current = h->lease;
    w.deadline = deadline_of(*h);
  }
  if (clock_.now() >= w.deadline) {
    return give_up(w, "the lease for " + w.current.lease_key + " was not renewed by worker " +
                          worker_id() + " for " +
                          ms_text(config_.failover_time - config_.effective_lost_lease_margin()) +
                          " and may be taken by another worker");
  }
  if (kind == WriteKind::kRefresh) return reread_held(w);

  const std::string op(op_name(kind));
  constexpr int kAttempts = 3;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const auto start = clock_.now();
    Result<Lease> written = store_write(w, fields);
    if (written.ok()) {
      record_write(w, *written, start);
      return written;
    }
    if (written.status().code() != StatusCode::kConditionFailed) {
      // Transient (or worse): the lease stays held until its deadline, unless that has
      // passed while we were waiting.
      if (kind == WriteKind::kRelease || kind == WriteKind::kHandoff) {
        if (auto landed = letting_go_landed(w)) return *landed;
        return written.status();
      }
      if (clock_.now() >= w.deadline) {
        return give_up(w, "the lease for " + w.current.lease_key +
                              " could not be renewed by worker " + worker_id() +
                              " before its deadline (" + written.status().to_string() + ")");
      }
      return written.status();
    }
    const MetricTag tag{"operation", op};
    metrics_.count("leases.failed_conditions", 1, MetricTags(&tag, 1));
    auto fresh = reread_held(w);
    if (!fresh.ok()) return fresh.status();
    w.current = std::move(fresh).value();
  }
  return Status(StatusCode::kUnavailable, op + " of lease " + w.current.lease_key +
                                              ": the condition kept failing while this worker "
                                              "still owns it; try again");
}

RenewPassResult LeaseCoordinator::run_renew_pass() {
  RenewPassResult result;
  if (leader_mode()) return result;  // the membership's heartbeat holds every lease
  // A lease checkpointed within the last half renew interval counts as renewed (the
  // checkpoint moved its counter): the next pass, at most about 1.5 intervals after that
  // write, renews it.
  const auto now = clock_.now();
  const auto recent = config_.effective_renew_interval() / 2;
  std::vector<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    keys.reserve(held_.size());
    for (const auto& [key, h] : held_) {
      if (h->checkpointed_at && now - *h->checkpointed_at < recent && now < deadline_of(*h)) {
        ++result.skipped;
        continue;
      }
      keys.push_back(key);
    }
  }
  // Renewals run in parallel (each call has a deadline shorter than the renew interval), so
  // one stalled connection delays no other lease's renewal.
  std::mutex result_mu;
  auto renew_one = [&](const std::string& key) {
    std::vector<PendingLoss> losses;
    auto renewed = write_held(key, WriteKind::kRenew, nullptr, std::nullopt, losses);
    {
      std::lock_guard<std::mutex> lock(result_mu);
      if (renewed.ok()) {
        ++result.renewed;
      } else if (renewed.status().code() == StatusCode::kLeaseLost) {
        if (!losses.empty()) result.lost.push_back(key);
      } else if (renewed.status().code() != StatusCode::kCancelled) {
        ++result.failed;
        if (result.status.ok()) result.status = renewed.status();
      }
    }
    notify_lost(std::move(losses));
  };
  constexpr std::size_t kParallel = 8;
  if (keys.size() <= 1 || config_.renew_parallelism <= 1) {
    for (const auto& key : keys) renew_one(key);
  } else {
    const std::size_t lanes =
        std::min({kParallel, keys.size(), static_cast<std::size_t>(config_.renew_parallelism)});
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> threads;
    threads.reserve(lanes);
    for (std::size_t t = 0; t < lanes; ++t) {
      threads.emplace_back([&] {
        for (std::size_t i = next++; i < keys.size(); i = next++) renew_one(keys[i]);
      });
    }
    for (auto& t : threads) t.join();
  }
  std::sort(result.lost.begin(), result.lost.end());
  report_held_gauge();
  return result;
}

Result<Lease> LeaseCoordinator::update_checkpoint(std::string_view lease_key,
                                                  const CheckpointFields& fields,
                                                  std::optional<std::uint64_t> tenure) {
  std::vector<PendingLoss> losses;
  auto written = write_held(lease_key, WriteKind::kCheckpoint, &fields, tenure, losses);
  notify_lost(std::move(losses));
  // result: ok; lease_lost (refused: another owner or tenure); error (anything else).
  const StatusCode code = written.ok() ? StatusCode::kOk : written.status().code();
  const MetricTag tag{"result", code == StatusCode::kOk          ? "ok"
                                : code == StatusCode::kLeaseLost ? "lease_lost"
                                                                 : "error"};
  metrics_.count("checkpoint.result", 1, MetricTags(&tag, 1));
  return written;
}

Result<Lease> LeaseCoordinator::refresh_held(std::string_view lease_key,
                                             std::optional<std::uint64_t> tenure) {
  std::vector<PendingLoss> losses;
  auto fresh = write_held(lease_key, WriteKind::kRefresh, nullptr, tenure, losses);
  notify_lost(std::move(losses));
  return fresh;
}

Status LeaseCoordinator::release(std::string_view lease_key) {
  std::vector<PendingLoss> losses;
  auto released = write_held(lease_key, WriteKind::kRelease, nullptr, std::nullopt, losses);
  report_held_gauge();
  return released.status();
}

Status LeaseCoordinator::release_all() {
  stop_taking();
  // A take pass already running may still take a lease; wait for it to end so that lease is
  // in the held set below and handed back too.
  { std::lock_guard<std::mutex> pass_done(take_mu_); }
  std::vector<std::pair<std::string, std::shared_ptr<Held>>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, h] : held_) all.emplace_back(key, h);
  }
  Status first;
  for (const auto& [key, h] : all) {
    Status s = release(key);
    if (!s.ok() && s.code() != StatusCode::kLeaseLost) {
      if (first.ok()) first = s;
      drop_held(h);  // it will expire after failover_time
    }
  }
  report_held_gauge();
  return first;
}

void LeaseCoordinator::stop_taking() { taking_stopped_.store(true); }

void LeaseCoordinator::gain(const Lease& taken, Clock::MonoTime start) {
  auto h = std::make_shared<Held>();
  h->lease = taken;
  h->renewed_at = start;
  {
    std::lock_guard<std::mutex> lock(mu_);
    h->tenure = next_tenure_++;
    held_[taken.lease_key] = h;
  }
  LeaseListener* listener = listener_.load();
  if (listener != nullptr) listener->on_lease_gained(taken);
}

bool LeaseCoordinator::try_take(const Lease& seen, bool steal, TakePassResult& result) {
  const auto start = clock_.now();
  auto taken = store_.take_lease(seen, worker_id());
  if (taken.ok()) {
    observed_[seen.lease_key] = Observed{taken->lease_counter, clock_.now(), pass_generation_};
    if (steal) {
      result.stolen.push_back(seen.lease_key);
      metrics_.count("leases.stolen", 1, {});
    } else {
      result.taken.push_back(seen.lease_key);
      metrics_.count("leases.taken", 1, {});
    }
    gain(taken.value(), start);
    return true;
  }
  if (taken.status().code() == StatusCode::kConditionFailed) {
    ++result.failed_conditions;
    const MetricTag tag{"operation", steal ? "steal" : "take"};
    metrics_.count("leases.failed_conditions", 1, MetricTags(&tag, 1));
    return true;
  }
  if (result.status.ok()) result.status = taken.status();
  return false;  // the store is in trouble: leave the rest for the next pass
}

// ---- the take pass (kWorkerTakes), step by step ----

// What one take pass works from: the scan, when each lease's counter was first seen, what
// this worker holds, and the classification of the rest.
struct LeaseCoordinator::TakeView {
  struct HeldView {
    std::shared_ptr<Held> held;
    std::int64_t counter;
    bool current;  // not past its deadline
  };
  Clock::MonoTime now;
  std::vector<const Observed*> seen;  // parallel to the scanned leases
  std::unordered_map<std::string, HeldView> held;
  std::vector<const Lease*> available;               // free, expired, or ours but not held
  std::unordered_map<std::string_view, int> counts;  // other live owners -> leases
  int mine = 0;                                      // held and current
};

// Records when each counter was first seen (forgetting leases that are gone) and what this
// worker holds. (References into an unordered_map stay valid when it rehashes.)
void LeaseCoordinator::observe(const std::vector<Lease>& leases, TakeView& view) {
  const std::uint64_t generation = ++pass_generation_;
  view.seen.reserve(leases.size());
  for (const auto& lease : leases) {
    auto [it, inserted] = observed_.try_emplace(lease.lease_key);
    Observed& o = it->second;
    if (inserted || o.counter != lease.lease_counter) {
      o.counter = lease.lease_counter;
      o.changed_at = view.now;
    }
    o.generation = generation;
    view.seen.push_back(&o);
  }
  if (observed_.size() != leases.size()) {
    std::erase_if(observed_, [&](const auto& kv) { return kv.second.generation != generation; });
  }
  std::lock_guard<std::mutex> lock(mu_);
  view.held.reserve(held_.size());
  for (const auto& [key, h] : held_) {
    view.held.emplace(key,
                      TakeView::HeldView{h, h->lease.lease_counter, view.now < deadline_of(*h)});
  }
}

// A held lease that the table shows with a newer counter and another (or no) owner was taken
// or released by someone else: give it up now rather than at the next renewal. Leases with a
// write of ours in flight are left to that write.
void LeaseCoordinator::drop_taken_elsewhere(const std::vector<Lease>& leases, TakeView& view) {
  if (view.held.empty()) return;
  std::vector<PendingLoss> losses;
  for (const auto& lease : leases) {
    if (lease.lease_owner == worker_id()) continue;
    auto it = view.held.find(lease.lease_key);
    if (it == view.held.end() || lease.lease_counter <= it->second.counter) continue;
    const std::shared_ptr<Held>& h = it->second.held;
    std::unique_lock<std::mutex> write_lock(h->write_mu, std::try_to_lock);
    if (!write_lock.owns_lock()) continue;
    std::int64_t held_counter;
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_counter = h->lease.lease_counter;
    }
    if (lease.lease_counter > held_counter && drop_held(h)) {
      it->second.current = false;
      losses.push_back(
          {lease.lease_key,
           Status(StatusCode::kLeaseLost,
                  "the lease for " + lease.lease_key + " was " +
                      (lease.lease_owner ? "taken by " + *lease.lease_owner : "released") +
                      " (leaseCounter " + std::to_string(held_counter) + " -> " +
                      std::to_string(lease.lease_counter) + "); worker " + worker_id() +
                      " no longer holds it")});
    }
  }
  notify_lost(std::move(losses));
}

// Held by this worker, available (free, expired, or this worker's in the table but not
// held), or held by another live worker; notes when the first suspect lease expires.
void LeaseCoordinator::classify(const std::vector<Lease>& leases, TakeView& view,
                                TakePassResult& result) {
  for (const auto& [key, held] : view.held) {
    if (held.current) ++view.mine;
  }
  const auto suspect_after = config_.effective_renew_interval() * 3 / 2;
  for (std::size_t i = 0; i < leases.size(); ++i) {
    const Lease& lease = leases[i];
    if (view.held.count(lease.lease_key)) continue;
    if (!lease.lease_owner || *lease.lease_owner == worker_id()) {
      view.available.push_back(&lease);
      continue;
    }
    const auto since = view.now - view.seen[i]->changed_at;
    if (since >= config_.failover_time) {
      view.available.push_back(&lease);
    } else {
      ++view.counts[*lease.lease_owner];
      if (since > suspect_after) {
        const auto expiry = view.now - since + config_.failover_time;
        if (!result.next_expiry || expiry < *result.next_expiry) result.next_expiry = expiry;
      }
    }
  }
  result.held_before = view.mine;
  result.available = static_cast<int>(view.available.size());
  result.workers_seen = static_cast<int>(view.counts.size()) + 1;
}

// Free and expired leases, in random order, up to what is needed and the start-up ramp.
void LeaseCoordinator::take_available(TakeView& view, int needed, TakePassResult& result) {
  std::shuffle(view.available.begin(), view.available.end(), rng_);
  int limit = needed;
  if (config_.take_ramp_floor > 0) {
    limit = std::min(limit, std::max(config_.take_ramp_floor, view.mine));
  }
  const int to_take = std::min<int>(limit, static_cast<int>(view.available.size()));
  result.limited_by_ramp = to_take < needed && to_take < static_cast<int>(view.available.size());
  for (int i = 0; i < to_take; ++i) {
    if (!try_take(*view.available[static_cast<std::size_t>(i)], false, result)) break;
  }
}

// Nothing free or expired: steal from the most loaded worker (the Java KCL's rule).
void LeaseCoordinator::steal(const std::vector<Lease>& leases, const TakeView& view, int target,
                             int needed, TakePassResult& result) {
  int most = 0;
  std::vector<std::string> most_loaded;
  for (const auto& [owner, count] : view.counts) {
    if (count > most) {
      most = count;
      most_loaded.assign(1, std::string(owner));
    } else if (count == most) {
      most_loaded.push_back(std::string(owner));
    }
  }
  // Iteration order of the hash map must not decide between equals: sort, then pick at random.
  std::sort(most_loaded.begin(), most_loaded.end());
  if (most_loaded.empty() || most < target) return;
  int steal = std::min(needed, most - target);
  if (needed > 1 && steal == 0) steal = 1;
  steal = std::min(steal, config_.max_leases_to_steal_at_once);
  if (steal <= 0) return;
  std::uniform_int_distribution<std::size_t> pick(0, most_loaded.size() - 1);
  const std::string victim = most_loaded[pick(rng_)];
  std::vector<const Lease*> candidates;
  for (const auto& lease : leases) {
    if (lease.lease_owner == victim) candidates.push_back(&lease);
  }
  std::shuffle(candidates.begin(), candidates.end(), rng_);
  int attempted = 0;
  for (const Lease* candidate : candidates) {
    if (attempted >= steal) break;
    ++attempted;
    // The scan may be seconds old: steal on a consistent read of the lease, so that the take
    // is conditional on its current counter.
    auto fresh = store_.get_lease(candidate->lease_key);
    if (!fresh.ok()) {
      if (result.status.ok()) result.status = fresh.status();
      break;
    }
    if (!fresh->has_value() || (*fresh)->lease_owner != victim) continue;
    if (!try_take(**fresh, true, result)) break;
  }
}

TakePassResult LeaseCoordinator::run_take_pass() {
  std::lock_guard<std::mutex> pass_lock(take_mu_);
  TakePassResult result;
  if (taking_stopped_.load()) return result;

  auto listed = store_.list_leases();
  if (!listed.ok()) {
    result.status = listed.status().with_context("listing leases: ");
    return result;
  }
  const std::vector<Lease>& leases = listed.value();
  result.leases_seen = static_cast<int>(leases.size());
  TakeView view;
  view.now = clock_.now();
  observe(leases, view);
  drop_taken_elsewhere(leases, view);
  classify(leases, view, result);

  const int total = result.leases_seen;
  if (total == 0) return result;
  const int workers = result.workers_seen;
  int target = workers >= total ? 1 : (total + workers - 1) / workers;
  target = std::min(target, config_.max_leases_per_worker);
  result.target = target;
  const int needed = target - view.mine;
  if (needed > 0) {
    if (!view.available.empty()) {
      take_available(view, needed, result);
    } else {
      steal(leases, view, target, needed, result);
    }
  }
  report_held_gauge();
  return result;
}

// ---- kLeader ----

void LeaseCoordinator::set_membership_basis(std::optional<Clock::MonoTime> basis,
                                            const Status& reason) {
  std::vector<PendingLoss> losses;
  {
    std::lock_guard<std::mutex> lock(mu_);
    membership_basis_ = basis;
    if (!basis) {
      const Status why = reason.ok() ? Status(StatusCode::kLeaseLost,
                                              "worker " + worker_id() + " lost its membership")
                                     : Status(StatusCode::kLeaseLost, reason.message());
      for (const auto& [key, h] : held_) {
        losses.push_back({key, why});
        given_up_.insert(key);
      }
      for (const auto& [key, in] : incoming_) given_up_.insert(key);
      held_.clear();
      incoming_.clear();
    }
  }
  notify_lost(std::move(losses));
}

std::vector<std::string> LeaseCoordinator::given_up() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {given_up_.begin(), given_up_.end()};
}

void LeaseCoordinator::note_handoff(const std::shared_ptr<Held>& h, const Lease& fresh) {
  if (!fresh.lease_owner) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = held_.find(fresh.lease_key);
    if (it == held_.end() || it->second != h || h->handoff_told) return;
    h->handoff_told = true;
    h->handoff_seen_at = clock_.now();
  }
  metrics_.count("leases.handoffs_requested", 1, {});
  LeaseListener* listener = listener_.load();
  if (listener != nullptr) listener->on_handoff_requested(fresh.lease_key, *fresh.lease_owner);
}

bool LeaseCoordinator::adopt(const Lease& seen, LookResult& result) {
  const auto start = clock_.now();
  auto taken = store_.take_lease(seen, worker_id());
  if (taken.ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      incoming_.erase(seen.lease_key);
    }
    metrics_.count("leases.taken", 1, {});
    result.gained.push_back(seen.lease_key);
    gain(taken.value(), start);
    return true;
  }
  if (taken.status().code() == StatusCode::kConditionFailed) {
    // Changed since it was read (the leader moved it on, or a checkpoint landed): the
    // leader posts it again if it is still meant for this worker.
    const MetricTag tag{"operation", "take"};
    metrics_.count("leases.failed_conditions", 1, MetricTags(&tag, 1));
    return true;
  }
  if (result.status.ok()) result.status = taken.status();
  return false;
}

LookResult LeaseCoordinator::look_at(const std::vector<std::string>& keys) {
  LookResult result;
  for (const std::string& key : keys) {
    auto read = store_.get_lease(key);
    if (!read.ok()) {
      if (result.status.ok())
        result.status = read.status().with_context("reading lease " + key + ": ");
      break;  // the rest stay in the inbox for the next poll
    }
    std::shared_ptr<Held> h = find_held(key);
    const bool held_now = h != nullptr && holds(key);
    if (!read->has_value()) {
      if (h && drop_held(h)) {
        notify_lost(
            {{key, Status(StatusCode::kLeaseLost, "the lease for " + key + " was deleted")}});
        result.lost.push_back(key);
      }
      result.handled.push_back(key);
      continue;
    }
    const Lease& lease = **read;
    const bool mine = lease.lease_owner == worker_id();
    const bool checkpointing_here = lease.checkpoint_owner == worker_id();
    if (held_now && lease.actual_owner() == worker_id()) {
      if (checkpointing_here && !mine) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          // The handoff itself leaves the counter alone: adopt the owners as read.
          if (h->lease.lease_counter == lease.lease_counter) h->lease = lease;
        }
        result.handoffs_requested.push_back(key);
        note_handoff(h, lease);
      }
      result.handled.push_back(key);
      continue;
    }
    if (held_now) {
      // Held here, but the table names someone else: lost (a write of ours would fail too).
      if (drop_held(h)) {
        notify_lost(
            {{key, Status(StatusCode::kLeaseLost, "the lease for " + key + " now belongs to " +
                                                      lease.actual_owner().value_or("nobody"))}});
        result.lost.push_back(key);
      }
      result.handled.push_back(key);
      continue;
    }
    if (checkpointing_here) {
      // Being handed off by this worker, which does not read it (an earlier incarnation did
      // and has stopped): nothing to finish, complete the handoff at once.
      auto done = store_.evict_lease(lease);
      if (!done.ok() && done.status().code() != StatusCode::kConditionFailed) {
        if (result.status.ok()) result.status = done.status();
        break;
      }
      result.handled.push_back(key);
      continue;
    }
    if (mine && taking_stopped_.load()) {
      // Shutting down: hand an assigned lease straight back (free again, the leader moves it
      // on); one still being handed over is left to its old owner.
      if (!lease.checkpoint_owner) {
        auto back = store_.evict_lease(lease);
        if (!back.ok() && back.status().code() != StatusCode::kConditionFailed) {
          if (result.status.ok()) result.status = back.status();
          break;
        }
      }
      result.handled.push_back(key);
      continue;
    }
    if (mine && !lease.checkpoint_owner) {
      if (!adopt(lease, result)) break;
      result.handled.push_back(key);
      continue;
    }
    if (mine) {
      // Handed to this worker; the old owner is still finishing (poll_incoming_handoffs).
      std::lock_guard<std::mutex> lock(mu_);
      incoming_.try_emplace(key, Incoming{clock_.now(), *lease.checkpoint_owner});
    }
    result.handled.push_back(key);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& key : result.handled) given_up_.erase(key);
  }
  report_held_gauge();
  return result;
}

std::vector<std::string> LeaseCoordinator::claimed_keys() const {
  const auto now = clock_.now();
  std::vector<std::string> keys;
  std::lock_guard<std::mutex> lock(mu_);
  keys.reserve(held_.size() + incoming_.size());
  for (const auto& [key, h] : held_) {
    if (now < deadline_of(*h)) keys.push_back(key);
  }
  for (const auto& [key, in] : incoming_) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

std::string LeaseCoordinator::claimed_digest() const {
  const auto now = clock_.now();
  std::vector<std::string> marked;
  std::lock_guard<std::mutex> lock(mu_);
  marked.reserve(held_.size() + incoming_.size());
  for (const auto& [key, h] : held_) {
    if (now < deadline_of(*h)) {
      marked.push_back(
          lease_claim_mark(key, h->handoff_told ? LeaseClaim::kHandingOff : LeaseClaim::kHeld));
    }
  }
  for (const auto& [key, in] : incoming_) {
    if (!held_.count(key)) marked.push_back(lease_claim_mark(key, LeaseClaim::kIncoming));
  }
  return lease_set_digest(std::move(marked));
}

bool LeaseCoordinator::has_pending_incoming() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !incoming_.empty();
}

LookResult LeaseCoordinator::poll_incoming_handoffs() {
  LookResult result;
  std::vector<std::pair<std::string, Incoming>> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.assign(incoming_.begin(), incoming_.end());
  }
  for (const auto& [key, in] : pending) {
    auto read = store_.get_lease(key);
    if (!read.ok()) {
      if (result.status.ok()) result.status = read.status();
      break;
    }
    auto forget = [&, k = key] {
      std::lock_guard<std::mutex> lock(mu_);
      incoming_.erase(k);
    };
    if (!read->has_value() || (*read)->lease_owner != worker_id() || taking_stopped_.load()) {
      forget();
      continue;
    }
    const Lease& lease = **read;
    if (!lease.checkpoint_owner) {
      if (!adopt(lease, result)) break;
      continue;
    }
    if (clock_.now() - in.since >= config_.handoff_timeout) {
      // The old owner did not finish in time: take it anyway (conditional on what was read,
      // checkpointOwner included). Its later writes fail on the counter; records after its
      // last checkpoint may be delivered twice.
      if (!adopt(lease, result)) break;
      if (holds(key)) {
        result.forced.push_back(key);
        metrics_.count("leases.handoffs_forced", 1, {});
      }
    }
  }
  return result;
}

Status LeaseCoordinator::complete_handoff(std::string_view lease_key) {
  std::vector<PendingLoss> losses;
  auto done = write_held(lease_key, WriteKind::kHandoff, nullptr, std::nullopt, losses);
  notify_lost(std::move(losses));
  report_held_gauge();
  return done.status();
}

void LeaseCoordinator::note_processed(std::string_view lease_key, std::size_t bytes) {
  if (std::shared_ptr<Held> h = find_held(lease_key)) {
    h->bytes_processed.fetch_add(bytes, std::memory_order_relaxed);
  }
}

std::map<std::string, double> LeaseCoordinator::throughput_kbps() {
  using std::chrono::duration;
  constexpr double kTimeConstantS = 30;
  const auto now = clock_.now();
  std::map<std::string, double> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, h] : held_) {
    const std::uint64_t bytes = h->bytes_processed.load(std::memory_order_relaxed);
    if (!h->sampled_at) {
      h->sampled_at = now;
      h->bytes_at_sample = bytes;
    }
    const double dt = duration<double>(now - *h->sampled_at).count();
    if (dt >= 1.0) {
      const double rate = static_cast<double>(bytes - h->bytes_at_sample) / 1024.0 / dt;
      // The first full sample sets the estimate; later ones move it by how much time passed.
      h->kbps = !h->kbps_ready ? rate : h->kbps + (rate - h->kbps) * dt / (dt + kTimeConstantS);
      h->kbps_ready = true;
      h->sampled_at = now;
      h->bytes_at_sample = bytes;
    }
    // A lease held for less than a second has no estimate yet: the leader then assumes the
    // mean of the others rather than an idle shard.
    if (h->kbps_ready) out.emplace(key, h->kbps);
  }
  return out;
}

std::map<std::string, std::string> LeaseCoordinator::pending_handoffs() const {
  std::map<std::string, std::string> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, h] : held_) {
    if (h->handoff_told && h->lease.lease_owner) out.emplace(key, *h->lease.lease_owner);
  }
  return out;
}

}  // namespace kcl::leases
