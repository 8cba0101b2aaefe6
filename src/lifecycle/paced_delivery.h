// PacedDelivery: hands each batch to a processor that passes the records on at the
// application's pace (PacedProcessor, the pull consumer). The processor is asked before each
// batch whether it takes one; the shard's end waits until every record it handed on was
// finished; a graceful stop first tells it to stop offering records, then waits (bounded) for
// those handed on. A failed hand-in is retried or skipped as a callback delivery's call is.
#pragma once

#include "lifecycle/delivery.h"
#include "lifecycle/paced_processor.h"

namespace kcl::lifecycle {

class PacedDelivery final : public Delivery {
 public:
  // `pace`: the logger, metrics and clock the processor is attached with.
  PacedDelivery(std::unique_ptr<PacedRecordProcessor> processor, ProcessingConfig processing,
                PaceContext pace);

  void started(const DeliveryHost& host, std::function<void(SteadyTime)> wake) override;
  Gate gate(DeliveryHost& host) override;
  std::optional<SteadyTime> deliver(DeliveryHost& host, retrieval::FetchedBatch& batch) override;
  std::optional<SteadyTime> idle(DeliveryHost&) override { return std::nullopt; }
  std::optional<SteadyTime> before_shard_end(DeliveryHost& host) override;
  std::optional<SteadyTime> drain(DeliveryHost& host, SteadyTime until) override;

 private:
  PacedProcessor& paced_;  // the processor, as the pacing side of it
  PaceContext pace_;
  bool offering_stopped_ = false;  // the processor was told to stop offering
};

}  // namespace kcl::lifecycle
