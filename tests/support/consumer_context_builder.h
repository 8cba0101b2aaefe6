// ConsumerContextBuilder: a lifecycle::ConsumerContext for tests that make shard consumers by
// hand, set up as the worker sets up its own (Worker::Impl::make_consumer_parts): the test
// sets the fields it cares about, as it would a worker's config, and build() makes a context
// from them. The totals the consumers add to are the builder's own atomics.
//
// Each build() makes a new context that lives as long as the builder, so a consumer made from
// an earlier one keeps running while a test changes a setting for the next.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lifecycle/consumer_context.h"

namespace kcl::lifecycle::testing {

class ConsumerContextBuilder {
 public:
  std::string stream;
  kinesis::KinesisClient* kinesis = nullptr;  // polling reads, unless records_source_factory
  leases::LeaseStore* store = nullptr;
  leases::HeldLeases* held = nullptr;
  leases::LoadMeter* load = nullptr;
  // Exactly one of the two: callbacks or paced deliveries.
  RecordProcessorFactory* factory = nullptr;
  PacedProcessorFactory* paced_factory = nullptr;
  Logger* logger = nullptr;
  MetricsSink* metrics = &NoopMetricsSink::instance();
  const Clock* clock = nullptr;
  TaskPool* pool = nullptr;
  InitialPosition initial_position = InitialPosition::trim_horizon();
  RetrievalConfig retrieval;
  ProcessingConfig processing;
  retrieval::RecordsSourceFactory records_source_factory;
  std::function<void()> on_consumer_done;

  // What the consumers counted.
  std::atomic<std::uint64_t> records_delivered{0};
  std::atomic<std::uint64_t> processor_failures{0};
  std::atomic<std::uint64_t> corrupt_aggregates{0};
  std::atomic<std::uint64_t> records_dead_lettered{0};

  ConsumerContext& build() {
    auto ctx = std::make_unique<ConsumerContext>();
    ctx->runtime = {pool, clock, logger, metrics, on_consumer_done};
    ctx->leases = {store, held, load};
    ctx->reading.stream = stream;
    ctx->reading.initial_position_of = [position = initial_position](const std::string&) {
      return position;
    };
    ctx->reading.mode = retrieval.mode;
    ctx->reading.make_source = records_source_factory;
    if (!ctx->reading.make_source && kinesis && clock) {
      ctx->reading.make_source = polling_sources(*kinesis, retrieval, *clock);
    }
    ctx->timings = {processing.parent_check_interval, processing.failure_backoff_base,
                    processing.failure_backoff_max};
    PaceContext pace;
    pace.logger = logger;
    pace.metrics = metrics;
    pace.clock = clock;
    ctx->deliveries = make_delivery_factory(factory, paced_factory, processing, pace);
    ctx->counters = std::make_unique<AtomicConsumerCounters>(AtomicConsumerCounters::Totals{
        records_delivered, processor_failures, corrupt_aggregates, records_dead_lettered});
    built_.push_back(std::move(ctx));
    return *built_.back();
  }

 private:
  std::vector<std::unique_ptr<ConsumerContext>> built_;
};

}  // namespace kcl::lifecycle::testing
