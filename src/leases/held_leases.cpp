#include "leases/held_leases.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <utility>

namespace kcl::leases {
namespace {

std::string ms_text(Clock::MonoTime::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

}  // namespace

Clock::MonoTime hold_deadline(Clock::MonoTime basis, const LeaseConfig& config) {
  return basis + config.failover_time - config.effective_lost_lease_margin();
}

struct HeldLeases::Held {
  Lease lease;                 // guarded by mu_
  Clock::MonoTime renewed_at;  // guarded by mu_: start of the last successful write
  // guarded by mu_: start of the last successful checkpoint write (it renews the lease)
  std::optional<Clock::MonoTime> checkpointed_at;
  std::uint64_t tenure = 0;                        // set before it is published in held_
  bool handoff_told = false;                       // guarded by mu_: on_handoff_requested fired
  std::optional<Clock::MonoTime> handoff_seen_at;  // guarded by mu_
  std::mutex write_mu;                             // one write to this lease at a time
  HoldState hold() const { return HoldState{renewed_at, handoff_seen_at}; }
};

// One fenced write in progress (write_held and its steps).
struct HeldLeases::WriteContext {
  std::shared_ptr<Held> h;
  WriteKind kind;
  Lease current;  // as this worker holds it: the write's condition
  Clock::MonoTime deadline{};
  std::vector<PendingLoss>& losses;
  std::optional<Lease> handoff_seen;  // a re-read found a handoff: told after the locks
  std::unique_lock<std::mutex> write_lock;
};

std::string_view HeldLeases::op_name(WriteKind kind) {
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

HeldLeases::HeldLeases(LeaseStore& store, LeaseConfig config, const Clock& clock,
                       MetricsSink& metrics, std::shared_ptr<const HoldPolicy> policy)
    : store_(store),
      config_(std::move(config)),
      clock_(clock),
      metrics_(metrics),
      policy_(std::move(policy)) {
  assert(config_.validate().empty());
  assert(policy_);
}

void HeldLeases::set_listener(LeaseListener* listener) { listener_.store(listener); }

Clock::MonoTime HeldLeases::deadline_of(const Held& h) const { return policy_->deadline(h.hold()); }

std::shared_ptr<HeldLeases::Held> HeldLeases::find_held(std::string_view key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(key);
  return it == held_.end() ? nullptr : it->second;
}

bool HeldLeases::drop_held(const std::shared_ptr<Held>& h) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(h->lease.lease_key);
  if (it == held_.end() || it->second != h) return false;
  held_.erase(it);
  return true;
}

void HeldLeases::notify_lost(std::vector<PendingLoss> losses) {
  if (losses.empty()) return;
  metrics_.count("leases.lost", static_cast<double>(losses.size()), {});
  LeaseListener* listener = listener_.load();
  if (listener != nullptr) {
    for (const auto& loss : losses) listener->on_lease_lost(loss.key, loss.reason);
  }
  report_held_gauge();
}

void HeldLeases::report_held_gauge() {
  metrics_.gauge("leases.held", static_cast<double>(held_count()), {});
}

// ---- what is held ----

std::vector<Lease> HeldLeases::held_leases() const {
  auto now = clock_.now();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Lease> out;
  out.reserve(held_.size());
  for (const auto& [key, h] : held_) {
    if (now < deadline_of(*h)) out.push_back(h->lease);
  }
  return out;
}

std::optional<Lease> HeldLeases::held_lease(std::string_view lease_key) const {
  auto now = clock_.now();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(lease_key);
  if (it == held_.end() || now >= deadline_of(*it->second)) return std::nullopt;
  return it->second->lease;
}

bool HeldLeases::holds(std::string_view lease_key) const {
  return held_lease(lease_key).has_value();
}

std::size_t HeldLeases::held_count() const {
  auto now = clock_.now();
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<std::size_t>(std::count_if(
      held_.begin(), held_.end(), [&](const auto& kv) { return now < deadline_of(*kv.second); }));
}

std::vector<HeldSummary> HeldLeases::summaries() const {
  auto now = clock_.now();
  std::vector<HeldSummary> out;
  std::lock_guard<std::mutex> lock(mu_);
  out.reserve(held_.size());
  for (const auto& [key, h] : held_) {
    out.push_back({key, h->lease.lease_counter, now < deadline_of(*h), h->handoff_told});
  }
  return out;
}

std::optional<std::uint64_t> HeldLeases::tenure_of(std::string_view lease_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(lease_key);
  if (it == held_.end()) return std::nullopt;
  return it->second->tenure;
}

std::optional<Clock::MonoTime> HeldLeases::next_deadline() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<Clock::MonoTime> earliest;
  for (const auto& [key, h] : held_) {
    auto d = deadline_of(*h);
    if (!earliest || d < *earliest) earliest = d;
  }
  return earliest;
}

std::map<std::string, std::string> HeldLeases::pending_handoffs() const {
  std::map<std::string, std::string> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, h] : held_) {
    if (h->handoff_told && h->lease.lease_owner) out.emplace(key, *h->lease.lease_owner);
  }
  return out;
}

bool HeldLeases::checkpointed_within(std::string_view lease_key,
                                     Clock::MonoTime::duration recent) const {
  const auto now = clock_.now();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(lease_key);
  if (it == held_.end()) return false;
  const Held& h = *it->second;
  return h.checkpointed_at && now - *h.checkpointed_at < recent && now < deadline_of(h);
}

// ---- the held-lease writer, step by step ----

// Drops the lease (if it is still the one held) and reports the loss, except for a release,
// which the caller asked for.
Status HeldLeases::give_up(WriteContext& w, std::string why) {
  Status reason(StatusCode::kLeaseLost, std::move(why));
  if (drop_held(w.h) && w.kind != WriteKind::kRelease) {
    w.losses.push_back({w.current.lease_key, reason});
  }
  return reason;
}

// Re-reads the lease (consistent read). Still ours (as owner, or as checkpoint owner while a
// handoff is pending) and its counter at most one past the one held: the counter, checkpoint
// and pending checkpoint in the table moved only through this worker's own write whose result
// it did not see, or through the leader starting a handoff, which moves only the owners.
// Writes of this worker to this lease are serialized by write_mu, and each is conditional on
// the counter held until a re-read, so at most one of them lands unseen: adopt what the table
// holds. The deadline is not extended by the unseen write. A counter further on means the
// lease was held by another worker meanwhile and came back to this one (taken for another
// while this worker re-registered, say, then handed back): what this tenure read since is not
// its to checkpoint, so the lease is lost (the table still gives it to this worker, whose
// next look takes it again as a new tenure, starting from the table's checkpoint). Otherwise
// the lease is lost too.
Result<Lease> HeldLeases::reread_held(WriteContext& w) {
  const std::string& key = w.current.lease_key;
  auto fresh = store_.get_lease(key);
  if (!fresh.ok()) return fresh.status();
  if (!fresh->has_value()) return give_up(w, "the lease for " + key + " no longer exists");
  const Lease& now_in_table = **fresh;
  if (now_in_table.actual_owner() == worker_id()) {
    if (now_in_table.lease_counter > w.current.lease_counter + 1) {
      return give_up(w, "the lease for " + key + " was held by another worker meanwhile " +
                            "(leaseCounter " + std::to_string(w.current.lease_counter) + " -> " +
                            std::to_string(now_in_table.lease_counter) + "); worker " +
                            worker_id() + " takes it again as a new tenure");
    }
    bool same_tenure = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = held_.find(key);
      same_tenure = it != held_.end() && it->second == w.h;
      if (same_tenure) w.h->lease = now_in_table;
    }
    if (!same_tenure) {
      // Dropped since this write began (the loss was reported then), and perhaps taken again
      // as a new tenure: a write of the old one retried now would land in the new one.
      return Status(StatusCode::kLeaseLost, "worker " + worker_id() +
                                                " no longer holds the lease for " + key +
                                                " in the tenure this write began in");
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
Result<Lease> HeldLeases::store_write(WriteContext& w, const CheckpointFields* fields) {
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
void HeldLeases::record_write(WriteContext& w, const Lease& written, Clock::MonoTime start) {
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
std::optional<Result<Lease>> HeldLeases::letting_go_landed(WriteContext& w) {
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

// The first steps of a write: the lease is held in `tenure`, this worker's write lock on it
// is taken (a renewal does not wait for one: a checkpoint or release in flight renews the
// lease if it lands), and its deadline has not passed. Returns the lease as held.
Result<Lease> HeldLeases::begin_write(WriteContext& w, const std::string& key,
                                      std::optional<std::uint64_t> tenure) {
  if (tenure && w.h->tenure != *tenure) {
    // Not a loss of the current tenure: nothing to drop or report.
    return Status(StatusCode::kLeaseLost,
                  "worker " + worker_id() + " lost the lease for " + key +
                      " and took it again since this writer began (tenure " +
                      std::to_string(*tenure) + ", now " + std::to_string(w.h->tenure) +
                      "); only the new tenure may write to it");
  }
  w.write_lock = std::unique_lock<std::mutex>(w.h->write_mu, std::defer_lock);
  const bool in_progress = w.kind == WriteKind::kRenew && !w.write_lock.try_lock();
  if (!in_progress && !w.write_lock.owns_lock()) w.write_lock.lock();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = held_.find(key);
    if (it == held_.end() || it->second != w.h) {
      return Status(StatusCode::kLeaseLost,
                    "worker " + worker_id() + " does not hold the lease for " + key);
    }
    w.current = w.h->lease;
    w.deadline = deadline_of(*w.h);
  }
  if (in_progress && clock_.now() < w.deadline) {
    // Another write (a checkpoint, say) is in flight: it renews the lease if it lands.
    return Status(StatusCode::kCancelled, "write in progress");
  }
  // Past the deadline the lease is given up, a write still in flight or not: a call stuck past
  // the hold (a half-open connection) would otherwise keep a lease that other workers may
  // take by now, and the renewals of every other lease would be retried at once for as long.
  if (clock_.now() >= w.deadline) {
    return give_up(w, "the lease for " + key + " was not renewed by worker " + worker_id() +
                          " for " +
                          ms_text(config_.failover_time - config_.effective_lost_lease_margin()) +
                          " and may be taken by another worker");
  }
  return w.current;
}

// The attempts of a write: a failed condition re-reads the lease and tries again on what is
// stored while it is still ours; any other failure ends the write (the lease stays held until
// its deadline, but a release or handoff that may have landed is checked).
Result<Lease> HeldLeases::write_attempts(WriteContext& w, const CheckpointFields* fields) {
  const std::string op(op_name(w.kind));
  constexpr int kAttempts = 3;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const auto start = clock_.now();
    Result<Lease> written = store_write(w, fields);
    if (written.ok()) {
      record_write(w, *written, start);
      return written;
    }
    if (written.status().code() != StatusCode::kConditionFailed) {
      if (w.kind == WriteKind::kRelease || w.kind == WriteKind::kHandoff) {
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
    // A release or handoff refused by its condition may be the client's retry of an attempt
    // that landed (its answer lost): the lease then no longer names this worker, which lets
    // go as the write meant to (not a loss).
    if (w.kind == WriteKind::kRelease || w.kind == WriteKind::kHandoff) {
      if (auto landed = letting_go_landed(w)) return *landed;
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

// One fenced write to a held lease; see the class comment for the rules. Losses found on the
// way are appended to `losses` for the caller to report once no lock is held; a handoff a
// re-read found is told once the write lock is released.
Result<Lease> HeldLeases::write_held(std::string_view key, WriteKind kind,
                                     const CheckpointFields* fields,
                                     std::optional<std::uint64_t> tenure,
                                     std::vector<PendingLoss>& losses) {
  std::shared_ptr<Held> h = find_held(key);
  if (!h) {
    return Status(StatusCode::kLeaseLost,
                  "worker " + worker_id() + " does not hold the lease for " + std::string(key));
  }
  WriteContext w{h, kind, {}, {}, losses, std::nullopt, {}};
  Result<Lease> result = begin_write(w, std::string(key), tenure);
  if (result.ok())
    result = kind == WriteKind::kRefresh ? reread_held(w) : write_attempts(w, fields);
  if (w.write_lock.owns_lock()) w.write_lock.unlock();
  if (w.handoff_seen) note_handoff(*w.handoff_seen);
  return result;
}

Result<Lease> HeldLeases::update_checkpoint(std::string_view lease_key,
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

Result<Lease> HeldLeases::refresh_held(std::string_view lease_key,
                                       std::optional<std::uint64_t> tenure) {
  std::vector<PendingLoss> losses;
  auto fresh = write_held(lease_key, WriteKind::kRefresh, nullptr, tenure, losses);
  notify_lost(std::move(losses));
  return fresh;
}

RenewOutcome HeldLeases::renew(std::string_view lease_key, Status* failure) {
  std::vector<PendingLoss> losses;
  auto renewed = write_held(lease_key, WriteKind::kRenew, nullptr, std::nullopt, losses);
  const bool lost = !losses.empty();
  notify_lost(std::move(losses));
  if (renewed.ok()) return RenewOutcome::kRenewed;
  const StatusCode code = renewed.status().code();
  if (code == StatusCode::kCancelled) return RenewOutcome::kBusy;
  if (code == StatusCode::kLeaseLost) return lost ? RenewOutcome::kLost : RenewOutcome::kNotHeld;
  if (failure) *failure = renewed.status();
  return RenewOutcome::kFailed;
}

Status HeldLeases::release(std::string_view lease_key) {
  std::vector<PendingLoss> losses;
  auto released = write_held(lease_key, WriteKind::kRelease, nullptr, std::nullopt, losses);
  report_held_gauge();
  return released.status();
}

Status HeldLeases::release_all(std::vector<Lease>* handed_over) {
  std::vector<std::pair<std::string, std::shared_ptr<Held>>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, h] : held_) all.emplace_back(key, h);
  }
  Status first;
  for (const auto& [key, h] : all) {
    std::vector<PendingLoss> losses;  // none: a release reports no loss
    auto released = write_held(key, WriteKind::kRelease, nullptr, std::nullopt, losses);
    if (released.ok()) {
      if (handed_over && released->lease_owner) handed_over->push_back(*std::move(released));
      continue;
    }
    const Status& s = released.status();
    if (s.code() != StatusCode::kLeaseLost) {
      if (first.ok()) first = s;
      drop_held(h);  // it expires by this worker's silence
    }
  }
  report_held_gauge();
  return first;
}

Status HeldLeases::complete_handoff(std::string_view lease_key) {
  std::vector<PendingLoss> losses;
  auto done = write_held(lease_key, WriteKind::kHandoff, nullptr, std::nullopt, losses);
  notify_lost(std::move(losses));
  report_held_gauge();
  return done.status();
}

// ---- for the assignment strategies ----

void HeldLeases::gain(const Lease& taken, Clock::MonoTime start) {
  auto h = std::make_shared<Held>();
  h->lease = taken;
  h->renewed_at = start;
  std::shared_ptr<Held> earlier;
  {
    std::lock_guard<std::mutex> lock(mu_);
    h->tenure = next_tenure_++;
    earlier = std::exchange(held_[taken.lease_key], h);
  }
  LeaseListener* listener = listener_.load();
  if (earlier && listener != nullptr) {
    // Taken again while still held (its hold had passed its deadline): the earlier tenure
    // ends here, and its consumer is told, rather than run on with writes that fail.
    listener->on_lease_lost(
        taken.lease_key,
        Status(StatusCode::kLeaseLost, "worker " + worker_id() + " took the lease for " +
                                           taken.lease_key + " again (tenure " +
                                           std::to_string(h->tenure) + ") while tenure " +
                                           std::to_string(earlier->tenure) + " still held it"));
  }
  if (listener != nullptr) listener->on_lease_gained(taken);
  report_held_gauge();
}

bool HeldLeases::lose_if_moved(const Lease& seen) {
  if (seen.lease_owner == worker_id()) return false;
  std::shared_ptr<Held> h = find_held(seen.lease_key);
  if (!h) return false;
  std::unique_lock<std::mutex> write_lock(h->write_mu, std::try_to_lock);
  if (!write_lock.owns_lock()) return false;  // a write in flight finds out itself
  std::int64_t held_counter;
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_counter = h->lease.lease_counter;
  }
  if (seen.lease_counter <= held_counter || !drop_held(h)) return false;
  write_lock.unlock();
  notify_lost({{seen.lease_key,
                Status(StatusCode::kLeaseLost,
                       "the lease for " + seen.lease_key + " was " +
                           (seen.lease_owner ? "taken by " + *seen.lease_owner : "released") +
                           " (leaseCounter " + std::to_string(held_counter) + " -> " +
                           std::to_string(seen.lease_counter) + "); worker " + worker_id() +
                           " no longer holds it")}});
  return true;
}

bool HeldLeases::lose(std::string_view lease_key, const Status& reason) {
  std::shared_ptr<Held> h = find_held(lease_key);
  if (!h || !drop_held(h)) return false;
  notify_lost({{std::string(lease_key), reason}});
  return true;
}

std::vector<std::string> HeldLeases::lose_all(const Status& reason) {
  std::vector<PendingLoss> losses;
  std::vector<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, h] : held_) {
      losses.push_back({key, reason});
      keys.push_back(key);
    }
    held_.clear();
  }
  notify_lost(std::move(losses));
  report_held_gauge();
  return keys;
}

void HeldLeases::note_handoff(const Lease& fresh) {
  if (!fresh.lease_owner) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = held_.find(fresh.lease_key);
    if (it == held_.end()) return;
    Held& h = *it->second;
    // The handoff itself leaves the counter alone: adopt the owners as read.
    if (h.lease.lease_counter == fresh.lease_counter) h.lease = fresh;
    if (h.handoff_told) return;
    h.handoff_told = true;
    h.handoff_seen_at = clock_.now();
  }
  metrics_.count("leases.handoffs_requested", 1, {});
  LeaseListener* listener = listener_.load();
  if (listener != nullptr) listener->on_handoff_requested(fresh.lease_key, *fresh.lease_owner);
}

}  // namespace kcl::leases
