// retrieval/shard_end_check.h: whether an answer that ends a shard without naming its
// children may be believed, for both records sources (polling's ShardFetcher, fan-out's
// FanOutSource). AWS names a shard's children in the answer that ends it (ChildShards);
// kinesalite names none. An answer that ends a shard the stream still lists as open (a
// GetRecords answer whose NextShardIterator a proxy or a faulty server dropped) would write
// SHARD_END on a shard still being written, and no one would read it again: the answer is
// taken for malformed instead, as the Java KCL rejects such a result.
//
// Thread safety: a function over its arguments (the client is thread-safe).
#pragma once

#include <string>

#include "kcl/status.h"
#include "kinesis/kinesis_client.h"

namespace kcl::retrieval {

// OK when ListShards shows shard `shard_id` of `stream` closed, or lists it no more (its
// records passed the retention), or fails for good (a role without kinesis:ListShards: the
// answer is believed, as before this check); kInternal naming the answer when it shows the
// shard open; ListShards' failure when it is to be retried.
Status confirm_shard_end(kinesis::KinesisClient& client, const std::string& stream,
                         const std::string& shard_id, std::string_view answer);

}  // namespace kcl::retrieval
