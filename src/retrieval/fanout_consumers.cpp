#include "retrieval/fanout_consumers.h"

#include <algorithm>
#include <utility>

#include "kinesis/stream_consumers.h"

namespace kcl::retrieval {

FanOutConsumers::FanOutConsumers(std::shared_ptr<kinesis::KinesisClient> kinesis,
                                 std::string consumer_name, const Clock& clock,
                                 KnownStreamArn known_arn)
    : kinesis_(std::move(kinesis)),
      name_(std::move(consumer_name)),
      clock_(clock),
      known_arn_(std::move(known_arn)) {}

Result<std::string> FanOutConsumers::consumer_arn(const std::string& stream,
                                                  std::chrono::milliseconds wait) {
  auto cached = [&]() -> std::optional<std::string> {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = arns_.find(stream);
    if (it == arns_.end()) return std::nullopt;
    return it->second;
  };
  if (auto arn = cached()) return *arn;
  const std::string where = "stream consumer " + name_ + " of stream " + stream + ": ";
  // One lookup at a time. A caller that will not wait (a shard's source, on a pool thread that
  // also runs processors) is not held behind another's AWS calls and their retries either:
  // it is told to ask again after its backoff, by when the ARN is likely known.
  std::unique_lock<std::mutex> lookup(lookup_mu_, std::defer_lock);
  if (wait.count() > 0) {
    lookup.lock();
  } else if (!lookup.try_lock()) {
    return Status(StatusCode::kUnavailable,
                  where + "another lookup of a stream consumer is under way; asked again later");
  }
  if (auto arn = cached()) return *arn;  // found by the lookup this one waited for
  std::optional<std::string> stream_arn = known_arn_ ? known_arn_(stream) : std::nullopt;
  if (!stream_arn || stream_arn->empty()) {
    auto described = kinesis::stream_arn(*kinesis_, stream);
    if (!described.ok()) {
      if (described.status().code() == StatusCode::kNotFound) {
        return Status(StatusCode::kNotFound, where + "stream " + stream + " does not exist (" +
                                                 described.status().message() + ")");
      }
      return described.status().with_context(where);
    }
    stream_arn = std::move(described).value();
  }
  auto consumer = kinesis::ensure_stream_consumer(*kinesis_, *stream_arn, name_, clock_, wait);
  if (!consumer.ok()) return consumer.status().with_context(where);
  std::lock_guard<std::mutex> lock(mu_);
  arns_[stream] = consumer->consumer_arn;
  return consumer->consumer_arn;
}

std::map<std::string, Status> FanOutConsumers::prepare(const std::vector<std::string>& streams,
                                                       std::chrono::milliseconds wait,
                                                       std::size_t group) {
  std::map<std::string, Status> failed;
  group = std::max<std::size_t>(group, 1);
  for (std::size_t first = 0; first < streams.size(); first += group) {
    const std::size_t end = std::min(streams.size(), first + group);
    // Registered (or found) without waiting; a consumer still CREATING is waited for below,
    // and any other failure is met again there.
    for (std::size_t i = first; i < end; ++i) {
      (void)consumer_arn(streams[i], std::chrono::milliseconds(0));
    }
    for (std::size_t i = first; i < end; ++i) {
      Status s = consumer_arn(streams[i], wait).status();
      if (!s.ok()) failed.emplace(streams[i], std::move(s));
    }
  }
  return failed;
}

void FanOutConsumers::forget(const std::string& stream, const std::string& arn) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = arns_.find(stream);
  if (it != arns_.end() && it->second == arn) arns_.erase(it);
}

std::map<std::string, std::string> FanOutConsumers::known() const {
  std::lock_guard<std::mutex> lock(mu_);
  return arns_;
}

RecordsSourceFactory fanout_sources(FanOutContext shared,
                                    std::shared_ptr<FanOutConsumers> consumers,
                                    RetrievalConfig config, const Clock& clock) {
  shared.consumer_arn.clear();
  shared.consumers = std::move(consumers);
  return [shared, config, &clock](const std::string& stream, const std::string& shard_id,
                                  const StartPosition& start) {
    FanOutContext ctx = shared;
    ctx.stream = stream;
    return std::make_shared<FanOutSource>(std::move(ctx), shard_id, start, config, clock);
  };
}

}  // namespace kcl::retrieval
