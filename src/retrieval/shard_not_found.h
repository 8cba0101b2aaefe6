// retrieval/shard_not_found.h: what a ResourceNotFound on reading a shard means, for both
// records sources (polling's ShardFetcher and fan-out's FanOutSource): the shard alone is
// gone (a closed shard whose records all passed the stream's retention: its reading ends at
// its end, as the Java KCL ends it, so that its children start), or the stream is (deleted:
// the source fails with kNotFound, which stops a one-stream worker and has a multi-stream
// worker drop the stream's leases), or which of the two cannot be told yet.
//
// Thread safety: a function over its arguments (the client is thread-safe).
#pragma once

#include <chrono>
#include <string>

#include "aws/retry.h"
#include "kcl/status.h"
#include "kinesis/kinesis_client.h"

namespace kcl::retrieval {

struct ShardNotFound {
  enum class Verdict {
    kShardGone,   // read to its end
    kStreamGone,  // fail with `failure`
    kRetry,       // ask again after `retry_in` (DescribeStreamSummary failed for now)
  };
  Verdict verdict = Verdict::kShardGone;
  Status failure;  // kStreamGone: kNotFound naming the stream and the shard
  std::chrono::milliseconds retry_in{0};
  std::string retry_reason;  // kRetry
};

// Judges `not_found` (the read's ResourceNotFound) by DescribeStreamSummary of `stream`. When
// that call fails for a reason `retries` would retry, kRetry; when it fails for good (a role
// without kinesis:DescribeStreamSummary, which a one-stream worker needs nowhere else), the
// shard alone is taken for gone, as the Java KCL ends a shard on ResourceNotFound; a deleted
// stream is then found by the shard sync.
ShardNotFound judge_shard_not_found(kinesis::KinesisClient& client, const std::string& stream,
                                    const std::string& shard_id, const Status& not_found,
                                    aws::RetrySeries& retries);

}  // namespace kcl::retrieval
