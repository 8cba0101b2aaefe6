// CallbackDelivery: delivers each batch to the processor's process_records() (the worker's
// callback processors). A failed call delivers the same batch again after a backoff, or skips
// it after ProcessingConfig::max_attempts_before_skip under kSkip; a shard that delivered
// nothing for ProcessingConfig::empty_batch_interval gets an empty process_records() call.
#pragma once

#include <cstdint>
#include <span>

#include "lifecycle/delivery.h"

namespace kcl::lifecycle {

class CallbackDelivery : public Delivery {
 public:
  CallbackDelivery(std::unique_ptr<RecordProcessor> processor, ProcessingConfig processing)
      : Delivery(std::move(processor), std::move(processing)) {}

  void started(const DeliveryHost& host, std::function<void(SteadyTime)> wake) override;
  Gate gate(DeliveryHost&) override { return Gate{}; }
  std::optional<SteadyTime> deliver(DeliveryHost& host, retrieval::FetchedBatch& batch) override;
  std::optional<SteadyTime> idle(DeliveryHost& host) override;
  std::optional<SteadyTime> before_shard_end(DeliveryHost&) override { return std::nullopt; }
  std::optional<SteadyTime> drain(DeliveryHost&, SteadyTime) override { return std::nullopt; }

 protected:
  // process_records with `records` (the whole of `batch`, or a part of it); whether it
  // returned without throwing.
  bool process(DeliveryHost& host, const retrieval::FetchedBatch& batch,
               std::span<const Record> records);

 private:
  SteadyTime last_call_at_{};         // the last process_records call (or initialize)
  std::uint64_t empty_failures_ = 0;  // empty-batch calls failed in a row
};

}  // namespace kcl::lifecycle
