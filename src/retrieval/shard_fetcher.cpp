#include "retrieval/shard_fetcher.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "aws/aws_json_client.h"
#include "retrieval/kpl_deaggregator.h"

namespace kcl::retrieval {

// Malformed responses in a row after which a fetcher gives up (see on_failure).
constexpr int kMaxMalformedInARow = 5;

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

std::uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

// ---- StartPosition ----

StartPosition StartPosition::trim_horizon() { return StartPosition{}; }

StartPosition StartPosition::latest() {
  StartPosition p;
  p.kind = Kind::kLatest;
  return p;
}

StartPosition StartPosition::at_timestamp(std::chrono::system_clock::time_point t) {
  StartPosition p;
  p.kind = Kind::kAtTimestamp;
  p.timestamp = t;
  return p;
}

StartPosition StartPosition::after_checkpoint(std::string sequence_number,
                                              SubSequenceNumber sub_sequence_number) {
  StartPosition p;
  p.kind = Kind::kAfterCheckpoint;
  p.sequence_number = std::move(sequence_number);
  p.sub_sequence_number = sub_sequence_number;
  return p;
}

std::string StartPosition::to_string() const {
  switch (kind) {
    case Kind::kTrimHorizon:
      return "TRIM_HORIZON";
    case Kind::kLatest:
      return "LATEST";
    case Kind::kAtTimestamp:
      return "AT_TIMESTAMP " +
             std::to_string(
                 std::chrono::duration_cast<milliseconds>(timestamp.time_since_epoch()).count());
    case Kind::kAfterCheckpoint:
      return "AFTER " + sequence_number + "/" + std::to_string(sub_sequence_number);
  }
  return "?";
}

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
    : client_(client),
      stream_(std::move(stream)),
      shard_id_(std::move(shard_id)),
      start_(std::move(start)),
      config_(std::move(config)),
      clock_(clock),
      rng_(jitter_seed ? *jitter_seed : random_seed()) {}

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
  if (!has_room()) return FetchStep{FetchOutcome::kQueueFull, Clock::MonoTime::max(), true};
  return step_get_records();
}

std::string ShardFetcher::iterator_request_body() const {
  nlohmann::json body;
  body["StreamName"] = stream_;
  body["ShardId"] = shard_id_;
  if (!last_fetched_sequence_.empty()) {
    // Re-positioning after an expired iterator: everything up to and including this Kinesis
    // record (all of its sub-records) was queued already.
    body["ShardIteratorType"] = "AFTER_SEQUENCE_NUMBER";
    body["StartingSequenceNumber"] = last_fetched_sequence_;
    return body.dump();
  }
  switch (start_.kind) {
    case StartPosition::Kind::kTrimHorizon:
      body["ShardIteratorType"] = "TRIM_HORIZON";
      break;
    case StartPosition::Kind::kLatest:
      body["ShardIteratorType"] = "LATEST";
      break;
    case StartPosition::Kind::kAtTimestamp: {
      body["ShardIteratorType"] = "AT_TIMESTAMP";
      // The JSON protocol's timestamps are seconds since the epoch; keep milliseconds.
      const auto ms =
          std::chrono::duration_cast<milliseconds>(start_.timestamp.time_since_epoch()).count();
      body["Timestamp"] = static_cast<double>(ms) / 1000.0;
      break;
    }
    case StartPosition::Kind::kAfterCheckpoint:
      // AT, not AFTER: the checkpoint may be sub-record k of an aggregate whose later
      // sub-records are still to be delivered; the resume filter drops what is <= (S, N).
      body["ShardIteratorType"] = "AT_SEQUENCE_NUMBER";
      body["StartingSequenceNumber"] = start_.sequence_number;
      break;
  }
  return body.dump();
}

Result<std::string> ShardFetcher::call(std::string_view operation, std::string body,
                                       std::chrono::milliseconds timeout) {
  // KinesisClient's typed methods take no per-call options; these two calls need their own
  // timeouts (and optionally fewer in-call retries), so they go through the client's raw
  // JSON client and are parsed here (GetRecords by the client's own parser).
  aws::CallOptions options;
  options.request_timeout = timeout;
  options.max_attempts = config_.call_max_attempts;
  last_call_start_ = clock_.now();
  calls_.fetch_add(1, std::memory_order_relaxed);
  return client_.raw().call(operation, std::move(body), options);
}

Clock::MonoTime ShardFetcher::earliest_next_call() const {
  if (!last_call_start_) return Clock::MonoTime{};
  return *last_call_start_ + config_.min_call_interval;
}

FetchStep ShardFetcher::step_get_iterator() {
  auto response =
      call("GetShardIterator", iterator_request_body(), config_.iterator_request_timeout);
  if (!response.ok()) return on_failure(response.status());

  const auto json = nlohmann::json::parse(*response, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return on_failure(Status(StatusCode::kInternal,
                             "GetShardIterator for stream " + stream_ + " shard " + shard_id_ +
                                 " returned a body that is not a JSON object"));
  }
  consecutive_failures_ = 0;
  consecutive_malformed_ = 0;
  const auto it = json.find("ShardIterator");
  if (it == json.end() || it->is_null()) {
    // A closed shard with nothing at or after the position: Kinesis answers a null iterator
    // (the Java KCL treats it as the end of the shard, and so do we).
    FetchedBatch batch;
    batch.shard_end = true;
    batch.millis_behind_latest = millis_behind_latest();
    push_batch(std::move(batch));
    state_ = State::kDone;
    shard_ended_.store(true, std::memory_order_release);
    finished_.store(true, std::memory_order_release);
    return FetchStep{FetchOutcome::kShardEnd};
  }
  if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
    return on_failure(Status(StatusCode::kInternal, "GetShardIterator for stream " + stream_ +
                                                        " shard " + shard_id_ +
                                                        " returned a ShardIterator that is not a "
                                                        "non-empty string"));
  }
  iterator_ = it->get<std::string>();
  state_ = State::kReading;
  next_due_ = earliest_next_call();
  return FetchStep{FetchOutcome::kGotIterator, next_due_};
}

FetchStep ShardFetcher::step_get_records() {
  nlohmann::json body;
  body["ShardIterator"] = iterator_;
  body["Limit"] = config_.max_records_per_call;
  auto response = call("GetRecords", body.dump(), config_.get_records_timeout);
  if (!response.ok()) return on_failure(response.status());

  kinesis::GetRecordsResult result;
  Status parsed = kinesis::parse_get_records_response_in_place(*response, result);
  if (!parsed.ok()) {
    return on_failure(
        parsed.with_context("GetRecords for stream " + stream_ + " shard " + shard_id_ + ": "));
  }
  consecutive_failures_ = 0;
  consecutive_malformed_ = 0;
  millis_behind_.store(result.millis_behind_latest, std::memory_order_relaxed);

  const bool fetched_any = !result.records.empty();
  FetchedBatch batch;
  batch.millis_behind_latest = result.millis_behind_latest;
  if (fetched_any) {
    last_fetched_sequence_ = result.records.back().sequence_number;
    batch.records.reserve(result.records.size());
    for (auto& kr : result.records) {
      const DeaggregationResult d = deaggregate(std::move(kr), shard_id_, batch.records);
      if (d.corrupt()) corrupt_.fetch_add(1, std::memory_order_relaxed);
    }
    if (resume_filter_) {
      skipped_.fetch_add(drop_through_checkpoint(batch.records, start_.sequence_number,
                                                 start_.sub_sequence_number),
                         std::memory_order_relaxed);
      // Sequence numbers only grow along a shard: once past S, nothing later can be <= it.
      if (compare_sequence_numbers(last_fetched_sequence_, start_.sequence_number) > 0) {
        resume_filter_ = false;
      }
    }
    for (const auto& r : batch.records) batch.bytes += r.data.size();
  }
  const std::size_t delivered = batch.records.size();

  if (result.shard_ended()) {
    batch.shard_end = true;
    batch.child_shards = std::move(result.child_shards);
    push_batch(std::move(batch));
    state_ = State::kDone;
    iterator_.clear();
    shard_ended_.store(true, std::memory_order_release);
    finished_.store(true, std::memory_order_release);
    return FetchStep{FetchOutcome::kShardEnd, Clock::MonoTime::max(), false, delivered};
  }

  iterator_ = std::move(*result.next_shard_iterator);
  if (delivered > 0) push_batch(std::move(batch));

  next_due_ = earliest_next_call();
  const bool caught_up = !fetched_any && result.millis_behind_latest == 0;
  if (caught_up) next_due_ = std::max(next_due_, clock_.now() + config_.idle_time_between_calls);
  return FetchStep{delivered > 0 ? FetchOutcome::kRecords : FetchOutcome::kNoRecords, next_due_,
                   false, delivered};
}

FetchStep ShardFetcher::on_failure(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInternal:
      // A malformed response (a body cut short by a dropped connection, a proxy's error
      // page): usually transient, and the same iterator is valid again, so back off as
      // below. Many in a row mean a broken peer: give up then.
      if (++consecutive_malformed_ > kMaxMalformedInARow) break;
      [[fallthrough]];
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded: {
      // Transient (a timeout included: kinesalite's AT_TIMESTAMP hang, a slow network):
      // back off with full jitter and try again, forever. The consumer decides when to stop.
      throttles_.fetch_add(1, std::memory_order_relaxed);
      if (consecutive_failures_ < 1'000'000) ++consecutive_failures_;
      milliseconds cap = config_.throttle_backoff_base;
      for (int i = 1; i < consecutive_failures_ && cap < config_.throttle_backoff_max; ++i) {
        cap *= 2;
      }
      cap = std::min(cap, config_.throttle_backoff_max);
      std::uniform_int_distribution<std::int64_t> jitter(0, cap.count());
      const milliseconds delay(jitter(rng_));
      next_due_ = std::max(earliest_next_call(), clock_.now() + delay);
      return FetchStep{FetchOutcome::kRetrying, next_due_};
    }
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
      std::string message = "stream " + stream_ + " was deleted or shard " + shard_id_ +
                            " no longer exists: " + status.message();
      if (status.aws())
        return fail(Status(StatusCode::kNotFound, std::move(message), *status.aws()));
      return fail(Status(StatusCode::kNotFound, std::move(message)));
    }
    default:
      break;
  }
  return fail(status.with_context("reading stream " + stream_ + " shard " + shard_id_ + ": "));
}

FetchStep ShardFetcher::fail(Status status) {
  state_ = State::kDone;
  iterator_.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    terminal_ = std::move(status);
  }
  finished_.store(true, std::memory_order_release);
  return FetchStep{FetchOutcome::kFailed};
}

void ShardFetcher::push_batch(FetchedBatch batch) {
  std::lock_guard<std::mutex> lock(mu_);
  queued_records_ += batch.records.size();
  queued_bytes_ += batch.bytes;
  queue_.push_back(std::move(batch));
}

std::optional<FetchedBatch> ShardFetcher::take_batch() {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.empty()) return std::nullopt;
  FetchedBatch batch = std::move(queue_.front());
  queue_.pop_front();
  queued_records_ -= batch.records.size();
  queued_bytes_ -= batch.bytes;
  return batch;
}

bool ShardFetcher::has_room() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_records_ < config_.max_prefetch_records &&
         queued_bytes_ < config_.max_prefetch_bytes;
}

bool ShardFetcher::drained() const {
  if (!finished()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty();
}

Status ShardFetcher::terminal_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return terminal_;
}

std::size_t ShardFetcher::queued_records() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_records_;
}

std::size_t ShardFetcher::queued_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_bytes_;
}

std::size_t ShardFetcher::queued_batches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

}  // namespace kcl::retrieval
