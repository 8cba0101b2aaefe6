// Delivery: how a shard consumer hands its batches to the shard's record processor. The kind
// is chosen once, when the consumer context is built (make_delivery_factory); the consumer
// only asks its Delivery, never which kind it has.
//
//  - CallbackDelivery (callback_delivery.h) calls process_records with each batch.
//  - BisectingDelivery (bisecting_delivery.h) bisects a failing batch down to the records
//    that keep failing, for the dead-letter sink (ProcessorErrorPolicy::kDeadLetter).
//  - PacedDelivery (paced_delivery.h) hands batches to a processor that passes records on at
//    the application's pace (the pull consumer, paced_processor.h).
//
// A Delivery is made for one shard, on the consumer's step, and used there only (one call at
// a time, like the processor's callbacks). DeliveryHost is what it may do on its consumer.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kcl/clock.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"
#include "kcl/processing_config.h"
#include "kcl/processor.h"
#include "lifecycle/paced_processor.h"
#include "retrieval/records_source.h"

namespace kcl::lifecycle {

using SteadyTime = Clock::MonoTime;

// What a delivery may do on the shard consumer it delivers for (ShardConsumer implements it;
// the delivery tests have a recording one).
class DeliveryHost {
 public:
  virtual ~DeliveryHost() = default;
  // Runs the processor callback `what`, catching what it throws (counted as a processor
  // failure, its text kept as last_error()); false if it threw.
  virtual bool call_processor(const char* what, const std::function<void()>& call) = 0;
  virtual const std::string& last_error() const = 0;
  // The checkpointer handed to the processor (valid during the consumer's step).
  virtual Checkpointer& checkpointer() = 0;
  // From now on a checkpoint may name `last` and the records before it; returns the last
  // record a checkpoint could name before (for rewind_checkpoint_to).
  virtual std::optional<ExtendedSequenceNumber> allow_checkpoint_at(const Record& last) = 0;
  // After a failed call: a checkpoint may name only `previous` and what came before it.
  virtual void rewind_checkpoint_to(const std::optional<ExtendedSequenceNumber>& previous) = 0;
  // `count` records of `bytes` were processed (counters, metrics, the lease's load); this
  // ends the consumer's series of failures.
  virtual void count_processed(std::size_t count, std::size_t bytes) = 0;
  // One record was accepted by the dead-letter sink. The series of failures goes on (a
  // record set aside is no sign the processor works): the next failure's backoff grows on.
  virtual void count_dead_lettered() = 0;
  // `count` records were skipped unprocessed (ProcessorErrorPolicy::kSkip): counted apart
  // from the processed ones; this ends the series of failures.
  virtual void count_skipped(std::size_t count) = 0;
  // When to run again after a failure (backoff growing with the failures in a row: the
  // processor's and the dead-letter sink's, until a call succeeds).
  virtual SteadyTime backoff_after_failure() = 0;
  // Shutdown or the lease's loss was asked for (between parts of a batch, stop).
  virtual bool stop_asked() const = 0;
  virtual void log(LogLevel level, const std::string& message) const = 0;
  virtual MetricsSink& metrics() = 0;
  // The shard's metric tags.
  virtual MetricTags tags() const = 0;
  virtual SteadyTime now() const = 0;
  virtual const std::string& stream() const = 0;
  virtual const std::string& shard_id() const = 0;
};

// Whether a batch may be taken now, and when to be asked again at the latest.
struct Gate {
  bool accept = true;
  std::optional<SteadyTime> next_call;
};

class Delivery {
 public:
  virtual ~Delivery() = default;
  Delivery(const Delivery&) = delete;
  Delivery& operator=(const Delivery&) = delete;

  // The shard's processor, for the calls every delivery shares (initialize, lease_lost,
  // shard_ended, shutdown_requested).
  RecordProcessor& processor() { return *processor_; }

  // Reading started, right after initialize() returned. `wake` runs the consumer's next step
  // at a time (from any thread, for as long as the consumer lives).
  virtual void started(const DeliveryHost& host, std::function<void(SteadyTime)> wake) = 0;
  // Asked before a batch is taken from the source.
  virtual Gate gate(DeliveryHost& host) = 0;
  // Delivers `batch` (never empty). Empty when done with it (processed, skipped or dead-
  // lettered); else when to run the consumer again to go on with the same batch.
  virtual std::optional<SteadyTime> deliver(DeliveryHost& host, retrieval::FetchedBatch& batch) = 0;
  // Nothing to deliver: may call the processor anyway; when to be asked again at the latest.
  virtual std::optional<SteadyTime> idle(DeliveryHost& host) = 0;
  // The last batch was delivered: empty when shard_ended() may be called now, else when to
  // look again (records handed on are still being worked on).
  virtual std::optional<SteadyTime> before_shard_end(DeliveryHost& host) = 0;
  // A graceful stop: empty once the final checkpoint may be written, else when to look again
  // (`until`: the stop's drain bound).
  virtual std::optional<SteadyTime> drain(DeliveryHost& host, SteadyTime until) = 0;

 protected:
  Delivery(std::unique_ptr<RecordProcessor> processor, ProcessingConfig processing)
      : processor_(std::move(processor)), processing_(std::move(processing)) {}

  // Calls `call` as the processor's process_records for `records` of `batch`, timed (the
  // batch's lag as a gauge, the call's time as a timing).
  bool call_with(DeliveryHost& host, const retrieval::FetchedBatch& batch,
                 const std::function<void()>& call);
  // The whole of `batch` in one call; on failure delivered again after a backoff, or skipped
  // after ProcessingConfig::max_attempts_before_skip under kSkip.
  std::optional<SteadyTime> deliver_whole(DeliveryHost& host, retrieval::FetchedBatch& batch,
                                          const std::function<void()>& call);
  const ProcessingConfig& processing() const { return processing_; }
  // After a failed call (the checkpoint rewound): how many of `records` lead at or before the
  // stored checkpoint. The processor checkpointed them during the call, so it has declared
  // them done; delivered again, its checkpoints at them would be refused (a checkpoint never
  // moves back), so they are counted as processed and not delivered again.
  static std::size_t checkpointed_prefix(DeliveryHost& host, std::span<const Record> records);

 private:
  std::unique_ptr<RecordProcessor> processor_;
  const ProcessingConfig processing_;
  int attempts_ = 0;  // calls with the batch being delivered
};

// Makes each shard's Delivery, processor included. create() may throw (the application's
// factory did) or return null (it returned no processor).
// Thread safety: create() may be called from any thread; the factories behind it are called
// one at a time.
class DeliveryFactory {
 public:
  virtual ~DeliveryFactory() = default;
  virtual std::unique_ptr<Delivery> create(std::string_view shard_id) = 0;
};

// The delivery for a worker's processors: paced when `paced` is set, else callbacks, bisecting
// for dead letters under ProcessorErrorPolicy::kDeadLetter. `pace` gives a paced processor
// the worker's logger, metrics and clock (its wake-up is the consumer's).
std::unique_ptr<DeliveryFactory> make_delivery_factory(RecordProcessorFactory* callbacks,
                                                       PacedProcessorFactory* paced,
                                                       const ProcessingConfig& processing,
                                                       const PaceContext& pace);

}  // namespace kcl::lifecycle
