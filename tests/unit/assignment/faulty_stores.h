// Fault-injecting decorators of LeaseStore and CoordinationStore for deterministic tests:
// one pair per simulated worker, over the shared in-memory stores, so each worker sees its own
// faults as it would through the fault proxy of the fault suite:
//  - kBefore: the call fails and nothing is applied (a 500, a throttle, a refused connection);
//  - kAfter: the call is applied, then fails (the answer was lost: a connection dropped after
//    the request reached DynamoDB, a stall past the request timeout, a malformed answer);
//  - kAppliedThenConditionFailed: the call is applied and answers "condition failed", as a
//    conditional write does when its first attempt landed unseen and the client's retry then
//    finds the item changed.
// A fault may also stall the calling step (the harness reads stalled() after each step).
//
// With KCL_TEST_TRACE_FAULTS set, every injected fault is printed (operation, subject, kind).
//
// Thread safety: a script is called on the thread that calls the store; the tests that use
// these drive every worker from one thread.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "coordination/coordination_store.h"
#include "leases/lease_store.h"

namespace kcl::leases::testing {

using namespace ::kcl::assignment;
using namespace ::kcl::coordination;

struct InjectedFault {
  enum class When { kNone, kBefore, kAfter, kAppliedThenConditionFailed };
  When when = When::kNone;
  StatusCode code = StatusCode::kUnavailable;
  std::chrono::milliseconds stall{0};  // how long the call held the caller up
};

// Decides the fault of one call from the operation's name ("heartbeat", "get_lease", ...) and
// its subject (the worker whose entry it writes or reads, or the lease key; may be empty).
using FaultScript =
    std::function<InjectedFault(std::string_view operation, std::string_view subject)>;

// Seeded random faults at `rate` per call: half before, half after the call was applied;
// some answers lost as a stall of `stall` (a timeout), some as malformed (kInternal).
inline FaultScript random_faults(std::uint64_t seed, double rate,
                                 std::chrono::milliseconds stall = std::chrono::milliseconds(750)) {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  return [rng, rate, stall](std::string_view op, std::string_view) {
    std::uniform_real_distribution<double> u(0, 1);
    InjectedFault f;
    if (u(*rng) >= rate) return f;
    const double kind = u(*rng);
    f.when = kind < 0.5 ? InjectedFault::When::kBefore : InjectedFault::When::kAfter;
    f.code = (kind < 0.25 || (kind >= 0.5 && kind < 0.75)) ? StatusCode::kUnavailable
                                                           : StatusCode::kInternal;
    if (f.code == StatusCode::kUnavailable && u(*rng) < 0.5) f.stall = stall;
    // A write whose own landing breaks its condition (it bumps the counter it is conditional
    // on, or removes the entry): a lost answer retried by the client reads as a failed
    // condition, once in four.
    static const std::set<std::string_view> kSelfBreaking = {
        "take_lease",        "renew_lease",  "evict_lease",        "initiate_handoff",
        "update_checkpoint", "fence_worker", "acquire_leadership", "release_leadership"};
    if (f.when == InjectedFault::When::kAfter && kSelfBreaking.count(op) && u(*rng) < 0.25) {
      f.when = InjectedFault::When::kAppliedThenConditionFailed;
    }
    return f;
  };
}

// Calls `apply` unless the script says the call fails before; fails after it when told.
class FaultPoint {
 public:
  void set_script(FaultScript script) { script_ = std::move(script); }
  // Stall accumulated since the last call of this (for the step that made the calls).
  std::chrono::milliseconds take_stalled() {
    auto s = stalled_;
    stalled_ = std::chrono::milliseconds(0);
    return s;
  }
  std::int64_t injected() const { return injected_; }

  template <typename T, typename F>
  T call(std::string_view op, std::string_view subject, F&& apply) {
    InjectedFault f = script_ ? script_(op, subject) : InjectedFault{};
    if (f.when == InjectedFault::When::kNone) return apply();
    ++injected_;
    if (std::getenv("KCL_TEST_TRACE_FAULTS"))
      std::fprintf(stderr, "FAULT %s %s %d\n", std::string(op).c_str(),
                   std::string(subject).c_str(), static_cast<int>(f.when));
    stalled_ += f.stall;
    const bool applied = f.when != InjectedFault::When::kBefore;
    if (f.when == InjectedFault::When::kAppliedThenConditionFailed) {
      f.code = StatusCode::kConditionFailed;
    }
    Status failure(f.code, "injected fault in " + std::string(op) +
                               (applied ? " (applied, answer lost)" : ""));
    if (applied) (void)apply();
    return T(failure);
  }

 private:
  FaultScript script_;
  std::chrono::milliseconds stalled_{0};
  std::int64_t injected_ = 0;
};

class FaultyCoordinationStore final : public CoordinationStore {
 public:
  explicit FaultyCoordinationStore(CoordinationStore& inner) : inner_(inner) {}
  FaultPoint& faults() { return faults_; }

  Status create_table_if_not_exists() override { return inner_.create_table_if_not_exists(); }
  Result<CoordinationView> read_all(Consistency c) override {
    if (c == Consistency::kEventual && !stale_.empty()) {
      CoordinationView v = std::move(stale_.front());
      stale_.erase(stale_.begin());
      return v;
    }
    return faults_.call<Result<CoordinationView>>("read_all", "",
                                                  [&] { return inner_.read_all(c); });
  }
  // The next eventually consistent read_all() answers `view` (a replica that lags).
  void serve_stale(CoordinationView view) { stale_.push_back(std::move(view)); }
  Result<std::optional<LeaderEntry>> read_leader(Consistency c) override {
    return faults_.call<Result<std::optional<LeaderEntry>>>("read_leader", "",
                                                            [&] { return inner_.read_leader(c); });
  }
  Result<WorkerEntry> register_worker(const WorkerEntry& e) override {
    return faults_.call<Result<WorkerEntry>>("register_worker", e.worker_id,
                                             [&] { return inner_.register_worker(e); });
  }
  Result<WorkerEntry> heartbeat(const WorkerEntry& held, const WorkerEntry& report) override {
    return faults_.call<Result<WorkerEntry>>("heartbeat", held.worker_id,
                                             [&] { return inner_.heartbeat(held, report); });
  }
  Status fence_worker(const WorkerEntry& seen) override {
    return faults_.call<Status>("fence_worker", seen.worker_id,
                                [&] { return inner_.fence_worker(seen); });
  }
  Status deregister_worker(const WorkerEntry& held) override {
    return faults_.call<Status>("deregister_worker", held.worker_id,
                                [&] { return inner_.deregister_worker(held); });
  }
  Result<LeaderEntry> acquire_leadership(const std::optional<LeaderEntry>& seen,
                                         std::string_view id,
                                         std::string_view incarnation) override {
    return faults_.call<Result<LeaderEntry>>(
        "acquire_leadership", id, [&] { return inner_.acquire_leadership(seen, id, incarnation); });
  }
  Result<LeaderEntry> renew_leadership(const LeaderEntry& held) override {
    return faults_.call<Result<LeaderEntry>>("renew_leadership", held.owner.value_or(""),
                                             [&] { return inner_.renew_leadership(held); });
  }
  Result<LeaderEntry> call_attention(const LeaderEntry& held) override {
    return faults_.call<Result<LeaderEntry>>("call_attention", held.owner.value_or(""),
                                             [&] { return inner_.call_attention(held); });
  }
  Status release_leadership(const LeaderEntry& held) override {
    return faults_.call<Status>("release_leadership", held.owner.value_or(""),
                                [&] { return inner_.release_leadership(held); });
  }
  Status note_leases_changed() override {
    return faults_.call<Status>("note_leases_changed", "",
                                [&] { return inner_.note_leases_changed(); });
  }

 private:
  CoordinationStore& inner_;
  FaultPoint faults_;
  std::vector<CoordinationView> stale_;
};

class FaultyLeaseStore final : public LeaseStore {
 public:
  explicit FaultyLeaseStore(LeaseStore& inner) : inner_(inner) {}
  FaultPoint& faults() { return faults_; }

  Status create_table_if_not_exists() override { return inner_.create_table_if_not_exists(); }
  Result<std::vector<Lease>> list_leases() override {
    return faults_.call<Result<std::vector<Lease>>>("list_leases", "",
                                                    [&] { return inner_.list_leases(); });
  }
  Result<std::vector<std::string>> owned_lease_keys(std::string_view owner) override {
    return faults_.call<Result<std::vector<std::string>>>(
        "owned_lease_keys", owner, [&] { return inner_.owned_lease_keys(owner); });
  }
  Result<std::optional<Lease>> get_lease(std::string_view key) override {
    return faults_.call<Result<std::optional<Lease>>>("get_lease", key,
                                                      [&] { return inner_.get_lease(key); });
  }
  Status create_lease_if_not_exists(const Lease& lease) override {
    return faults_.call<Status>("create_lease", lease.lease_key,
                                [&] { return inner_.create_lease_if_not_exists(lease); });
  }
  Result<Lease> take_lease(const Lease& seen, std::string_view owner) override {
    return faults_.call<Result<Lease>>("take_lease", seen.lease_key,
                                       [&] { return inner_.take_lease(seen, owner); });
  }
  Result<Lease> renew_lease(const Lease& held) override {
    return faults_.call<Result<Lease>>("renew_lease", held.lease_key,
                                       [&] { return inner_.renew_lease(held); });
  }
  Result<Lease> evict_lease(const Lease& held) override {
    return faults_.call<Result<Lease>>("evict_lease", held.lease_key,
                                       [&] { return inner_.evict_lease(held); });
  }
  Result<Lease> initiate_handoff(const Lease& seen, std::string_view owner) override {
    return faults_.call<Result<Lease>>("initiate_handoff", seen.lease_key,
                                       [&] { return inner_.initiate_handoff(seen, owner); });
  }
  Result<Lease> update_checkpoint(const Lease& held, const CheckpointFields& f) override {
    return faults_.call<Result<Lease>>("update_checkpoint", held.lease_key,
                                       [&] { return inner_.update_checkpoint(held, f); });
  }
  Status update_child_shard_ids(std::string_view key,
                                const std::vector<std::string>& ids) override {
    return faults_.call<Status>("update_child_shard_ids", key,
                                [&] { return inner_.update_child_shard_ids(key, ids); });
  }
  Status delete_lease(std::string_view key) override {
    return faults_.call<Status>("delete_lease", key, [&] { return inner_.delete_lease(key); });
  }

 private:
  LeaseStore& inner_;
  FaultPoint faults_;
};

}  // namespace kcl::leases::testing
