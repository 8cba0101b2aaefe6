// producer/shard_map.h: which open shard of a stream a 128-bit hash key falls in, as read from
// ListShards (closed shards left out, ranges sorted by their start). The producer builds a new
// one when a record lands on another shard than the map said (a split or a merge).
//
// Thread safety: a plain value (the producer's lock guards the one in use).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kcl/status.h"
#include "kinesis/kinesis_types.h"
#include "producer/kpl_aggregator.h"

namespace kcl::producer {

class ShardMap {
 public:
  struct Range {
    HashKey start = 0, end = 0;  // inclusive
    std::string shard_id;
  };
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  ShardMap() = default;
  // From ranges in any order (sorted here).
  explicit ShardMap(std::vector<Range> ranges);
  // The open shards of a ListShards answer; kInternal naming the shard whose hash key range
  // cannot be read.
  static Result<ShardMap> from_shards(const std::vector<kinesis::Shard>& shards);

  // The index in ranges() of the open shard whose range holds `hash`; kNone when none does.
  std::size_t find(HashKey hash) const;
  const std::vector<Range>& ranges() const { return ranges_; }

 private:
  std::vector<Range> ranges_;  // sorted by start
};

}  // namespace kcl::producer
