// producer/kpl_aggregator.h: user records -> one KPL aggregated record (the format of
// kpl/kpl_format.h, which retrieval/kpl_deaggregator.h reads: magic F3 89 9A C2, protobuf
// AggregatedRecord with partition key and explicit hash key tables, 16-byte MD5 of the
// protobuf bytes).
//
// Thread safety: KplAggregator is a plain value (one thread at a time); the free functions
// are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpl/hash_key.h"

namespace kcl::producer {

// The hash keys (kpl/hash_key.h), shared with the consumer's check of an aggregate's records.
using kpl::hash_key_to_string;
using kpl::HashKey;
using kpl::parse_hash_key;
using kpl::partition_key_hash;

// One key table of an aggregate (partition keys, or explicit hash keys): each distinct key
// once, in order of first use, found by its hash in an open-addressing index. The keys' bytes
// live in the caller's buffer (the aggregate's encoded tables), named by offset and size.
class KeyIndex {
 public:
  static constexpr std::uint64_t kAbsent = ~std::uint64_t{0};
  // The index of `key` (whose hash is `hash`) in the table, or kAbsent; `text` is the
  // buffer the offsets given to add() point into.
  std::uint64_t find(std::string_view key, std::size_t hash, const std::string& text) const;
  // Adds the next key: `size` bytes at `offset` of the caller's buffer.
  void add(std::size_t hash, std::size_t offset, std::size_t size);
  std::uint64_t size() const { return keys_.size(); }
  void clear();

 private:
  struct Key {
    std::size_t hash;
    std::size_t offset;
    std::size_t size;
  };
  void grow();

  std::vector<Key> keys_;
  std::vector<std::uint32_t> slots_;  // index + 1 of the key in each slot; 0 = free
};

class KplAggregator {
 public:
  // Bytes the aggregate would take (magic + protobuf + MD5) with this record added.
  std::size_t size_with(std::string_view partition_key, std::string_view explicit_hash_key,
                        std::string_view data) const;
  std::size_t size() const;
  std::size_t count() const { return records_; }
  void add(std::string_view partition_key, std::string_view explicit_hash_key,
           std::string_view data);
  // Adds the record when the aggregate with it takes at most `limit` bytes (size_with() <=
  // limit); false, and nothing added, otherwise. One look-up of each key.
  bool add_within(std::string_view partition_key, std::string_view explicit_hash_key,
                  std::string_view data, std::size_t limit);
  // The aggregate's bytes; the aggregator is empty afterwards.
  std::string finish();
  void clear();

 private:
  // A key looked up in its table: its hash, and its index (kAbsent: a new entry).
  struct Found {
    std::size_t hash = 0;
    std::uint64_t index = KeyIndex::kAbsent;
  };
  Found find(const KeyIndex& table, std::string_view key) const;
  // Bytes the record adds: its Record message and the table entries it creates.
  std::size_t record_cost(std::string_view partition_key, const Found& pk,
                          std::string_view explicit_hash_key, const Found& ehk,
                          std::size_t data_size) const;
  void append(std::string_view partition_key, const Found& pk, std::string_view explicit_hash_key,
              const Found& ehk, std::string_view data);
  // The index of `key` in `table` (field `field` of the aggregate), added when new.
  std::uint64_t index_of(KeyIndex& table, std::uint32_t field, std::string_view key,
                         const Found& found);

  std::string keys_;           // encoded table entries (fields 1 and 2), in order of first use
  std::string records_bytes_;  // encoded Record messages (field 3)
  KeyIndex pk_index_;
  KeyIndex ehk_index_;
  std::size_t records_ = 0;
};

}  // namespace kcl::producer
