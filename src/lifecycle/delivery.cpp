#include "lifecycle/delivery.h"

#include <cstdint>

#include "base/repeat_report.h"
#include "lifecycle/bisecting_delivery.h"
#include "lifecycle/callback_delivery.h"
#include "lifecycle/paced_delivery.h"

namespace kcl::lifecycle {

bool Delivery::call_with(DeliveryHost& host, const retrieval::FetchedBatch& batch,
                         const std::function<void()>& call) {
  host.metrics().gauge("consumer.millis_behind_latest",
                       static_cast<double>(batch.millis_behind_latest), host.tags());
  const SteadyTime start = host.now();
  const bool ok = host.call_processor("process_records", call);
  host.metrics().timing("processor.process_records", host.now() - start, host.tags());
  return ok;
}

std::size_t Delivery::checkpointed_prefix(DeliveryHost& host, std::span<const Record> records) {
  const ExtendedSequenceNumber stored = host.checkpointer().last_checkpoint();
  if (!stored.is_sequence_number()) return 0;
  std::size_t n = 0;
  for (; n < records.size(); ++n) {
    const ExtendedSequenceNumber at(std::string(records[n].sequence_number()),
                                    records[n].sub_sequence_number());
    if (!at.is_sequence_number() || at > stored) break;
  }
  return n;
}

// Before the call the checkpointer learns the batch's last record (so the processor may
// checkpoint at any record of this batch during the call, never at a later one). A failed call
// delivers the same batch again after a backoff (the checkpointer forgets the batch until
// then; records the processor checkpointed during the call are done and left out), or skips
// it after N attempts when the application opted in.
std::optional<SteadyTime> Delivery::deliver_whole(DeliveryHost& host,
                                                  retrieval::FetchedBatch& batch,
                                                  const std::function<void()>& call) {
  const std::optional<ExtendedSequenceNumber> before =
      host.allow_checkpoint_at(batch.records.back());
  ++attempts_;
  // Counted before the call: a paced processor may move the records out.
  const std::size_t count = batch.records.size();
  std::size_t bytes = 0;
  for (const Record& r : batch.records) bytes += r.data().size();
  if (!call_with(host, batch, call)) {
    if (processing_.on_processor_error != ProcessorErrorPolicy::kSkip ||
        attempts_ < processing_.max_attempts_before_skip) {
      // A processor that keeps failing fills no log: attempts 1, 3, 10, 100, ... are
      // reported, each with its count, and the delivery that ends the series.
      if (base::worth_reporting(static_cast<std::uint64_t>(attempts_))) {
        host.log(LogLevel::kError,
                 host.last_error() + "; delivering the same " + std::to_string(count) +
                     " records again after a backoff (attempt " + std::to_string(attempts_) + ")");
      }
      // Until it is delivered again, a checkpoint (say the final one in shutdown_requested,
      // if shutdown or lease loss comes first) must not name its records, or they would
      // never be delivered again.
      host.rewind_checkpoint_to(before);
      if (const std::size_t done = checkpointed_prefix(host, batch.records); done > 0) {
        std::size_t done_bytes = 0;
        for (std::size_t i = 0; i < done; ++i) done_bytes += batch.records[i].data().size();
        batch.records.erase(batch.records.begin(),
                            batch.records.begin() + static_cast<std::ptrdiff_t>(done));
        host.count_processed(done, done_bytes);
        if (batch.records.empty()) {  // checkpointed to its last record before it failed
          attempts_ = 0;
          return std::nullopt;
        }
      }
      return host.backoff_after_failure();
    }
    host.log(LogLevel::kError, host.last_error() + "; skipping the batch of " +
                                   std::to_string(count) + " records after " +
                                   std::to_string(attempts_) +
                                   " attempts (on_processor_error = kSkip)");
    attempts_ = 0;
    host.count_skipped(count);
    return std::nullopt;
  } else if (attempts_ > 1) {
    host.log(LogLevel::kInfo, "delivered the " + std::to_string(count) + " records at attempt " +
                                  std::to_string(attempts_));
  }
  attempts_ = 0;
  host.count_processed(count, bytes);
  return std::nullopt;
}

namespace {

// Makes the processors with the application's factory, one create() at a time.
class CallbackDeliveries final : public DeliveryFactory {
 public:
  CallbackDeliveries(RecordProcessorFactory& factory, ProcessingConfig processing)
      : factory_(factory), processing_(std::move(processing)) {}
  std::unique_ptr<Delivery> create(std::string_view shard_id) override {
    std::unique_ptr<RecordProcessor> processor;
    {
      std::lock_guard<std::mutex> lock(mu_);
      processor = factory_.create(shard_id);
    }
    if (!processor) return nullptr;
    if (processing_.on_processor_error == ProcessorErrorPolicy::kDeadLetter) {
      return std::make_unique<BisectingDelivery>(std::move(processor), processing_);
    }
    return std::make_unique<CallbackDelivery>(std::move(processor), processing_);
  }

 private:
  RecordProcessorFactory& factory_;
  const ProcessingConfig processing_;
  std::mutex mu_;
};

class PacedDeliveries final : public DeliveryFactory {
 public:
  PacedDeliveries(PacedProcessorFactory& factory, ProcessingConfig processing, PaceContext pace)
      : factory_(factory), processing_(std::move(processing)), pace_(std::move(pace)) {}
  std::unique_ptr<Delivery> create(std::string_view shard_id) override {
    std::unique_ptr<PacedRecordProcessor> processor;
    {
      std::lock_guard<std::mutex> lock(mu_);
      processor = factory_.create(shard_id);
    }
    if (!processor) return nullptr;
    return std::make_unique<PacedDelivery>(std::move(processor), processing_, pace_);
  }

 private:
  PacedProcessorFactory& factory_;
  const ProcessingConfig processing_;
  const PaceContext pace_;
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<DeliveryFactory> make_delivery_factory(RecordProcessorFactory* callbacks,
                                                       PacedProcessorFactory* paced,
                                                       const ProcessingConfig& processing,
                                                       const PaceContext& pace) {
  if (paced) return std::make_unique<PacedDeliveries>(*paced, processing, pace);
  if (callbacks) return std::make_unique<CallbackDeliveries>(*callbacks, processing);
  return nullptr;
}

}  // namespace kcl::lifecycle
