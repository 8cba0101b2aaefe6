// BisectingDelivery: a CallbackDelivery that bisects a failing batch down to the records that
// keep failing while their neighbours succeed, for the dead-letter sink
// (ProcessorErrorPolicy::kDeadLetter).
//
// The parts are chosen by BatchBisector, which also tells a poison record (it fails alone,
// its neighbours succeed) from an outage (its neighbours fail too: the rest of the batch is
// delivered again as a whole after a backoff, nothing dead-lettered, until
// ProcessingConfig::dead_letter_outage_limit has passed without a successful call). Each
// poison record goes to the sink (kcl/dead_letter.h) before the shard goes on. Until the sink
// accepts a record the shard waits (asked again after the failure backoff) and no checkpoint
// can name the record. Between parts, shutdown and lease loss are looked at: the parts not yet
// delivered are after the last record a checkpoint may name, so the next owner reads them
// again.
//
// A failure that repeats (the same part, an outage, a sink refusing) is logged once per
// series, the 1st, 3rd, 10th, 100th, ... time with its count, and the success that ends the
// series says how long it lasted.
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
  std::optional<SteadyTime> after_failure(DeliveryHost& host, const retrieval::FetchedBatch& batch);
  std::optional<SteadyTime> dead_letter(DeliveryHost& host, const retrieval::FetchedBatch& batch,
                                        std::size_t index);
  void report_refusal(DeliveryHost& host, const std::string& sink, const Record& record,
                      const Status& refused);
  // A process_records call succeeded: the series of failures (if any) ends.
  void end_series(DeliveryHost& host, std::size_t records);
  // Whether dead_letter_outage_limit has passed since the series of failures began.
  bool outage_outlasted_limit(const DeliveryHost& host) const;

  std::optional<BatchBisector> bisector_;  // how the batch being delivered is being delivered
  bool vouched_ = false;                   // the last call of the previous batch succeeded
  std::string letter_error_;               // the failure of the record due to be dead-lettered
  std::string letter_reason_;              // why it is a poison record
  std::string suspect_error_;              // the failure of the suspect (BatchBisector::suspect())
  // The series of failed calls since the last successful one (the whole shard's, across
  // batches): its length, when it began, its outage verdicts and bisections.
  std::uint64_t failures_ = 0;
  std::optional<SteadyTime> failing_since_;
  std::uint64_t outages_ = 0;
  std::uint64_t bisections_ = 0;
  bool retried_ = false;             // a backoff was waited in this series (its end is logged)
  bool gave_up_ = false;             // dead_letter_outage_limit passed in this series (logged once)
  std::uint64_t sink_failures_ = 0;  // the sink's refusals in a row
};

}  // namespace kcl::lifecycle
