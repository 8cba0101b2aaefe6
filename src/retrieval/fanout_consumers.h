// retrieval/fanout_consumers.h: the enhanced fan-out stream consumers of a worker, one per
// stream it reads, and the records sources that subscribe through them.
//
// Naming: every stream's consumer has the same name, RetrievalConfig::consumer_name, else the
// application name; it is registered on each stream's ARN, where names only have to be unique
// per stream. So a worker reading streams A and B with application "audit" subscribes through
// A's consumer "audit" for A's shards and B's consumer "audit" for B's. This is what the Java
// KCL does in multi-stream mode (its fan-out configuration registers consumerName, else the
// application name, on each stream it is asked for, and keeps the ARN per stream), so an
// application moving between the two keeps its consumers.
//
// Finding a consumer is ensure_stream_consumer() (kinesis/stream_consumers.h) on the stream's
// ARN: a consumer that exists is reused, never registered twice. An ARN once ACTIVE is kept
// until forget() says the consumer is gone (ResourceNotFound for it on SubscribeToShard), so
// the next look registers it again.
//
// Thread safety: every member may be called from any thread; lookups of ARNs not yet known
// are made one at a time (concurrent shards of a new stream register its consumer once), and
// a caller that does not wait is never held behind another's lookup.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kcl/clock.h"
#include "kcl/retrieval_config.h"
#include "kinesis/kinesis_client.h"
#include "retrieval/fanout_source.h"
#include "retrieval/records_source.h"

namespace kcl::retrieval {

class FanOutConsumers {
 public:
  // The ARN of a stream when the caller already knows it (the worker's stream set described
  // every stream it reads); empty: DescribeStreamSummary is asked.
  using KnownStreamArn = std::function<std::optional<std::string>(const std::string& stream)>;

  // `clock` must outlive this.
  FanOutConsumers(std::shared_ptr<kinesis::KinesisClient> kinesis, std::string consumer_name,
                  const Clock& clock, KnownStreamArn known_arn = {});

  const std::string& consumer_name() const { return name_; }

  // The ARN of `stream`'s consumer: the one known, else found or registered, waiting up to
  // `wait` for it to become ACTIVE (0: no wait; a consumer still CREATING is then
  // kDeadlineExceeded, to be asked again later). Lookups are made one at a time; with no
  // wait, one under way elsewhere is kUnavailable at once (ask again later) instead of a wait
  // for it. Errors name the stream and the consumer: kNotFound when the stream does not
  // exist, AWS errors otherwise.
  Result<std::string> consumer_arn(const std::string& stream, std::chrono::milliseconds wait);

  // The consumers of `streams`, found or registered at start, in groups of at most `group`
  // (AWS keeps at most 5 consumers of an account CREATING at once): each group's are looked
  // up or registered without waiting, then waited for (up to `wait` each), so the waits for
  // ACTIVE overlap instead of adding up. Returns the failure of each stream that failed.
  std::map<std::string, Status> prepare(const std::vector<std::string>& streams,
                                        std::chrono::milliseconds wait, std::size_t group = 5);

  // `stream`'s consumer `arn` no longer exists: the next consumer_arn() finds or registers it
  // again. A newer ARN (another shard already did so) is kept.
  void forget(const std::string& stream, const std::string& arn);

  // The ARNs known now, by stream.
  std::map<std::string, std::string> known() const;

 private:
  const std::shared_ptr<kinesis::KinesisClient> kinesis_;
  const std::string name_;
  const Clock& clock_;
  const KnownStreamArn known_arn_;
  std::mutex lookup_mu_;  // one lookup at a time (held across the AWS calls)
  mutable std::mutex mu_;
  std::map<std::string, std::string> arns_;  // guarded by mu_: stream -> consumer ARN
};

// The records sources of a worker reading with fan-out: the source of a shard of stream S
// subscribes through S's consumer in `consumers`, looked up (and registered if need be) when
// it first subscribes. `shared` holds what every source shares (client, HTTP/2 transport,
// metrics); its consumer_arn is ignored.
RecordsSourceFactory fanout_sources(FanOutContext shared,
                                    std::shared_ptr<FanOutConsumers> consumers,
                                    RetrievalConfig config, const Clock& clock);

}  // namespace kcl::retrieval
