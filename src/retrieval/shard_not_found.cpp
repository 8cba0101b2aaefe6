#include "retrieval/shard_not_found.h"

#include <optional>
#include <utility>

namespace kcl::retrieval {

ShardNotFound judge_shard_not_found(kinesis::KinesisClient& client, const std::string& stream,
                                    const std::string& shard_id, const Status& not_found,
                                    aws::RetrySeries& retries) {
  ShardNotFound out;
  auto described = client.describe_stream_summary(stream);
  const bool stream_gone = described.ok() ? described->stream_status == "DELETING"
                                          : described.status().code() == StatusCode::kNotFound;
  if (!described.ok() && !stream_gone) {
    if (const std::optional<std::chrono::milliseconds> delay =
            retries.next_delay(described.status())) {
      out.verdict = ShardNotFound::Verdict::kRetry;
      out.retry_in = *delay;
      out.retry_reason = "shard " + shard_id + " not found, and stream " + stream +
                         " could not be described: " + described.status().to_string();
    }
    return out;  // else kShardGone (see the header)
  }
  if (!stream_gone) return out;
  out.verdict = ShardNotFound::Verdict::kStreamGone;
  std::string message = "stream " + stream + " was deleted or shard " + shard_id +
                        " no longer exists: " + not_found.message();
  out.failure = not_found.aws()
                    ? Status(StatusCode::kNotFound, std::move(message), *not_found.aws())
                    : Status(StatusCode::kNotFound, std::move(message));
  return out;
}

}  // namespace kcl::retrieval
