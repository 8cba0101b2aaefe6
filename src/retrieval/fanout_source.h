// retrieval/fanout_source.h: enhanced fan-out for one shard, the second RecordsSource.
//
// The source subscribes (SubscribeToShard through aws::StreamingTransport, one HTTP/2 stream
// multiplexed with the worker's other shards) and turns the pushed events into batches, in
// the same bounded queue and with the same deaggregation and resume filter as polling:
//
//   transport thread: bytes ──▶ eventstream::Decoder ──▶ inbox (bounded; full = pause the stream)
//                                                         │ wake the fetch task
//   fetch_step() (pool): inbox ──▶ parse event JSON ──▶ deaggregate ──▶ batches ──▶ take_batch()
//
// Positions: the first subscription starts at the start position (TRIM_HORIZON, LATEST,
// AT_TIMESTAMP, or AT_SEQUENCE_NUMBER of a checkpoint with the records up to it dropped, as
// polling does); every later one AFTER_SEQUENCE_NUMBER the last ContinuationSequenceNumber
// received (all of whose records are queued), so nothing is lost or delivered twice across
// resubscriptions.
//
// Resubscription: when a subscription ends normally (its 5-minute lifetime, or an idle end,
// below) promptly, after a full-jitter wait of at most fanout_resubscribe_jitter (doubling per
// idle end in a row), so shards that subscribed together do not come back together; after a
// lost or reset connection, a corrupt stream (bad CRC), an InternalFailure or another
// transient exception, after a full-jitter backoff (aws/retry.h, the retrieval throttle
// settings), so hundreds of shards do not resubscribe in one burst; after ResourceInUse
// (another subscription of this consumer and shard is open, or one ended less than 5 s ago)
// after at least fanout_in_use_backoff. A subscription silent for fanout_idle_timeout is
// ended and made again.
//
// Ends: an event without ContinuationSequenceNumber is the shard's end: a final batch with
// shard_end and the ChildShards (for shard sync at once). ResourceNotFound for the shard
// (closed and past retention) ends it cleanly, without children. ResourceNotFound for the
// consumer, access denied and invalid arguments end the source with that error.
//
// Thread safety: as RecordsSource (fetch_step() one thread at a time; the rest from any
// thread). The clock must outlive the source.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "aws/retry.h"
#include "aws/streaming_transport.h"
#include "eventstream/event_stream.h"
#include "kcl/clock.h"
#include "kcl/metrics.h"
#include "kcl/retrieval_config.h"
#include "kinesis/kinesis_client.h"
#include "retrieval/queued_records_source.h"

namespace kcl::retrieval {

class FanOutConsumers;  // retrieval/fanout_consumers.h

// What every shard's fan-out source of a worker shares (kept alive by each source).
struct FanOutContext {
  std::shared_ptr<kinesis::KinesisClient> kinesis;
  std::shared_ptr<aws::StreamingTransport> transport;
  // The stream consumer subscribed through; when empty, `consumers` gives `stream`'s at the
  // first subscription (a worker reading several streams: one consumer per stream).
  std::string consumer_arn;
  std::shared_ptr<FanOutConsumers> consumers;
  std::string stream;
  // The metrics below carry a "stream" label too (a worker reading several streams, whose
  // shards of one id would otherwise share a series).
  bool stream_label = false;
  // Where "fanout.subscriptions" {shard[, stream]} and "fanout.resubscribes" {shard[, stream],
  // cause} go; may be null.
  std::shared_ptr<MetricsSink> metrics;
};

// The queue, the finished flag and their accessors are QueuedRecordsSource's.
class FanOutSource final : public QueuedRecordsSource {
 public:
  FanOutSource(FanOutContext context, std::string shard_id, StartPosition start,
               RetrievalConfig config, const Clock& clock,
               std::optional<std::uint64_t> jitter_seed = std::nullopt);
  ~FanOutSource() override;  // ends the open subscription
  FanOutSource(const FanOutSource&) = delete;
  FanOutSource& operator=(const FanOutSource&) = delete;

  FetchStep fetch_step() override;
  void set_wakeup(std::function<void()> wake) override;

  // Subscriptions made (the first and every resubscription).
  std::uint64_t subscriptions() const noexcept { return subscriptions_.load(); }
  // Why subscriptions were made again, by cause.
  std::uint64_t streams_lost() const noexcept { return streams_lost_.load(); }
  std::uint64_t in_use_rejections() const noexcept { return in_use_.load(); }

  struct Inbox;  // what the transport's thread hands over (internal)

 private:
  class Handler;
  // Ends the current subscription and schedules the next one `delay` from now.
  // `cause`: lifetime, lost, in_use or error (the metric's tag).
  FetchStep resubscribe_after(std::chrono::milliseconds delay, FetchOutcome outcome,
                              std::string_view cause);
  // After `failure`: subscribe again after the retry policy's delay (aws/retry.h,
  // SeriesRule::fan_out), or end with the failure when the policy says it is final.
  FetchStep retry_after(const Status& failure, std::string_view cause);
  // The wait before subscribing again after a subscription ended normally.
  std::chrono::milliseconds normal_end_delay();
  FetchStep fail(Status status);
  FetchStep end_of_shard(FetchedBatch batch);
  FetchStep subscribe();
  // Looks up consumer_arn_ (through ctx_.consumers) when not known yet: a step when that
  // failed (a backoff, or the end for a stream that does not exist).
  std::optional<FetchStep> find_consumer();
  // An exception (or an HTTP error before the stream, with its status; 0 inside the
  // stream): what to do about it.
  FetchStep on_service_error(const std::string& type, const std::string& message, int http_status);
  kinesis::IteratorPosition subscribe_position() const;

  // ---- fetch_step() with an open subscription, piece by piece ----
  struct Drained;  // what one step takes from the inbox
  // Takes what the transport's thread left in the inbox, and resumes a paused stream.
  Drained drain_inbox();
  // Handles the drained messages in order (events queue their records) while the queue has
  // room; at the bound the rest goes back to the inbox. A step when one ends this
  // fetch_step() (the bound, the shard's end, an exception, a malformed event).
  std::optional<FetchStep> handle_messages(Drained& drained, Clock::MonoTime now,
                                           std::size_t& queued);
  // One SubscribeToShardEvent: parsed, deaggregated and queued; a step at the shard's end or
  // for a malformed event.
  std::optional<FetchStep> handle_event(eventstream::Message& m, std::size_t& queued);
  // After the messages: a corrupt stream, a closed one (its lifetime ended, an HTTP error,
  // a loss) or a silent one ends the subscription; otherwise it goes on.
  FetchStep classify_stream_end(Drained& drained, Clock::MonoTime now, std::size_t queued);
  // The answer to SubscribeToShard was not 200.
  FetchStep on_http_error(Drained& drained);
  // The stream was lost, cut short or corrupt (`why`, for the retry's reason and the stall
  // report): subscribe again after a backoff.
  FetchStep stream_lost(const std::string& why);

  const FanOutContext ctx_;
  const std::string shard_id_;
  const std::string where_;  // "shard S" or "shard S of stream T", for errors
  const StartPosition start_;
  const RetrievalConfig config_;
  const Clock& clock_;

  // ---- owned by the fetch_step() caller ----
  std::string consumer_arn_;      // ctx_.consumer_arn, or the one ctx_.consumers gave
  std::shared_ptr<Inbox> inbox_;  // the open subscription's, if any
  aws::StreamingTransport::StreamId stream_id_ = 0;
  // The open subscription's session token and signature, kept out of error messages.
  std::vector<std::string> request_secrets_;
  Clock::MonoTime next_subscribe_at_{};
  Clock::MonoTime last_event_at_{};
  std::optional<std::string> continuation_;
  bool resume_filter_ = false;
  aws::RetrySeries retries_;  // failures in a row and their backoff
  int quiet_ends_ = 0;        // idle ends in a row (no event since)
  bool mend_tried_ = false;   // a signing rejection's mending call made since the last event
  // The last subscription went silent: the next one opens a connection of its own.
  bool fresh_connection_next_ = false;
  std::mt19937_64 rng_;
  kinesis::GetRecordsResult event_;  // reused from event to event

  std::function<void()> wake_;
  std::atomic<std::uint64_t> subscriptions_{0};
  std::atomic<std::uint64_t> streams_lost_{0};
  std::atomic<std::uint64_t> in_use_{0};
};

}  // namespace kcl::retrieval
