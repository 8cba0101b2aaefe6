#include "assignment/membership.h"

#include <algorithm>
#include <cstdio>

namespace kcl::assignment {

std::chrono::milliseconds handoff_margin(const LeaseConfig& config) {
  return std::max<std::chrono::milliseconds>(config.poll_interval * 2,
                                             config.effective_lost_lease_margin());
}

std::chrono::milliseconds handoff_finish_bound(const LeaseConfig& config) {
  return std::max(std::chrono::milliseconds(0),
                  config.handoff_timeout - 2 * handoff_margin(config));
}

Clock::MonoTime MembershipHold::deadline(const leases::HoldState& state) const {
  std::optional<Clock::MonoTime> basis;
  {
    std::lock_guard<std::mutex> lock(mu_);
    basis = basis_;
  }
  // One membership holds every lease; no basis, nothing held.
  if (!basis) return Clock::MonoTime::min();
  auto d = leases::hold_deadline(*basis, config_);
  if (state.handoff_seen_at) {
    // A lease being handed off is given up before the receiver may take it anyway.
    d = std::min(d, *state.handoff_seen_at + config_.handoff_timeout - handoff_margin(config_));
  }
  return d;
}

void MembershipHold::set_basis(std::optional<Clock::MonoTime> basis) {
  std::lock_guard<std::mutex> lock(mu_);
  basis_ = basis;
}

Membership::Membership(coordination::CoordinationStore& store, MembershipHold& hold,
                       const LeaseConfig& config, const Clock& clock, MetricsSink& metrics,
                       std::uint64_t seed, Callbacks callbacks)
    : store_(store),
      hold_(hold),
      callbacks_(std::move(callbacks)),
      config_(config),
      clock_(clock),
      metrics_(metrics),
      rng_(seed) {}

std::string Membership::new_incarnation() {
  char text[40];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(rng_()),
                static_cast<unsigned long long>(rng_()));
  return text;
}

std::optional<Clock::MonoTime> MembershipHold::hold_deadline() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!basis_) return std::nullopt;
  return leases::hold_deadline(*basis_, config_);
}

std::optional<Clock::MonoTime> Membership::basis() const {
  if (!entry_ || !heartbeat_basis_) return std::nullopt;
  if (held_by_lock_ && leader_basis_) return leader_basis_;
  if (leader_basis_) return std::min(*heartbeat_basis_, *leader_basis_);
  return heartbeat_basis_;
}

void Membership::publish() { hold_.set_basis(basis()); }

std::optional<Clock::MonoTime> Membership::deadline() const {
  auto b = basis();
  if (!b) return std::nullopt;
  return leases::hold_deadline(*b, config_);
}

std::optional<coordination::WorkerEntry> Membership::entry() const { return entry_; }

std::uint64_t Membership::incarnations() const { return incarnations_; }

void Membership::abandon(const Status& reason) {
  if (!entry_) return;
  end();
  metrics_.count("membership.lost", 1, {});
  if (callbacks_.ended) callbacks_.ended(reason);  // the leases are given up, listeners told
}

void Membership::end() {
  entry_.reset();
  heartbeat_basis_.reset();
  leader_basis_.reset();
  held_by_lock_ = false;
  ++generation_;
  hold_.set_basis(std::nullopt);
}

bool Membership::check_lapse() {
  auto d = deadline();
  if (!entry_ || (d && clock_.now() < *d)) return false;
  abandon(Status(StatusCode::kLeaseLost,
                 "worker " + config_.worker_id +
                     " could not renew its membership in time; its leases may be given to "
                     "other workers"));
  return true;
}

CallTask<Membership::RenewResult> Membership::renew() {
  // One at a time: another renew() in flight (a drain's beside a heartbeat's) ends first;
  // its answer is resumed before an empty call queued behind it on the same lane.
  while (runner_ && renewing_) {
    (void)co_await call(runner_, Lane::kRenew, [] { return Done{}; });
  }
  renewing_ = true;
  RenewResult result;
  if (check_lapse()) result.abandoned = true;
  const std::optional<coordination::WorkerEntry> held = entry_;
  const std::uint64_t generation = generation_;
  const auto start = clock_.now();
  coordination::WorkerEntry report =
      callbacks_.report ? callbacks_.report() : coordination::WorkerEntry{};
  if (!held) {
    result = co_await register_incarnation(start, report.lease_count, generation, result);
    renewing_ = false;
    co_return result;
  }
  // Conditional on the incarnation only (coordination_store.h): a heartbeat whose answer was
  // lost does not make this one fail; only a fence (or a registration elsewhere) does.
  report.draining = draining_;
  auto written = co_await call(runner_, Lane::kRenew,
                               [this, &held, &report] { return store_.heartbeat(*held, report); });
  renewing_ = false;
  if (written.ok()) {
    if (generation_ != generation) co_return result;  // abandoned meanwhile: ignore
    entry_ = written.value();
    heartbeat_basis_ = start;
    publish();
    co_return result;
  }
  result.status = written.status();
  if (written.status().code() == StatusCode::kConditionFailed) {
    if (generation_ == generation) {
      abandon(Status(StatusCode::kLeaseLost,
                     "worker " + config_.worker_id +
                         "'s membership was fenced by the leader (it was silent for the "
                         "failover time); its leases are being given to other workers"));
      result.abandoned = true;
    }
  } else if (check_lapse()) {
    result.abandoned = true;
  }
  co_return result;
}

// Registers a new incarnation. One whose registration's answer was lost is registered again
// under the same incarnation, so that a registration that landed (and the leases the leader
// may have given it since) is kept: the store then answers kConditionFailed, which confirms it. The
// hold of a registration confirmed that way counts from the start of its first attempt: the
// leader may have seen it since it landed, which was no earlier.
void Membership::set_status_url(std::string url) { status_url_ = std::move(url); }

CallTask<Membership::RenewResult> Membership::register_incarnation(Clock::MonoTime start,
                                                                   std::int64_t lease_count,
                                                                   std::uint64_t generation,
                                                                   RenewResult result) {
  coordination::WorkerEntry fresh;
  fresh.worker_id = config_.worker_id;
  if (registering_.empty()) {
    registering_ = new_incarnation();
    registering_since_ = start;
  }
  fresh.incarnation = registering_;
  fresh.status_url = status_url_;
  fresh.lease_count = lease_count;
  // A stop in progress (drain) goes with a new incarnation too: the leader assigns it nothing.
  fresh.draining = draining_;
  auto written = co_await call(runner_, Lane::kRenew,
                               [this, &fresh] { return store_.register_worker(fresh); });
  if (!written.ok() && written.status().code() != StatusCode::kConditionFailed) {
    result.status = written.status();
    co_return result;
  }
  if (generation_ != generation) co_return result;
  entry_ = written.ok() ? written.value() : fresh;
  registering_.clear();
  heartbeat_basis_ = written.ok() ? start : registering_since_;
  ++incarnations_;
  publish();
  result.registered = true;
  co_return result;
}

CallTask<Status> Membership::leave() {
  const std::optional<coordination::WorkerEntry> held = entry_;
  if (!held) co_return Status::Ok();
  Status s = co_await call(runner_, Lane::kRenew,
                           [this, &held] { return store_.deregister_worker(*held); });
  end();
  if (callbacks_.ended) callbacks_.ended(Status(StatusCode::kLeaseLost, "left"));
  if (s.code() == StatusCode::kConditionFailed) co_return Status::Ok();  // already fenced
  co_return s;
}

void Membership::set_draining() { draining_ = true; }

void Membership::set_held_by_lock(bool held) {
  held_by_lock_ = held;
  publish();
}

void Membership::set_leader_basis(std::optional<Clock::MonoTime> basis) {
  leader_basis_ = basis;
  if (this->basis()) publish();  // only ever moves a member's basis
}

}  // namespace kcl::assignment
