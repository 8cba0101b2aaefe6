#include "retrieval/shard_end_check.h"

#include "aws/retry.h"

namespace kcl::retrieval {

Status confirm_shard_end(kinesis::KinesisClient& client, const std::string& stream,
                         const std::string& shard_id, std::string_view answer) {
  auto shards = client.list_shards(stream);
  if (!shards.ok()) {
    // A failure for now is retried; one for good (a role without kinesis:ListShards) cannot
    // be waited out, and the answer is believed as before.
    if (!aws::is_retryable(shards.status().code())) return Status::Ok();
    return shards.status().with_context("checking that shard " + shard_id + " of stream " + stream +
                                        " is closed: ");
  }
  for (const kinesis::Shard& s : *shards) {
    if (s.shard_id != shard_id) continue;
    if (s.closed()) return Status::Ok();
    return Status(StatusCode::kInternal,
                  std::string(answer) + " ended shard " + shard_id + " of stream " + stream +
                      " without naming its children, but ListShards shows the shard open: "
                      "the answer is taken for malformed, and the shard is read on");
  }
  return Status::Ok();  // no longer listed: its records all passed the retention
}

}  // namespace kcl::retrieval
