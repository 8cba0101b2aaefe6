#include "retrieval/fanout_source.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "aws/cbor.h"
#include "aws/http_transport.h"
#include "aws/json_util.h"
#include "aws/retry.h"
#include "eventstream/event_stream.h"
#include "kinesis/kinesis_cbor.h"
#include "retrieval/fanout_consumers.h"
#include "retrieval/resume.h"
#include "retrieval/shard_end_check.h"
#include "retrieval/shard_not_found.h"

namespace kcl::retrieval {

using std::chrono::milliseconds;

namespace {
// A record's JSON from Kinesis takes at least this many bytes (its 56-digit sequence number
// alone takes 76 with its key), so an event's payload holds at most its size over this many
// records. A payload of shorter records only means the batch's vector grows as it would anyway.
constexpr std::size_t kMinRecordJsonBytes = 96;
// At most as many records as one GetRecords answer: larger events grow the vector as usual.
constexpr std::size_t kMaxRecordsReserved = 10000;

// The message of an exception or error event: its payload's message (or Message), in CBOR
// when its :content-type says so (AWS answers a CBOR subscription in CBOR), else in JSON;
// else its :error-message header.
std::string service_error_message(const eventstream::Message& m) {
  std::string message(m.string_header(":error-message"));
  if (m.string_header(":content-type").find("cbor") != std::string_view::npos) {
    std::string type, text, why;
    if (aws::cbor::read_error_body(m.payload(), type, text, why) && !text.empty()) message = text;
    return message;
  }
  auto body = nlohmann::json::parse(m.payload(), nullptr, false);
  if (body.is_object()) {
    for (const char* key : {"message", "Message"}) {
      if (body.contains(key) && body[key].is_string()) message = body[key];
    }
  }
  return message;
}
}  // namespace

// What the transport's thread hands to fetch_step(), for one subscription.
struct FanOutSource::Inbox {
  std::mutex mu;
  // Large events are received into buffers their records give back when done with them.
  eventstream::Decoder decoder{eventstream::Decoder::kDefaultMaxMessageBytes,
                               &aws::response_body_recycler()};
  std::deque<eventstream::Message> messages;
  std::size_t bytes = 0;  // bytes held: the frames of the messages waiting
  std::size_t max_bytes = 0;
  int http_status = 0;
  aws::Headers headers;
  std::string error_body;  // the body of an answer other than 200 (capped)
  std::optional<Status> decode_error;
  bool closed = false;
  Status close_status;
  bool paused = false;
  std::function<void()> wake;
};

class FanOutSource::Handler final : public aws::StreamHandler {
 public:
  explicit Handler(std::shared_ptr<Inbox> inbox) : in_(std::move(inbox)) {}

  void on_response(int status, const aws::Headers& headers) override {
    std::lock_guard<std::mutex> lock(in_->mu);
    in_->http_status = status;
    in_->headers = headers;
  }

  // The source is woken only when a message is complete (or the stream is corrupt): the
  // pieces of a large event (16 KB HTTP/2 frames) do not each wake it for nothing.
  bool on_data(std::string_view bytes) override {
    {
      std::lock_guard<std::mutex> lock(in_->mu);
      if (in_->decode_error) return true;  // a corrupt stream: dropped, the source ends it
      if (in_->http_status != 200) {
        if (in_->error_body.size() < 65536) in_->error_body.append(bytes.substr(0, 65536));
        return true;
      }
      if (in_->bytes >= in_->max_bytes) {
        // The source has not taken what came: pause the stream (HTTP/2 flow control).
        in_->paused = true;
        return false;
      }
      decoded_.clear();
      Status s = in_->decoder.feed(bytes, decoded_);
      for (eventstream::Message& m : decoded_) {
        in_->bytes += m.frame.size();
        in_->messages.push_back(std::move(m));
      }
      if (!s.ok()) in_->decode_error = std::move(s);
      if (decoded_.empty() && s.ok()) return true;
    }
    if (in_->wake) in_->wake();
    return true;
  }

  void on_close(const Status& status) override {
    {
      std::lock_guard<std::mutex> lock(in_->mu);
      in_->closed = true;
      in_->close_status = status;
    }
    if (in_->wake) in_->wake();
  }

 private:
  std::shared_ptr<Inbox> in_;
  std::vector<eventstream::Message> decoded_;  // reused (the transport's thread only)
};

FanOutSource::FanOutSource(FanOutContext context, std::string shard_id, StartPosition start,
                           RetrievalConfig config, const Clock& clock,
                           std::optional<std::uint64_t> jitter_seed)
    : QueuedRecordsSource(config.max_prefetch_records, config.max_prefetch_bytes),
      ctx_(std::move(context)),
      shard_id_(std::move(shard_id)),
      where_(ctx_.consumers && !ctx_.stream.empty()
                 ? "shard " + shard_id_ + " of stream " + ctx_.stream
                 : "shard " + shard_id_),
      start_(std::move(start)),
      config_(std::move(config)),
      clock_(clock),
      retries_(
          aws::SeriesRule::fan_out(config_.throttle_backoff_base, config_.throttle_backoff_max),
          jitter_seed ? std::optional<std::uint64_t>(*jitter_seed + 1) : std::nullopt),
      rng_(jitter_seed ? *jitter_seed : std::random_device{}()) {
  resume_filter_ = start_.kind == StartPosition::Kind::kAfterCheckpoint;
  next_subscribe_at_ = clock_.now();
  consumer_arn_ = ctx_.consumer_arn;
}

FanOutSource::~FanOutSource() {
  if (inbox_ && ctx_.transport) ctx_.transport->cancel(stream_id_);
}

void FanOutSource::set_wakeup(std::function<void()> wake) { wake_ = std::move(wake); }

kinesis::IteratorPosition FanOutSource::subscribe_position() const {
  return resume_position(start_, continuation_.value_or(std::string()));
}

std::optional<FetchStep> FanOutSource::find_consumer() {
  if (!consumer_arn_.empty()) return std::nullopt;
  if (!ctx_.consumers) {
    return fail(Status(StatusCode::kInvalidArgument, "no stream consumer to subscribe through"));
  }
  // No wait for ACTIVE here (a pool thread): a consumer still being registered is asked
  // about again after the backoff.
  auto arn = ctx_.consumers->consumer_arn(ctx_.stream, milliseconds(0));
  if (arn.ok()) {
    consumer_arn_ = std::move(arn).value();
    return std::nullopt;
  }
  // Transient (the one retry rule, retries_): looked up again after the backoff; otherwise
  // (a stream that does not exist) the shard's source ends.
  return retry_after(arn.status(), "error");
}

FetchStep FanOutSource::subscribe() {
  if (auto step = find_consumer()) return *step;
  auto request =
      ctx_.kinesis->subscribe_to_shard_request(consumer_arn_, shard_id_, subscribe_position());
  if (!request.ok())
    return retry_after(request.status().with_context("SubscribeToShard: "), "error");
  inbox_ = std::make_shared<Inbox>();
  // What one subscription may hold before its stream is paused.
  inbox_->max_bytes = std::min<std::size_t>(config_.max_prefetch_bytes, std::size_t{4} << 20);
  inbox_->wake = wake_;
  request_secrets_ = aws::request_secrets(*request);
  stream_id_ = ctx_.transport->open(std::move(request).value(), std::make_shared<Handler>(inbox_),
                                    std::exchange(fresh_connection_next_, false));
  subscriptions_.fetch_add(1);
  if (ctx_.metrics) {
    const MetricTag tags[] = {{"shard", shard_id_}, {"stream", ctx_.stream}};
    ctx_.metrics->count("fanout.subscriptions", 1, MetricTags(tags, ctx_.stream_label ? 2 : 1));
  }
  last_event_at_ = clock_.now();
  return FetchStep{FetchOutcome::kGotIterator, last_event_at_ + config_.fanout_idle_timeout};
}

FetchStep FanOutSource::resubscribe_after(milliseconds delay, FetchOutcome outcome,
                                          std::string_view cause) {
  if (ctx_.metrics) {
    const MetricTag tags[] = {{"shard", shard_id_}, {"cause", cause}, {"stream", ctx_.stream}};
    ctx_.metrics->count("fanout.resubscribes", 1, MetricTags(tags, ctx_.stream_label ? 3 : 2));
  }
  if (inbox_) ctx_.transport->cancel(stream_id_);
  inbox_.reset();
  next_subscribe_at_ = clock_.now() + delay;
  return FetchStep{outcome, next_subscribe_at_};
}

FetchStep FanOutSource::retry_after(const Status& failure, std::string_view cause) {
  const std::optional<milliseconds> delay = retries_.next_delay(failure);
  if (!delay) return fail(failure);
  note_retry_reason(failure.message());
  return resubscribe_after(*delay, FetchOutcome::kRetrying, cause);
}

milliseconds FanOutSource::normal_end_delay() {
  // Full jitter over [0, fanout_resubscribe_jitter] (doubling per idle end in a row): prompt,
  // yet shards whose subscriptions began together (a worker's start, a network blip) and so
  // end together come back spread over the window, and drift further apart each time.
  RetryConfig b;
  b.base_delay = config_.fanout_resubscribe_jitter;
  b.max_backoff = std::max(config_.fanout_resubscribe_jitter, config_.throttle_backoff_max);
  return aws::full_jitter_backoff(b, quiet_ends_, rng_());
}

FetchStep FanOutSource::fail(Status status) {
  if (inbox_) ctx_.transport->cancel(stream_id_);
  inbox_.reset();
  return finish_with_error(status.with_context("fan-out for " + where_ + ": "));
}

FetchStep FanOutSource::end_of_shard(FetchedBatch batch) {
  if (inbox_) ctx_.transport->cancel(stream_id_);
  inbox_.reset();
  return finish_at_shard_end(std::move(batch));
}

FetchStep FanOutSource::on_service_error(const std::string& type, const std::string& message,
                                         int http_status) {
  if (type == "ResourceInUseException") {
    // Another subscription of this consumer and shard is open, or one ended less than 5 s
    // ago: wait past that window (with jitter, so shards do not come back together). Not a
    // failure: SubscribeToShard's protocol.
    in_use_.fetch_add(1);
    note_retry_reason("SubscribeToShard: ResourceInUseException");
    const auto jitter = milliseconds(std::uniform_int_distribution<int>(0, 1000)(rng_));
    return resubscribe_after(config_.fanout_in_use_backoff + jitter, FetchOutcome::kRetrying,
                             "in_use");
  }
  const std::string what = type + (message.empty() ? std::string() : ": " + message);
  if (aws::is_signing_rejection(type, message) && !mend_tried_ && !ctx_.stream.empty()) {
    // Refused for the host's clock (a VM resumed, an NTP step) or for credentials that
    // expired: only the client's JSON calls measure the skew or fetch credentials anew, and a
    // worker reading with fan-out may make none (a follower), so one is made, through the same
    // client, and the subscription is signed again with what it mended. Once per series: a
    // rejection it does not mend is judged as any other error. A mending call that fails for
    // now (throttled, say, when every shard's subscription was refused at once) is tried
    // again after the backoff.
    auto mended = ctx_.kinesis->describe_stream_summary(ctx_.stream);
    if (mended.ok()) {
      mend_tried_ = true;
      note_retry_reason("SubscribeToShard: " + what +
                        " (the signing was mended; subscribing again)");
      return resubscribe_after(milliseconds(0), FetchOutcome::kRetrying, "error");
    }
    if (aws::is_retryable(mended.status().code())) {
      return retry_after(
          Status(StatusCode::kUnavailable,
                 "SubscribeToShard: " + what +
                     "; mending the signing failed for now: " + mended.status().to_string()),
          "error");
    }
    mend_tried_ = true;
  }
  if (type == "ResourceNotFoundException") {
    if (message.find("onsumer") != std::string::npos) {
      // Deregistered (by hand, a clean-up, another application's worker): the next source of
      // this stream finds or registers the consumer again, so the shard is read again after
      // the worker's restart backoff. kUnavailable, not kNotFound: the stream is there, and
      // a one-stream worker stops on a stream that is gone.
      if (ctx_.consumers) ctx_.consumers->forget(ctx_.stream, consumer_arn_);
      return fail(Status(StatusCode::kUnavailable, "the stream consumer " + consumer_arn_ +
                                                       " no longer exists (it is registered "
                                                       "again): " +
                                                       what));
    }
    // The shard is closed and past retention (nothing more to read, no children to name),
    // or the stream was deleted: told apart as polling tells them (shard_not_found.h), so a
    // deleted stream's leases are not all checkpointed at SHARD_END (a stream made again
    // under its name would then never be read).
    const Status not_found(StatusCode::kNotFound, "SubscribeToShard: " + what);
    ShardNotFound judged =
        judge_shard_not_found(*ctx_.kinesis, ctx_.stream, shard_id_, not_found, retries_);
    switch (judged.verdict) {
      case ShardNotFound::Verdict::kRetry:
        note_retry_reason(judged.retry_reason);
        return resubscribe_after(judged.retry_in, FetchOutcome::kRetrying, "error");
      case ShardNotFound::Verdict::kStreamGone:
        return fail(std::move(judged.failure));
      case ShardNotFound::Verdict::kShardGone:
        break;
    }
    return end_of_shard(FetchedBatch{});
  }
  // The error type's code (the one table, classify_aws_error) and the retry policy decide:
  // InternalFailure, throttling, 5xx: subscribe again after a backoff; access, validation,
  // KMS key problems: the source ends with the error.
  return retry_after(
      Status(aws::classify_aws_error(http_status, type), "SubscribeToShard: " + what), "error");
}

// What fetch_step() takes from the inbox at once, under its lock.
struct FanOutSource::Drained {
  std::deque<eventstream::Message> messages;
  bool closed = false;
  bool cut_short = false;  // the stream ended inside a message
  Status close_status;
  std::optional<Status> decode_error;
  int http_status = 0;
  std::string error_body;  // when closed
  aws::Headers headers;    // when closed
};

FetchStep FanOutSource::fetch_step() {
  if (finished()) return FetchStep{FetchOutcome::kFinished};
  const Clock::MonoTime now = clock_.now();
  if (!inbox_) {
    if (now < next_subscribe_at_) return FetchStep{FetchOutcome::kNotDue, next_subscribe_at_};
    if (!has_room()) return queue_full();
    return subscribe();
  }
  // What arrived waits in the inbox; once it is full the stream is paused.
  if (!has_room()) return queue_full();
  Drained drained = drain_inbox();
  std::size_t queued = 0;
  if (auto step = handle_messages(drained, now, queued)) return *step;
  return classify_stream_end(drained, now, queued);
}

FanOutSource::Drained FanOutSource::drain_inbox() {
  Drained d;
  bool was_paused = false;
  {
    std::lock_guard<std::mutex> lock(inbox_->mu);
    d.messages.swap(inbox_->messages);
    inbox_->bytes = 0;
    was_paused = inbox_->paused;
    inbox_->paused = false;
    d.closed = inbox_->closed;
    d.close_status = inbox_->close_status;
    d.decode_error = inbox_->decode_error;
    d.http_status = inbox_->http_status;
    // A stream that ended inside a message was cut short, whatever the transport said.
    d.cut_short = d.closed && inbox_->decoder.buffered() > 0;
    if (d.closed) {
      d.error_body = inbox_->error_body;
      d.headers = inbox_->headers;
    }
  }
  if (was_paused) ctx_.transport->resume(stream_id_);
  return d;
}

std::optional<FetchStep> FanOutSource::handle_messages(Drained& drained, Clock::MonoTime now,
                                                       std::size_t& queued) {
  std::deque<eventstream::Message>& messages = drained.messages;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (!has_room()) {
      // At the prefetch bound: what is left goes back to the inbox (which pauses the stream
      // once full) until the consumer takes a batch.
      std::lock_guard<std::mutex> lock(inbox_->mu);
      for (std::size_t j = messages.size(); j-- > i;) {
        inbox_->bytes += messages[j].frame.size();
        inbox_->messages.push_front(std::move(messages[j]));
      }
      return FetchStep{queued > 0 ? FetchOutcome::kRecords : FetchOutcome::kQueueFull,
                       Clock::MonoTime::max(), true, queued};
    }
    eventstream::Message& m = messages[i];
    last_event_at_ = now;
    const std::string_view type = m.string_header(":message-type");
    if (type == "event") {
      if (m.string_header(":event-type") != "SubscribeToShardEvent") continue;  // initial-response
      if (auto step = handle_event(m, queued)) return step;
    } else if (type == "exception" || type == "error") {
      const std::string kind(
          m.string_header(type == "exception" ? ":exception-type" : ":error-code"));
      return on_service_error(kind, service_error_message(m), 0);
    }
  }
  return std::nullopt;
}

std::optional<FetchStep> FanOutSource::handle_event(eventstream::Message& m, std::size_t& queued) {
  // The records go from the parser straight into the batch (BatchBuilder), with room for the
  // event's records at once, as the polling fetcher reserves its call's limit: growing
  // through the first large events would copy the records and write fresh memory at each
  // step.
  FetchedBatch batch;
  BatchBuilder builder(event_, shard_id_, batch,
                       std::min(m.payload_size / kMinRecordJsonBytes, kMaxRecordsReserved));
  // The payload's encoding is the one the subscription asked for, named by the event.
  const bool cbor = m.string_header(":content-type").find("cbor") != std::string_view::npos;
  Status parsed = cbor
                      ? kinesis::parse_subscribe_to_shard_event_cbor_in_place(
                            std::move(m.frame), m.payload_offset, m.payload_size, event_, &builder)
                      : kinesis::parse_subscribe_to_shard_event_in_place(
                            std::move(m.frame), m.payload_offset, m.payload_size, event_, &builder);
  if (!parsed.ok()) {
    // A malformed event: its records cannot be trusted (those handed over before the failure
    // go with `batch`, the frame with the buffer); subscribe again after the last good
    // continuation.
    event_.buffer.reset();
    return stream_lost("an event could not be read: " + parsed.message());
  }
  retries_.on_success();
  quiet_ends_ = 0;
  mend_tried_ = false;
  set_millis_behind(event_.millis_behind_latest);
  batch.millis_behind_latest = event_.millis_behind_latest;
  count_corrupt(builder.finish(event_, start_, resume_filter_).corrupt_aggregates);
  if (!event_.continuation_sequence_number) {
    if (event_.child_shards.empty() && ctx_.kinesis != nullptr && !ctx_.stream.empty()) {
      if (Status open =
              confirm_shard_end(*ctx_.kinesis, ctx_.stream, shard_id_, "a SubscribeToShard event");
          !open.ok()) {
        // Not the shard's end: the event's records are not delivered, and the subscription
        // starts again after the last good continuation (they come again).
        return stream_lost(open.message());
      }
    }
    batch.child_shards = std::move(event_.child_shards);
    return end_of_shard(std::move(batch));
  }
  continuation_ = std::move(*event_.continuation_sequence_number);
  if (!batch.records.empty()) {
    queued += batch.records.size();
    push_batch(std::move(batch));
  }
  return std::nullopt;
}

FetchStep FanOutSource::classify_stream_end(Drained& drained, Clock::MonoTime now,
                                            std::size_t queued) {
  if (drained.decode_error) {
    return stream_lost("the event stream is corrupt: " + drained.decode_error->message());
  }
  if (drained.closed) {
    if (drained.http_status != 200 && drained.http_status != 0) return on_http_error(drained);
    if (drained.close_status.ok() && drained.http_status == 200 && !drained.cut_short) {
      // The subscription's lifetime ended: go on promptly from the continuation.
      return resubscribe_after(normal_end_delay(),
                               queued > 0 ? FetchOutcome::kRecords : FetchOutcome::kNoRecords,
                               "lifetime");
    }
    if (!drained.close_status.ok()) {
      return stream_lost("the event stream broke off: " + drained.close_status.message());
    }
    return stream_lost(drained.cut_short ? "the event stream ended inside an event"
                                         : "the event stream ended before its lifetime");
  }
  if (now - last_event_at_ >= config_.fanout_idle_timeout) {
    streams_lost_.fetch_add(1);
    // Nothing came, not even the service's empty events: the connection may be dead while
    // its socket looks alive. The next subscription does not go onto it.
    fresh_connection_next_ = true;
    const milliseconds delay = normal_end_delay();
    if (quiet_ends_ < 1'000'000) ++quiet_ends_;
    return resubscribe_after(delay, FetchOutcome::kRetrying, "lost");
  }
  return FetchStep{queued > 0 ? FetchOutcome::kRecords : FetchOutcome::kNoRecords,
                   last_event_at_ + config_.fanout_idle_timeout, false, queued};
}

FetchStep FanOutSource::on_http_error(Drained& drained) {
  aws::HttpResponse r;
  r.status = drained.http_status;
  r.headers = std::move(drained.headers);
  r.body = std::move(drained.error_body);
  // The subscription's session token and signature never reach a message, whatever the
  // server echoes.
  std::vector<std::string_view> secrets(request_secrets_.begin(), request_secrets_.end());
  const aws::AwsErrorBody e = aws::parse_aws_error(r, secrets);
  if (!e.type.empty()) return on_service_error(e.type, e.message, r.status);
  // No error type: the status's code decides (5xx and 429 are retried).
  return retry_after(
      Status(aws::classify_aws_error(r.status, ""),
             "SubscribeToShard answered HTTP " + std::to_string(r.status) + ": " +
                 aws::sanitize_snippet(aws::redact_secrets(std::move(r.body), secrets))),
      "error");
}

FetchStep FanOutSource::stream_lost(const std::string& why) {
  streams_lost_.fetch_add(1);
  return retry_after(Status(StatusCode::kUnavailable, why), "lost");
}

}  // namespace kcl::retrieval
