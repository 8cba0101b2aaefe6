#include "pull/pull_processor.h"

#include "base/repeat_report.h"

namespace kcl::pull {

PullProcessor::PullProcessor(std::shared_ptr<PullHub> hub, std::string shard_id)
    : hub_(std::move(hub)), shard_(hub_->open_shard(shard_id)) {}

PullProcessor::~PullProcessor() {
  // Normally finished by the final callback already; this covers a consumer dropped
  // without one (nothing may wake it any more).
  hub_->finish(*shard_, false);
}

void PullProcessor::log(LogLevel level, const std::string& message) const {
  if (context_.logger && context_.logger->enabled(level)) {
    context_.logger->log(level, "pull " + shard_->shard_id(), message);
  }
}

void PullProcessor::initialize(const InitializationInput& input) {
  shard_->set_stream_name(input.stream_name);
}

void PullProcessor::attach(lifecycle::PaceContext context) {
  context_ = std::move(context);
  hub_->attach(*shard_, context_.wake, context_.metrics, context_.logger);
}

void PullProcessor::process_records(const ProcessRecordsInput& input) {
  std::vector<Record> copy(input.records.begin(), input.records.end());
  hub_->hand_in(*shard_, copy, 0);
}

void PullProcessor::hand_in(std::vector<Record>& records, std::size_t batch_bytes) {
  hub_->hand_in(*shard_, records, batch_bytes);
}

void PullProcessor::write(Checkpointer& checkpointer, const ExtendedSequenceNumber& position) {
  const Status s =
      checkpointer.checkpoint(position.sequence_number(), position.sub_sequence_number());
  if (s.ok()) {
    failed_writes_ = 0;
    hub_->checkpoint_written(*shard_, position);
    return;
  }
  if (s.code() == StatusCode::kLeaseLost) {
    log(LogLevel::kInfo, "checkpoint at " + position.to_string() +
                             " not written: the lease was lost (" + s.to_string() + ")");
    return;
  }
  // Kept as due: the next pace tries again.
  ++failed_writes_;
  if (base::worth_reporting(failed_writes_)) {
    log(LogLevel::kWarn,
        "checkpoint at " + position.to_string() + " failed" +
            (failed_writes_ > 1 ? " (" + std::to_string(failed_writes_) + " times in a row)"
                                : std::string()) +
            ": " + s.to_string() + "; trying again at the next interval");
  }
}

lifecycle::Pace PullProcessor::pace(Checkpointer& checkpointer) {
  PaceDecision d = hub_->pace(*shard_);
  // The consumer's tags (with the stream on a worker of several streams); a processor
  // attached without them is tagged with its shard.
  const MetricTag shard_tag{"shard", shard_->shard_id()};
  const MetricTags tags = context_.tags.empty() ? MetricTags(&shard_tag, 1) : context_.tags;
  if (context_.metrics) {
    context_.metrics->gauge("pull.unacked_records", static_cast<double>(d.unacked), tags);
  }
  if (d.stuck_report) {
    log(LogLevel::kWarn, *d.stuck_report);
    if (context_.metrics) context_.metrics->count("pull.stuck_records", 1, tags);
  }
  if (d.checkpoint_at) write(checkpointer, *d.checkpoint_at);
  return lifecycle::Pace{d.accept_batch, d.next_call};
}

bool PullProcessor::drained() { return hub_->drained(*shard_); }

void PullProcessor::stop_offering() { hub_->stop_offering(*shard_); }

void PullProcessor::lease_lost() { hub_->finish(*shard_, true); }

void PullProcessor::shard_ended(Checkpointer& checkpointer) {
  // Called once every record was acknowledged: SHARD_END lets the children start.
  const Status s = checkpointer.checkpoint();
  const Clock& clock = context_.clock ? *context_.clock : SystemClock::instance();
  if (s.ok()) {
    if (auto line = shard_end_failures_.succeeded(clock.now())) log(LogLevel::kInfo, *line);
    hub_->finish(*shard_, false);
    return;
  }
  if (s.code() == StatusCode::kLeaseLost) {
    log(LogLevel::kInfo, "SHARD_END not checkpointed: the lease was lost (" + s.to_string() + ")");
    hub_->finish(*shard_, true);
    return;
  }
  // The consumer calls this again after a backoff: one series, logged with its count.
  if (auto line = shard_end_failures_.failed(s, clock.now())) log(LogLevel::kWarn, *line);
}

void PullProcessor::shutdown_requested(Checkpointer& checkpointer) {
  if (const std::size_t unacked = hub_->unacked(*shard_); unacked > 0) {
    log(LogLevel::kWarn, std::to_string(unacked) +
                             " records taken were not acknowledged before the shard's lease was "
                             "handed on (the wait is bounded by the lease handoff_timeout, or "
                             "shutdown_ack_timeout at shutdown): checkpointing what was "
                             "acknowledged; the next owner delivers them again");
  }
  if (auto position = hub_->final_checkpoint(*shard_)) write(checkpointer, *position);
  hub_->finish(*shard_, false);
}

}  // namespace kcl::pull
