// kpl/hash_key.h: the 128-bit hash keys that map records to shards, as Kinesis computes them:
// the producer's shard map (producer/shard_map.h) and the consumer's check of an aggregate's
// records against its shard's range (retrieval/kpl_deaggregator.h) take them from here.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kcl::kpl {

__extension__ using HashKey = unsigned __int128;

// The hash key Kinesis gives a partition key: its MD5 read as a big-endian 128-bit integer.
HashKey partition_key_hash(std::string_view partition_key);
// A decimal explicit hash key, or nullopt when it is not digits or not below 2^128.
std::optional<HashKey> parse_hash_key(std::string_view decimal);
std::string hash_key_to_string(HashKey key);

}  // namespace kcl::kpl
