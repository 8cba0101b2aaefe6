// kinesis/shard_indexer.h: the distinct shard ids of a PutRecords answer, numbered as they
// first appear (PutRecordsEntryResult::shard); shared by the JSON and CBOR answer parsers.
//
// Thread safety: a plain value (one thread at a time).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kcl::kinesis {

// Numbers the distinct shard ids of one answer into `ids`. A producer's call holds its
// records shard by shard, so the id is usually the one before; others are looked for among
// the few seen so far, and through a hash map once there are more than kScanned.
class ShardIndexer {
 public:
  explicit ShardIndexer(std::vector<std::string>& ids) : ids_(ids) {}
  std::uint32_t index_of(std::string_view id) {
    if (last_ < ids_.size() && ids_[last_] == id) return last_;
    if (map_.empty()) {
      for (std::uint32_t i = 0; i < ids_.size(); ++i) {
        if (ids_[i] == id) return last_ = i;
      }
    } else if (auto it = map_.find(id); it != map_.end()) {
      return last_ = it->second;
    }
    last_ = static_cast<std::uint32_t>(ids_.size());
    ids_.emplace_back(id);
    if (ids_.size() > kScanned) {
      if (map_.empty()) {
        for (std::uint32_t i = 0; i < ids_.size(); ++i) map_.emplace(ids_[i], i);
      } else {
        map_.emplace(ids_.back(), last_);
      }
    }
    return last_;
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string>& ids_;
  std::unordered_map<std::string, std::uint32_t, Hash, std::equal_to<>> map_;
  std::uint32_t last_ = 0;
  // Up to this many distinct ids are compared one by one (no hashing of each record's id).
  static constexpr std::size_t kScanned = 16;
};

}  // namespace kcl::kinesis
