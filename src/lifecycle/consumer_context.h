// ConsumerContext: what every shard consumer of a worker shares, in the small parts a consumer
// uses. They are the runtime it runs on, the lease table as it sees it, where its records come
// from, its backoff timings, how it delivers (DeliveryFactory, chosen once) and the counters
// it bumps (ConsumerCounters). Built once by the worker (tests: tests/support's
// ConsumerContextBuilder); outlives every consumer made with it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kcl/clock.h"
#include "kcl/initial_position.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"
#include "kcl/retrieval_config.h"
#include "kinesis/kinesis_client.h"
#include "leases/held_leases.h"
#include "leases/lease_store.h"
#include "leases/load_meter.h"
#include "lifecycle/delivery.h"
#include "lifecycle/task_pool.h"
#include "retrieval/records_source.h"

namespace kcl::lifecycle {

// The worker's machinery a consumer runs on.
struct ConsumerRuntime {
  TaskPool* pool = nullptr;
  const Clock* clock = nullptr;
  Logger* logger = nullptr;  // may be null
  MetricsSink* metrics = nullptr;
  // Called once when a consumer is done (any outcome), on the thread that ended it: quick,
  // no blocking. The worker's scheduler wakes on it rather than polling consumers.
  std::function<void()> on_consumer_done;
};

// The lease table as a consumer sees it.
struct ConsumerLeases {
  leases::LeaseStore* store = nullptr;  // the parents' leases
  leases::HeldLeases* held = nullptr;   // its tenure, the fenced read and checkpoints
  leases::LoadMeter* load = nullptr;    // may be null: the consumers report their bytes there
};

// Where a shard's records come from.
struct ShardReading {
  // The stream of a one-stream table; a multi-stream lease names its own.
  std::string stream;
  // The initial position of a stream (a lease at AT_TIMESTAMP starts at its time).
  std::function<InitialPosition(const std::string& stream)> initial_position_of;
  // Polling or fan-out: names the reads in stall signals.
  RetrievalMode mode = RetrievalMode::kPolling;
  // Makes a shard's records source (polling_sources() or the fan-out one).
  retrieval::RecordsSourceFactory make_source;
  // RetrievalConfig::drop_aggregates_outside_shard.
  bool drop_aggregates_outside_shard = false;
};

// How long a consumer waits before it tries again.
struct ConsumerTimings {
  std::chrono::milliseconds parent_check_interval{1000};
  std::chrono::milliseconds failure_backoff_base{200};
  std::chrono::milliseconds failure_backoff_max{30000};
};

// The counts a consumer adds to (the worker's totals for stats()).
// Thread safety: called from the consumers' steps, concurrently.
class ConsumerCounters {
 public:
  virtual ~ConsumerCounters() = default;
  virtual void records_processed(std::uint64_t count) = 0;
  virtual void processor_failed() = 0;
  virtual void corrupt_aggregates(std::uint64_t count) = 0;
  virtual void record_dead_lettered() = 0;
};

// ConsumerCounters whose totals are four atomics their owner keeps.
class AtomicConsumerCounters final : public ConsumerCounters {
 public:
  struct Totals {
    std::atomic<std::uint64_t>& records_processed;
    std::atomic<std::uint64_t>& processor_failures;
    std::atomic<std::uint64_t>& corrupt_aggregates;
    std::atomic<std::uint64_t>& records_dead_lettered;
  };
  explicit AtomicConsumerCounters(Totals totals) : totals_(totals) {}
  void records_processed(std::uint64_t count) override {
    totals_.records_processed.fetch_add(count);
  }
  void processor_failed() override { totals_.processor_failures.fetch_add(1); }
  void corrupt_aggregates(std::uint64_t count) override {
    totals_.corrupt_aggregates.fetch_add(count);
  }
  void record_dead_lettered() override { totals_.records_dead_lettered.fetch_add(1); }

 private:
  Totals totals_;
};

// Polling records sources: a retrieval::ShardFetcher per shard over `kinesis`, which must
// outlive every source made.
retrieval::RecordsSourceFactory polling_sources(kinesis::KinesisClient& kinesis,
                                                const RetrievalConfig& retrieval,
                                                const Clock& clock);

struct ConsumerContext {
  ConsumerRuntime runtime;
  ConsumerLeases leases;
  ShardReading reading;
  ConsumerTimings timings;
  std::unique_ptr<DeliveryFactory> deliveries;
  std::unique_ptr<ConsumerCounters> counters;
};

}  // namespace kcl::lifecycle
