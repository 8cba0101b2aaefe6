// Helpers shared by the lease and checkpoint unit tests.
#pragma once

#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "assignment/worker_takes_assignment.h"
#include "kcl/lease_config.h"
#include "kcl/metrics.h"
#include "leases/held_leases.h"
#include "leases/in_memory_lease_store.h"

namespace kcl::leases::testing {

inline std::string shard(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shardId-%012d", i);
  return buf;
}

// Failover 10 s (renew every 3.33 s, take every 20 s, give up 9 s after the last renewal).
inline LeaseConfig test_config(std::string worker_id) {
  LeaseConfig c;
  c.application_name = "lease-test";
  c.worker_id = std::move(worker_id);
  c.assignment = LeaseAssignment::kWorkerTakes;  // these tests drive take and renew passes
  return c;
}

inline void add_free_leases(InMemoryLeaseStore& store, int n, int first = 0) {
  for (int i = first; i < first + n; ++i) {
    Lease l;
    l.lease_key = shard(i);
    store.put(l);
  }
}

// One worker of the worker-takes strategy, driven by hand: its take and renew passes run when
// the test calls them (instead of on WorkerTakesAssignment's threads), and its held leases are
// reached through the same names.
class TakesWorker {
 public:
  TakesWorker(LeaseStore& store, LeaseConfig config, const Clock& clock,
              MetricsSink& metrics = NoopMetricsSink::instance(),
              std::uint64_t seed = std::random_device{}())
      : assignment_(config, parts(store, clock, metrics, seed)) {}

  assignment::TakePassResult run_take_pass() { return assignment_.taker().run_take_pass(); }
  assignment::RenewPassResult run_renew_pass() { return assignment_.renew_pass(); }
  // A graceful stop's first step: take passes return at once from now on.
  void stop_taking() { assignment_.drain(); }
  bool taking_stopped() { return assignment_.taker().taking_stopped(); }
  Status release_all() {
    assignment_.drain();
    return held().release_all();
  }
  HeldLeases& held() { return assignment_.held(); }
  const HeldLeases& held() const { return const_cast<TakesWorker*>(this)->held(); }

  void set_listener(LeaseListener* l) { held().set_listener(l); }
  std::vector<Lease> held_leases() const { return held().held_leases(); }
  std::optional<Lease> held_lease(std::string_view k) const { return held().held_lease(k); }
  bool holds(std::string_view k) const { return held().holds(k); }
  std::size_t held_count() const { return held().held_count(); }
  std::optional<std::uint64_t> tenure_of(std::string_view k) const { return held().tenure_of(k); }
  std::optional<Clock::MonoTime> next_deadline() const { return held().next_deadline(); }
  Result<Lease> update_checkpoint(std::string_view k, const CheckpointFields& f,
                                  std::optional<std::uint64_t> tenure = std::nullopt) {
    return held().update_checkpoint(k, f, tenure);
  }
  Result<Lease> refresh_held(std::string_view k,
                             std::optional<std::uint64_t> tenure = std::nullopt) {
    return held().refresh_held(k, tenure);
  }
  Status release(std::string_view k) { return held().release(k); }
  const LeaseConfig& config() const { return held().config(); }
  const std::string& worker_id() const { return held().worker_id(); }

 private:
  static assignment::AssignmentParts parts(LeaseStore& store, const Clock& clock,
                                           MetricsSink& metrics, std::uint64_t seed) {
    assignment::AssignmentParts p;
    p.store = &store;
    p.clock = &clock;
    p.metrics = &metrics;
    p.seed = seed;
    return p;
  }
  assignment::WorkerTakesAssignment assignment_;
};

class RecordingListener final : public LeaseListener {
 public:
  void on_lease_gained(const Lease& lease) override {
    std::lock_guard<std::mutex> lock(mu_);
    gained_.push_back(lease.lease_key);
  }
  void on_lease_lost(const std::string& key, const Status& reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    lost_.push_back(key);
    reasons_.push_back(reason);
  }
  std::vector<std::string> gained() const {
    std::lock_guard<std::mutex> lock(mu_);
    return gained_;
  }
  std::vector<std::string> lost() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_;
  }
  std::vector<Status> reasons() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reasons_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> gained_;
  std::vector<std::string> lost_;
  std::vector<Status> reasons_;
};

class RecordingMetrics final : public MetricsSink {
 public:
  void count(std::string_view name, double value, MetricTags tags) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::string key(name);
    for (const auto& t : tags) key += "{" + std::string(t.key) + "=" + std::string(t.value) + "}";
    counts_[key] += value;
  }
  void gauge(std::string_view name, double value, MetricTags) override {
    std::lock_guard<std::mutex> lock(mu_);
    gauges_[std::string(name)] = value;
  }
  void timing(std::string_view name, std::chrono::nanoseconds, MetricTags) override {
    std::lock_guard<std::mutex> lock(mu_);
    timings_[std::string(name)] += 1;
  }
  double count_of(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = counts_.find(key);
    return it == counts_.end() ? 0 : it->second;
  }
  double gauge_of(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = gauges_.find(name);
    return it == gauges_.end() ? -1 : it->second;
  }
  int timings_of(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = timings_.find(name);
    return it == timings_.end() ? 0 : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, double> counts_;
  std::map<std::string, double> gauges_;
  std::map<std::string, int> timings_;
};

// A view of a shared store that can be cut off (a network partition of one worker), or whose
// deletions alone fail (as DynamoDB throttles them).
class PartitionableStore final : public LeaseStore {
 public:
  explicit PartitionableStore(LeaseStore& inner) : inner_(inner) {}
  void set_partitioned(bool p) { partitioned_ = p; }
  void set_deletes_throttled(bool t) { deletes_throttled_ = t; }
  int deletes_refused() const { return deletes_refused_; }

  Status create_table_if_not_exists() override {
    if (partitioned_) return cut();
    return inner_.create_table_if_not_exists();
  }
  Result<std::vector<Lease>> list_leases() override {
    if (partitioned_) return cut();
    return inner_.list_leases();
  }
  Result<std::optional<Lease>> get_lease(std::string_view k) override {
    if (partitioned_) return cut();
    return inner_.get_lease(k);
  }
  Status create_lease_if_not_exists(const Lease& l) override {
    if (partitioned_) return cut();
    return inner_.create_lease_if_not_exists(l);
  }
  Result<Lease> take_lease(const Lease& seen, std::string_view owner) override {
    if (partitioned_) return cut();
    return inner_.take_lease(seen, owner);
  }
  Result<Lease> renew_lease(const Lease& held) override {
    if (partitioned_) return cut();
    return inner_.renew_lease(held);
  }
  Result<Lease> evict_lease(const Lease& held) override {
    if (partitioned_) return cut();
    return inner_.evict_lease(held);
  }
  Result<Lease> initiate_handoff(const Lease& seen, std::string_view new_owner) override {
    if (partitioned_) return cut();
    return inner_.initiate_handoff(seen, new_owner);
  }
  // Runs once before the next checkpoint write reaches the store (a write in flight while
  // something else happens).
  void before_next_checkpoint(std::function<void()> fn) { before_checkpoint_ = std::move(fn); }
  Result<Lease> update_checkpoint(const Lease& held, const CheckpointFields& f) override {
    if (partitioned_) return cut();
    if (auto fn = std::exchange(before_checkpoint_, nullptr)) fn();
    return inner_.update_checkpoint(held, f);
  }
  Status update_child_shard_ids(std::string_view k, const std::vector<std::string>& c) override {
    if (partitioned_) return cut();
    return inner_.update_child_shard_ids(k, c);
  }
  Status delete_lease(std::string_view k) override {
    if (partitioned_) return cut();
    if (deletes_throttled_) {
      ++deletes_refused_;
      return Status(StatusCode::kUnavailable, "ProvisionedThroughputExceededException");
    }
    return inner_.delete_lease(k);
  }

 private:
  static Status cut() { return Status(StatusCode::kUnavailable, "partitioned"); }
  LeaseStore& inner_;
  bool partitioned_ = false;
  bool deletes_throttled_ = false;
  int deletes_refused_ = 0;
  std::function<void()> before_checkpoint_;
};

// A clock whose wall time must never be read (the lease logic judges expiry on monotonic
// time only).
class MonotonicOnlyClock final : public Clock {
 public:
  MonotonicOnlyClock(const Clock& base, std::chrono::nanoseconds mono_offset)
      : base_(base), offset_(mono_offset) {}
  MonoTime now() const override { return base_.now() + offset_; }
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  MonoTime deadline, const std::function<bool()>& done) const override {
    return base_.wait_until(lock, cv, deadline - offset_, done);
  }
  WallTime wall_now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    ++wall_reads_;
    return base_.wall_now();
  }
  int wall_reads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return wall_reads_;
  }

 private:
  const Clock& base_;
  std::chrono::nanoseconds offset_;
  mutable std::mutex mu_;
  mutable int wall_reads_ = 0;
};

}  // namespace kcl::leases::testing
