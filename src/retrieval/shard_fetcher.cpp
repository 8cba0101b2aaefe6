#include "retrieval/shard_fetcher.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "aws/aws_json_client.h"
#include "aws/retry.h"
#include "retrieval/kpl_deaggregator.h"
#include "retrieval/resume.h"
#include "retrieval/shard_end_check.h"
#include "retrieval/shard_not_found.h"

namespace kcl::retrieval {

namespace {

using std::chrono::milliseconds;

bool is_decimal(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

}  // namespace

std::string_view to_string(FetchOutcome outcome) noexcept {
  switch (outcome) {
    case FetchOutcome::kNotDue:
      return "not due";
    case FetchOutcome::kQueueFull:
      return "queue full";
    case FetchOutcome::kGotIterator:
      return "got iterator";
    case FetchOutcome::kRecords:
      return "records";
    case FetchOutcome::kNoRecords:
      return "no records";
    case FetchOutcome::kRetrying:
      return "retrying";
    case FetchOutcome::kIteratorExpired:
      return "iterator expired";
    case FetchOutcome::kShardEnd:
      return "shard end";
    case FetchOutcome::kFailed:
      return "failed";
    case FetchOutcome::kFinished:
      return "finished";
  }
  return "?";
}

// ---- ShardFetcher ----

ShardFetcher::ShardFetcher(kinesis::KinesisClient& client, std::string stream, std::string shard_id,
                           StartPosition start, RetrievalConfig config, const Clock& clock,
                           std::optional<std::uint64_t> jitter_seed)
    : QueuedRecordsSource(config.max_prefetch_records, config.max_prefetch_bytes),
      client_(client),
      stream_(std::move(stream)),
      shard_id_(std::move(shard_id)),
      start_(std::move(start)),
      config_(std::move(config)),
      clock_(clock),
      retries_(aws::SeriesRule::records_source(config_.throttle_backoff_base,
                                               config_.throttle_backoff_max),
               jitter_seed) {}

FetchStep ShardFetcher::fetch_step() {
  if (state_ == State::kDone) return FetchStep{FetchOutcome::kFinished};
  if (state_ == State::kNew) {
    std::vector<std::string> problems = config_.validate();
    if (start_.kind == StartPosition::Kind::kAfterCheckpoint &&
        !is_decimal(start_.sequence_number)) {
      problems.push_back("the checkpoint to resume from, \"" + start_.sequence_number +
                         "\", is not a sequence number (decimal digits)");
    }
    if (!problems.empty()) {
      return fail(Status(
          StatusCode::kInvalidArgument,
          "cannot read stream " + stream_ + " shard " + shard_id_ + ": " + join(problems, "; ")));
    }
    resume_filter_ = start_.kind == StartPosition::Kind::kAfterCheckpoint;
    state_ = State::kNeedIterator;
  }

  const Clock::MonoTime now = clock_.now();
  if (now < next_due_) return FetchStep{FetchOutcome::kNotDue, next_due_};
  if (state_ == State::kNeedIterator) return step_get_iterator();
  // The bound is checked before the call only: one response may take the queue past it.
  if (!has_room()) return queue_full();
  return step_get_records();
}

kinesis::IteratorPosition ShardFetcher::iterator_position() const {
  return resume_position(start_, last_fetched_sequence_);
}

aws::CallOptions ShardFetcher::call_options(std::chrono::milliseconds timeout) {
  // One attempt per call by default: the fetcher's own backoff (rescheduling, never
  // blocking a pool thread) is the only retry loop of the records path.
  aws::CallOptions options;
  options.request_timeout = timeout;
  options.max_attempts = config_.call_max_attempts;
  last_call_start_ = clock_.now();
  calls_.fetch_add(1, std::memory_order_relaxed);
  return options;
}

Clock::MonoTime ShardFetcher::earliest_next_call() const {
  if (!last_call_start_) return Clock::MonoTime{};
  return *last_call_start_ + config_.min_call_interval;
}

Clock::MonoTime ShardFetcher::earliest_next_records_call() const {
  if (!last_records_call_start_) return Clock::MonoTime{};
  const Clock::MonoTime by_calls = *last_records_call_start_ + config_.min_call_interval;
  return read_paid_until_ ? std::max(by_calls, *read_paid_until_) : by_calls;
}

// With pacing by bytes, a call asks for about one second of the shard's read budget at most
// (by the mean record size of the last answer with records): the answer is paid for before
// the next call anyway, and a smaller one comes back sooner, is delivered sooner, holds less
// memory, and arrives within the second the budget holds (an answer that takes longer than
// that delays the next call by the difference). The first call asks for max_records_per_call.
int ShardFetcher::records_limit() const {
  const int most = config_.max_records_per_call;
  const std::size_t rate = config_.max_read_bytes_per_second;
  if (rate == 0 || record_bytes_ == 0) return most;
  const std::size_t fits = std::max<std::size_t>(1, rate / record_bytes_);
  return fits < static_cast<std::size_t>(most) ? static_cast<int>(fits) : most;
}

// The shard's read budget (RetrievalConfig::max_read_bytes_per_second): it refills at the
// rate, holds at most one second of it and is empty at the first call; an answer's bytes
// are charged when it arrives, and read_paid_until_ is when the budget is out of debt
// again. The service counts a shard's reads so (API_GetRecords: at most 2 MiB a second; a
// 10 MiB answer, then 5 s of refusals), so a call made then is not throttled for bytes.
void ShardFetcher::pay_for_answer(std::size_t bytes, Clock::MonoTime call_start,
                                  Clock::MonoTime answered) {
  const std::uint64_t rate = config_.max_read_bytes_per_second;
  if (rate == 0) return;
  Clock::MonoTime from = read_paid_until_ ? *read_paid_until_ : call_start;
  from = std::max(from, answered - std::chrono::seconds(1));
  // Rounded up to the millisecond: never early.
  const std::uint64_t cost_ms = (static_cast<std::uint64_t>(bytes) * 1000 + rate - 1) / rate;
  read_paid_until_ = from + milliseconds(static_cast<milliseconds::rep>(cost_ms));
}

FetchStep ShardFetcher::step_get_iterator() {
  auto response = client_.get_shard_iterator(stream_, shard_id_, iterator_position(),
                                             call_options(config_.iterator_request_timeout));
  if (!response.ok()) return on_failure(response.status());
  retries_.on_success();
  if (!response->has_value()) {
    // A closed shard with nothing at or after the position: Kinesis answers a null iterator
    // (the Java KCL treats it as the end of the shard, and so do we), once ListShards shows
    // the shard closed (an answer that lost its iterator is no end: shard_end_check.h).
    if (Status open = confirm_shard_end(client_, stream_, shard_id_, "a GetShardIterator answer");
        !open.ok()) {
      return on_false_end(open);
    }
    FetchedBatch batch;
    batch.millis_behind_latest = millis_behind_latest();
    state_ = State::kDone;
    return finish_at_shard_end(std::move(batch));
  }
  iterator_ = std::move(**response);
  state_ = State::kReading;
  next_due_ = earliest_next_records_call();
  return FetchStep{FetchOutcome::kGotIterator, next_due_};
}

FetchStep ShardFetcher::step_get_records() {
  // result_ is reused from call to call; each answer gets a buffer of its own, which the
  // batch's records keep. The records go from the parser straight into the batch (no vector
  // of parsed records in between).
  kinesis::GetRecordsResult& result = result_;
  FetchedBatch batch;
  const int limit = records_limit();
  BatchBuilder builder(result, shard_id_, batch, static_cast<std::size_t>(limit));
  const aws::CallOptions options = call_options(config_.get_records_timeout);
  last_records_call_start_ = last_call_start_;
  Status got = client_.get_records(iterator_, limit, result, options, &builder);
  if (!got.ok()) {
    // Whatever the parser handed over before it failed goes with `batch`; the body too.
    result.buffer.reset();
    if (got.code() == StatusCode::kInternal) {
      got = got.with_context("GetRecords for stream " + stream_ + " shard " + shard_id_ + ": ");
    }
    return on_failure(got);
  }
  retries_.on_success();
  set_millis_behind(result.millis_behind_latest);
  pay_for_answer(builder.answer_bytes(), *last_records_call_start_, clock_.now());
  if (builder.answer_records() > 0) {
    record_bytes_ = std::max<std::size_t>(1, builder.answer_bytes() / builder.answer_records());
  }

  const bool fetched_any = builder.received_any();
  batch.millis_behind_latest = result.millis_behind_latest;
  if (fetched_any) last_fetched_sequence_.assign(builder.last_sequence());
  // Also for an answer without records: finish() lets go of its body either way.
  const BatchCounts counts = builder.finish(result, start_, resume_filter_);
  count_corrupt(counts.corrupt_aggregates);
  skipped_.fetch_add(counts.skipped_by_checkpoint, std::memory_order_relaxed);
  const std::size_t delivered = batch.records.size();

  if (result.shard_ended() && result.child_shards.empty()) {
    if (Status open = confirm_shard_end(client_, stream_, shard_id_, "a GetRecords answer");
        !open.ok()) {
      // Not the shard's end: what came is delivered, and the shard is read on after it with
      // a new iterator (on_false_end).
      if (delivered > 0) push_batch(std::move(batch));
      iterator_.clear();
      state_ = State::kNeedIterator;
      FetchStep step = on_false_end(open);
      step.records_queued = delivered;
      return step;
    }
  }
  if (result.shard_ended()) {
    batch.child_shards = std::move(result.child_shards);
    state_ = State::kDone;
    iterator_.clear();
    return finish_at_shard_end(std::move(batch));
  }

  iterator_ = std::move(*result.next_shard_iterator);
  false_ends_ = 0;
  if (delivered > 0) push_batch(std::move(batch));

  // Behind (records came, or MillisBehindLatest > 0): again as soon as the call rate and the
  // shard's read budget allow. Caught up: after idle_time_between_calls.
  next_due_ = earliest_next_records_call();
  const bool caught_up = !fetched_any && result.millis_behind_latest == 0;
  if (caught_up) next_due_ = std::max(next_due_, clock_.now() + config_.idle_time_between_calls);
  return FetchStep{delivered > 0 ? FetchOutcome::kRecords : FetchOutcome::kNoRecords, next_due_,
                   false, delivered};
}

FetchStep ShardFetcher::on_failure(const Status& status) {
  switch (status.code()) {
    case StatusCode::kExpiredIterator:
      if (state_ == State::kReading) {
        // Re-position AFTER the last record fetched (or at the original start when nothing
        // was fetched): see iterator_request_body().
        expired_.fetch_add(1, std::memory_order_relaxed);
        iterator_.clear();
        state_ = State::kNeedIterator;
        next_due_ = earliest_next_call();
        return FetchStep{FetchOutcome::kIteratorExpired, next_due_};
      }
      break;  // not expected from GetShardIterator: terminal
    case StatusCode::kNotFound: {
      // The stream is gone, or only the shard (retrieval/shard_not_found.h).
      ShardNotFound judged = judge_shard_not_found(client_, stream_, shard_id_, status, retries_);
      switch (judged.verdict) {
        case ShardNotFound::Verdict::kRetry:
          note_retry_reason(judged.retry_reason);
          next_due_ = clock_.now() + judged.retry_in;
          return FetchStep{FetchOutcome::kRetrying, next_due_};
        case ShardNotFound::Verdict::kShardGone:
          state_ = State::kDone;
          iterator_.clear();
          return finish_at_shard_end(FetchedBatch{});
        case ShardNotFound::Verdict::kStreamGone:
          return fail(std::move(judged.failure));
      }
      break;
    }
    default: {
      // The retry policy decides (aws/retry.h, SeriesRule::records_source): throttling, 5xx,
      // timeouts (kinesalite's AT_TIMESTAMP hang, a slow network) and a call's deadline are
      // retried for ever, a malformed answer (a body cut short by a dropped connection, a
      // proxy's page; the same iterator is valid again) up to 5 in a row. The fetcher is
      // rescheduled after the delay instead of sleeping; the consumer decides when to stop.
      const std::optional<milliseconds> delay = retries_.next_delay(status);
      if (!delay) break;
      throttles_.fetch_add(1, std::memory_order_relaxed);
      note_retry_reason(status.to_string());
      next_due_ = std::max(earliest_next_call(), clock_.now() + *delay);
      return FetchStep{FetchOutcome::kRetrying, next_due_};
    }
  }
  return fail(status.with_context("reading stream " + stream_ + " shard " + shard_id_ + ": "));
}

// An answer that ended the shard while ListShards shows it open (shard_end_check.h): read on
// after a backoff, and after kFalseEndsBeforeFailing of them in a row (an answer's success
// resets the retry series, so its count of malformed answers cannot), the source fails with
// the error (the consumer restarts it after a backoff, and the shard shows as failing).
FetchStep ShardFetcher::on_false_end(const Status& open) {
  if (++false_ends_ >= kFalseEndsBeforeFailing) {
    return fail(open.with_context("reading stream " + stream_ + " shard " + shard_id_ + " (" +
                                  std::to_string(false_ends_) + " times in a row): "));
  }
  return on_failure(open);
}

FetchStep ShardFetcher::fail(Status status) {
  state_ = State::kDone;
  iterator_.clear();
  return finish_with_error(std::move(status));
}

}  // namespace kcl::retrieval
