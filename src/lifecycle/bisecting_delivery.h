// BisectingDelivery: a CallbackDelivery that bisects a failing batch down to the records that
// keep failing, for the dead-letter sink (ProcessorErrorPolicy::kDeadLetter).
//
// The parts are chosen by BatchBisector; each record that keeps failing goes to the sink
// (kcl/dead_letter.h) before the shard goes on.
// Until the sink accepts a record the shard waits (asked again after the failure backoff) and
// no checkpoint can name the record. Between parts, shutdown and lease loss are looked at: the
// parts not yet delivered are after the last record a checkpoint may name, so the next owner
// reads them again.
//
// A part that keeps failing is logged once per series, the 1st, 3rd, 10th, 100th, ... failure
// with its count, and the success that ends the series says how long it lasted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "lifecycle/batch_bisector.h"
#include "lifecycle/callback_delivery.h"

namespace kcl::lifecycle {

class BisectingDelivery final : public CallbackDelivery {
 public:
  BisectingDelivery(std::unique_ptr<RecordProcessor> processor, ProcessingConfig processing)
      : CallbackDelivery(std::move(processor), std::move(processing)) {}

  std::optional<SteadyTime> deliver(DeliveryHost& host, retrieval::FetchedBatch& batch) override;

 private:
  std::optional<SteadyTime> deliver_part(DeliveryHost& host, retrieval::FetchedBatch& batch,
                                         const BatchBisector::Part& part);
  std::optional<SteadyTime> dead_letter_current(DeliveryHost& host, const Record& record);
  void report_refusal(DeliveryHost& host, const std::string& sink, const Record& record,
                      const Status& refused);
  // A process_records call succeeded: the series of failures (if any) ends.
  void end_series(DeliveryHost& host, std::size_t records);

  std::optional<BatchBisector> bisector_;  // how the batch being delivered is being delivered
  bool letter_due_ = false;                // bisector_'s current record is to be dead-lettered
  std::string letter_error_;               // the failure that made it so
  std::uint64_t sink_failures_ = 0;        // the sink's refusals in a row (logged as a series)
  // The series of failed calls since the last successful one: its length, when it began,
  // whether a backoff was waited in it (its end is logged then).
  std::uint64_t failures_ = 0;
  std::optional<SteadyTime> failing_since_;
  bool retried_ = false;
};

}  // namespace kcl::lifecycle
