#include "lifecycle/paced_delivery.h"

#include <algorithm>

namespace kcl::lifecycle {

namespace {

// When to look again while the processor holds the shard: when it asked to be called, within
// a second regardless (its ack or wake-up usually comes first).
SteadyTime look_again(const DeliveryHost& host, const std::optional<SteadyTime>& next_call) {
  const SteadyTime backstop = host.now() + std::chrono::seconds(1);
  return next_call ? std::min(*next_call, backstop) : backstop;
}

}  // namespace

// The processor is a PacedRecordProcessor, so its RecordProcessor side converts back to it.
PacedDelivery::PacedDelivery(std::unique_ptr<PacedRecordProcessor> processor,
                             ProcessingConfig processing, PaceContext pace)
    : Delivery(std::move(processor), std::move(processing)),
      paced_(static_cast<PacedRecordProcessor&>(this->processor())),
      pace_(std::move(pace)) {}

void PacedDelivery::started(const DeliveryHost& host, std::function<void(SteadyTime)> wake) {
  PaceContext context = pace_;
  context.wake = std::move(wake);
  context.tags = host.tags();
  paced_.attach(std::move(context));
}

Gate PacedDelivery::gate(DeliveryHost& host) {
  const Pace pace = paced_.pace(host.checkpointer());
  return Gate{pace.accept_batch, pace.next_call};
}

std::optional<SteadyTime> PacedDelivery::deliver(DeliveryHost& host,
                                                 retrieval::FetchedBatch& batch) {
  // hand_in may move the records out; deliver_whole reads nothing of them after the call.
  return deliver_whole(host, batch, [&] { paced_.hand_in(batch.records, batch.bytes); });
}

std::optional<SteadyTime> PacedDelivery::before_shard_end(DeliveryHost& host) {
  const Pace pace = paced_.pace(host.checkpointer());
  if (paced_.drained()) return std::nullopt;
  return look_again(host, pace.next_call);
}

std::optional<SteadyTime> PacedDelivery::drain(DeliveryHost& host, SteadyTime until) {
  bool ok = true;
  if (!offering_stopped_) {
    offering_stopped_ = true;
    ok = host.call_processor("stop_offering", [&] { paced_.stop_offering(); });
  }
  Pace pace;  // checkpoints the watermark as it moves meanwhile
  bool drained = false;
  ok = ok && host.call_processor("pace", [&] {
    pace = paced_.pace(host.checkpointer());
    drained = paced_.drained();
  });
  if (!ok) {
    host.log(LogLevel::kError, host.last_error() + "; not waiting for the records handed on");
    return std::nullopt;
  }
  const SteadyTime now = host.now();
  if (drained || now >= until) return std::nullopt;
  // The processor wakes the consumer when its last record is finished; look again within a
  // second regardless, and at the bound.
  SteadyTime next = std::min(until, now + std::chrono::seconds(1));
  if (pace.next_call) next = std::min(next, std::max(now, *pace.next_call));
  return next;
}

}  // namespace kcl::lifecycle
