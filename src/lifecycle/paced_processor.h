// PacedProcessor: a record processor that keeps delivered records in a buffer of its own
// and hands them on at the application's pace (the pull consumer, src/pull). A worker built
// with a PacedProcessorFactory makes such processors for every shard; the shard consumer then
//
//  - attaches it once, right after initialize(), with a wake-up (run the consumer's next
//    step at a time, from any thread) and the worker's logger, metrics and clock;
//  - gives each batch to hand_in() instead of process_records(): the processor may move the
//    records out (the consumer reads nothing of them afterwards), which saves a copy of
//    every record; hand_in() must not throw once it moved a record;
//  - asks pace() before it takes each batch, and whenever it runs while processing: pace()
//    may checkpoint through the checkpointer it is given (on the consumer's thread, inside
//    the callback contract of kcl/processor.h) and says whether a batch may be delivered
//    now. While it says no, the shard delivers nothing and its reading stops at the
//    prefetch bound; other shards go on (no pool thread waits).
//  - at the shard's end, calls shard_ended() only once drained() (every record handed on
//    was finished), pacing meanwhile; a shutdown meanwhile ends the shard with
//    shutdown_requested() instead (the next owner reads the end again).
//  - at a graceful stop (a handoff of the lease, or the worker's shutdown), calls
//    stop_offering() once, then paces until drained() or the stop's drain bound passed, and
//    then shutdown_requested() for the final checkpoint (ShardConsumer::request_shutdown).
//
// Thread safety: attach(), hand_in(), pace() and drained() are called on the consumer's step, one
// at a time, like the RecordProcessor callbacks. The wake-up may be called from any thread until
// the processor's final callback (lease_lost, shard_ended or shutdown_requested) returned.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "kcl/clock.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"
#include "kcl/processor.h"

namespace kcl::lifecycle {

struct PaceContext {
  // Runs the consumer's next step at `at` (or earlier if one is due earlier).
  std::function<void(Clock::MonoTime at)> wake;
  Logger* logger = nullptr;  // may be null
  MetricsSink* metrics = nullptr;
  const Clock* clock = nullptr;
  // The shard's metric tags (the consumer's: shard, and stream on a worker of several
  // streams), so the processor's own series are forgotten with the consumer's; they live as
  // long as the consumer.
  MetricTags tags;
};

struct Pace {
  bool accept_batch = true;  // a batch may be delivered now
  // When to be asked again at the latest (e.g. a checkpoint falls due); nullopt = on the
  // consumer's own schedule or a wake-up.
  std::optional<Clock::MonoTime> next_call;
};

class PacedProcessor {
 public:
  virtual ~PacedProcessor() = default;
  virtual void attach(PaceContext context) = 0;
  // A delivered batch, in shard order; called instead of process_records(). `batch_bytes`
  // is what the batch holds in memory (the response body its records point into, and the
  // records), which the records keep alive: 0 when not known.
  virtual void hand_in(std::vector<Record>& records, std::size_t batch_bytes) = 0;
  virtual Pace pace(Checkpointer& checkpointer) = 0;
  // Every record delivered so far was finished by the application.
  virtual bool drained() = 0;
  // A graceful stop began: nothing more is handed on; records delivered but not handed on
  // yet are dropped (the next owner reads them from the checkpoint), so drained() comes to
  // mean "every record handed on was finished".
  virtual void stop_offering() = 0;
};

// A record processor that paces its own deliveries: both interfaces in one object.
class PacedRecordProcessor : public RecordProcessor, public PacedProcessor {};

// Makes one paced processor per shard. A worker given one (instead of a
// RecordProcessorFactory) delivers every shard's batches the paced way; the choice is made
// once, when the worker is built.
// Thread safety: create() is called from the worker's threads, one at a time.
class PacedProcessorFactory {
 public:
  virtual ~PacedProcessorFactory() = default;
  virtual std::unique_ptr<PacedRecordProcessor> create(std::string_view shard_id) = 0;
};

}  // namespace kcl::lifecycle
