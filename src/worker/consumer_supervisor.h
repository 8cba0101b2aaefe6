// worker/consumer_supervisor.h: one shard consumer for each lease this worker holds.
//
// The scheduler calls reconcile() when woken and at its interval: consumers that ended are
// forgotten (a finished shard asks for its stream's shard sync, a failed one is restarted
// after a backoff and its failures are counted as a series), consumers of leases no longer
// held are told so, handoffs whose consumer has stopped are completed
// (HeldLeases::pending_handoffs() is the one record of them), and each held lease without a
// consumer gets one. A lease lost or to be handed off, as the assignment's listener hears
// it, reaches its consumer at once (lease_lost(), hand_off()).
//
// Thread safety: reconcile(), check_hung(), stall_signals(), stop_all() on the scheduler's
// thread; lease_lost() and hand_off() from the assignment's threads; the figures from any
// thread. One mutex guards the consumers and their shards' records; no consumer step and no
// write of the held leases runs under it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/failure_series.h"
#include "kcl/clock.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"
#include "kcl/worker.h"
#include "leases/held_leases.h"
#include "lifecycle/shard_consumer.h"
#include "lifecycle/task_pool.h"

namespace kcl::worker {

// What the consumers count, for the worker's stats() (ConsumerContext points at these).
struct ConsumerFigures {
  std::atomic<std::uint64_t> records_delivered{0};
  std::atomic<std::uint64_t> processor_failures{0};
  std::atomic<std::uint64_t> records_dead_lettered{0};
  std::atomic<std::uint64_t> corrupt_aggregates{0};
};

// What reconcile() found that the worker acts on.
struct ConsumersEnded {
  // Streams whose shard sync is asked for now (a shard of theirs finished, or one of several
  // streams is gone); "" = every stream (a one-stream worker's lease key names none).
  std::set<std::string> sync_streams;
  // Set when the worker must stop: its one stream is gone.
  std::optional<Status> fatal;
};

class ConsumerSupervisor {
 public:
  using MakeConsumer = std::function<std::shared_ptr<lifecycle::ShardConsumer>(const Lease&)>;
  using Log = std::function<void(LogLevel, const std::string&)>;
  struct Options {
    bool multi_stream = false;  // a stream gone stops only its shards, not the worker
    // A failed shard's consumer is started again after this.
    std::chrono::milliseconds restart_backoff{5000};
    std::chrono::milliseconds hung_warning{60000};  // a callback this long is reported
    // How long a consumer whose lease is handed off may take to finish (hand_off()'s bound,
    // for a handoff reconcile() finds before hand_off() found its consumer).
    std::chrono::milliseconds handoff_bound{0};
  };

  // `held`, `pool`, `clock` and `metrics` must outlive this object.
  ConsumerSupervisor(Options options, leases::HeldLeases& held, lifecycle::TaskPool& pool,
                     const Clock& clock, MetricsSink& metrics, MakeConsumer make, Log log);

  // One look (scheduler thread). `stopping`: no consumer is started.
  ConsumersEnded reconcile(bool stopping);
  // The earliest restart of a failed shard that is still to come, if before `latest`.
  Clock::MonoTime next_restart(Clock::MonoTime latest) const;
  // Reports, once each, callbacks that have run longer than the hung warning.
  void check_hung();
  // What each running consumer says is in its way (lifecycle/stall_detector.h); and a shard
  // whose consumers keep failing (restarted after each, none reading an answer or delivering
  // a record meanwhile) is in a restart loop: kStallConsumerFailing since the first failure of
  // the loop, whether a restart is due or running.
  std::map<std::string, std::optional<lifecycle::StallSignal>> stall_signals() const;
  // Asks every consumer to stop (final checkpoints; a paced one drains for `drain`) and
  // returns them, to be waited for with done().
  std::vector<std::shared_ptr<lifecycle::ShardConsumer>> stop_all(std::chrono::milliseconds drain);
  void clear();

  // The assignment's listener: the lease is gone, or is to move (the consumer stops
  // gracefully within `bound`; reconcile() then completes the handoff).
  void lease_lost(const std::string& key);
  void hand_off(const std::string& key, std::chrono::milliseconds bound);

  // Lease key -> its consumer's state in words, or its failures in a row.
  std::map<std::string, std::string> shard_states() const;
  std::size_t consumer_count() const;
  std::vector<FailingShard> failing_shards() const;

 private:
  struct FailureRecord {
    Status cause;
    int consecutive = 0;
    std::uint64_t delivered = 0;  // by this shard's consumers so far
    // The first failure after which no consumer of the shard read an answer or delivered a
    // record: the restart loop's beginning.
    Clock::MonoTime looping_since{};
  };
  std::shared_ptr<lifecycle::ShardConsumer> find(const std::string& key) const;
  // The steps of reconcile (requires mu_).
  void sweep_locked(const std::set<std::string>& held_keys, ConsumersEnded& ended,
                    std::vector<std::shared_ptr<lifecycle::ShardConsumer>>& run);
  void on_ended_locked(const std::string& shard, const lifecycle::ShardConsumer& c,
                       ConsumersEnded& ended);
  void on_failed_locked(const std::string& shard, const lifecycle::ShardConsumer& c,
                        const Status& failure);
  void start_locked(const std::vector<Lease>& held,
                    const std::map<std::string, std::string>& handing_off,
                    std::vector<std::shared_ptr<lifecycle::ShardConsumer>>& run);
  // Completes the handoffs whose consumer has stopped (no lock held). One that fails is tried
  // again after a backoff (kHandoffRetryBase, doubling up to kHandoffRetryMax), its series of
  // failures logged once with a count; `handing_off`: the handoffs pending now.
  void complete_handoffs(const std::vector<std::string>& keys,
                         const std::map<std::string, std::string>& handing_off);

  const Options options_;
  leases::HeldLeases& held_;
  lifecycle::TaskPool& pool_;
  const Clock& clock_;
  MetricsSink& metrics_;
  const MakeConsumer make_;
  const Log log_;

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<lifecycle::ShardConsumer>> consumers_;  // guarded
  std::set<std::string> finished_;  // guarded: held leases whose shard is done
  // guarded: shards whose consumer failed, not restarted before the time given
  std::map<std::string, Clock::MonoTime> restart_at_;
  std::map<std::string, FailureRecord> failures_;  // guarded: shards whose last consumer failed
  // Guarded: a failed consumer until its shard's next one starts, or its lease goes (its
  // metric series, kept for the restart, are then forgotten: no stale lag left published).
  std::map<std::string, std::shared_ptr<lifecycle::ShardConsumer>> awaiting_restart_;
  // The handoffs whose completion failed, by lease key: their series and when to try again
  // (reconcile's thread only).
  struct HandoffRetry {
    explicit HandoffRetry(const std::string& key) : series("handing off lease " + key) {}
    base::FailureSeries series;
    Clock::MonoTime next_try{};
  };
  std::map<std::string, HandoffRetry> handoff_retries_;
};

}  // namespace kcl::worker
