// producer/kpl_aggregator.h: user records -> one KPL aggregated record (the format of
// kpl/kpl_format.h, which retrieval/kpl_deaggregator.h reads: magic F3 89 9A C2, protobuf
// AggregatedRecord with partition key and explicit hash key tables, 16-byte MD5 of the
// protobuf bytes), and the 128-bit hash keys that map records to shards.
//
// Thread safety: KplAggregator is a plain value (one thread at a time); the free functions
// are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kcl::producer {

__extension__ using HashKey = unsigned __int128;

// The hash key Kinesis gives a partition key: its MD5 read as a big-endian 128-bit integer.
HashKey partition_key_hash(std::string_view partition_key);
// A decimal explicit hash key, or nullopt when it is not digits or not below 2^128.
std::optional<HashKey> parse_hash_key(std::string_view decimal);
std::string hash_key_to_string(HashKey key);

class KplAggregator {
 public:
  // Bytes the aggregate would take (magic + protobuf + MD5) with this record added.
  std::size_t size_with(std::string_view partition_key, std::string_view explicit_hash_key,
                        std::string_view data) const;
  std::size_t size() const;
  std::size_t count() const { return records_; }
  void add(std::string_view partition_key, std::string_view explicit_hash_key,
           std::string_view data);
  // The aggregate's bytes; the aggregator is empty afterwards.
  std::string finish();
  void clear();

 private:
  // Bytes of one Record message's body and of the new table entries it would add.
  std::size_t record_cost(std::string_view partition_key, std::string_view explicit_hash_key,
                          std::size_t data_size) const;

  std::string keys_;           // encoded table entries (fields 1 and 2), in order of first use
  std::string records_bytes_;  // encoded Record messages (field 3)
  std::unordered_map<std::string, std::uint64_t> pk_index_;
  std::unordered_map<std::string, std::uint64_t> ehk_index_;
  std::size_t records_ = 0;
};

}  // namespace kcl::producer
