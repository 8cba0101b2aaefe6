#include "lifecycle/callback_delivery.h"

#include "base/repeat_report.h"

namespace kcl::lifecycle {

void CallbackDelivery::started(const DeliveryHost& host, std::function<void(SteadyTime)>) {
  last_call_at_ = host.now();
}

bool CallbackDelivery::process(DeliveryHost& host, const retrieval::FetchedBatch& batch,
                               std::span<const Record> records) {
  ProcessRecordsInput input{records, host.checkpointer(), batch.millis_behind_latest};
  last_call_at_ = host.now();
  return call_with(host, batch, [&] { processor().process_records(input); });
}

std::optional<SteadyTime> CallbackDelivery::deliver(DeliveryHost& host,
                                                    retrieval::FetchedBatch& batch) {
  last_call_at_ = host.now();
  return deliver_whole(host, batch, [&] {
    ProcessRecordsInput input{std::span<const Record>(batch.records), host.checkpointer(),
                              batch.millis_behind_latest};
    processor().process_records(input);
  });
}

// ProcessingConfig::empty_batch_interval: a shard that delivered nothing for that long gets
// an empty process_records call (the processor may checkpoint what it has done). Returns when
// the next one falls due; empty when off.
std::optional<SteadyTime> CallbackDelivery::idle(DeliveryHost& host) {
  const auto interval = processing().empty_batch_interval;
  if (interval.count() <= 0) return std::nullopt;
  const SteadyTime now = host.now();
  if (now - last_call_at_ < interval) return last_call_at_ + interval;
  last_call_at_ = now;
  ProcessRecordsInput input{std::span<const Record>(), host.checkpointer(), 0};
  if (!host.call_processor("process_records", [&] { processor().process_records(input); })) {
    // Nothing was delivered, so nothing is delivered again: the failure is only reported,
    // the 1st, 3rd, 10th, 100th, ... of a series with its count.
    ++empty_failures_;
    if (base::worth_reporting(empty_failures_)) {
      host.log(LogLevel::kError, host.last_error() + " (in an empty batch; " +
                                     std::to_string(empty_failures_) + " in a row)");
    }
  } else {
    empty_failures_ = 0;
  }
  return now + interval;
}

}  // namespace kcl::lifecycle
