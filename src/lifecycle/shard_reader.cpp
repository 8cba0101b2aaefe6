#include "lifecycle/shard_reader.h"

#include <algorithm>

namespace kcl::lifecycle {

// Runs a shard's records source on the pool (see shard_reader.h).
class FetchTask final : public Task {
 public:
  FetchTask(std::shared_ptr<retrieval::RecordsSource> source, std::weak_ptr<Task> consumer,
            TaskPool& pool, const Clock& clock, std::shared_ptr<ReadHealth> health, Logger* logger,
            std::string component)
      : source_(std::move(source)),
        consumer_(std::move(consumer)),
        pool_(pool),
        clock_(clock),
        health_(std::move(health)),
        logger_(logger),
        component_(std::move(component)) {}

  std::optional<SteadyTime> run() override {
    if (stopped_.load()) return std::nullopt;
    const retrieval::FetchStep step = source_->fetch_step();
    note_outcome(step.outcome);
    const bool finished = source_->finished();
    if (step.records_queued > 0 || finished || step.outcome == retrieval::FetchOutcome::kShardEnd) {
      if (auto c = consumer_.lock()) pool_.schedule_now(c);
    }
    if (finished || step.wait_for_take) return std::nullopt;
    if (step.next_step_at == Clock::MonoTime::max()) return std::nullopt;
    return std::max(step.next_step_at, clock_.now());
  }
  void stop() { stopped_.store(true); }

 private:
  // Reads failing in a row (throttled, 5xx, timeouts; a cause of a stall): a backoff
  // continues the series, an answer ends it. A series is logged as FailureSeries says: its
  // first failure, the 3rd and each power of ten with the count, and its end with its length
  // (never a line per retry).
  void note_outcome(retrieval::FetchOutcome outcome) {
    using retrieval::FetchOutcome;
    if (outcome == FetchOutcome::kRetrying) {
      report(LogLevel::kWarn,
             health_->failures.failed(
                 Status(StatusCode::kUnavailable, source_->last_retry_reason()), clock_.now()));
    } else if (outcome == FetchOutcome::kRecords || outcome == FetchOutcome::kNoRecords ||
               outcome == FetchOutcome::kShardEnd) {
      report(LogLevel::kInfo, health_->failures.succeeded(clock_.now()));
      health_->answers.fetch_add(1, std::memory_order_relaxed);
    }
  }
  void report(LogLevel level, const std::optional<std::string>& line) const {
    if (line && logger_ && logger_->enabled(level)) logger_->log(level, component_, *line);
  }

  std::shared_ptr<retrieval::RecordsSource> source_;
  std::weak_ptr<Task> consumer_;
  TaskPool& pool_;
  const Clock& clock_;
  std::shared_ptr<ReadHealth> health_;
  Logger* const logger_;  // may be null
  const std::string component_;
  std::atomic<bool> stopped_{false};
};

ShardReader::ShardReader(TaskPool& pool, const Clock& clock, Logger* logger, std::string component,
                         std::string reads)
    : pool_(pool),
      clock_(clock),
      logger_(logger),
      component_(std::move(component)),
      health_(std::make_shared<ReadHealth>(std::move(reads))) {}

ShardReader::~ShardReader() { stop(); }

void ShardReader::start(std::shared_ptr<retrieval::RecordsSource> source,
                        std::weak_ptr<Task> consumer) {
  source_ = std::move(source);
  task_ = std::make_shared<FetchTask>(source_, std::move(consumer), pool_, clock_, health_, logger_,
                                      component_);
  published_.store(source_.get());
  source_->set_wakeup([task = std::weak_ptr<FetchTask>(task_), pool = &pool_] {
    if (auto t = task.lock()) pool->schedule_now(t);
  });
  pool_.schedule_now(task_);
}

std::optional<retrieval::FetchedBatch> ShardReader::take() {
  std::optional<retrieval::FetchedBatch> batch = source_->take_batch();
  if (batch) pool_.schedule_now(task_);  // room again below the prefetch bound
  return batch;
}

bool ShardReader::finished_and_drained() const { return source_->finished() && source_->drained(); }

std::int64_t ShardReader::millis_behind() const {
  return source_ ? source_->millis_behind_latest() : 0;
}

Status ShardReader::terminal_error() const { return source_->terminal_error(); }

std::uint64_t ShardReader::new_corrupt_aggregates() {
  if (!source_) return 0;
  const std::uint64_t seen = source_->corrupt_aggregates();
  if (seen <= corrupt_reported_) return 0;
  const std::uint64_t added = seen - corrupt_reported_;
  corrupt_reported_ = seen;
  return added;
}

void ShardReader::stop() {
  if (task_) task_->stop();
}

}  // namespace kcl::lifecycle
