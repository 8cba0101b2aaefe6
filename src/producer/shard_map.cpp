#include "producer/shard_map.h"

#include <algorithm>
#include <utility>

namespace kcl::producer {

ShardMap::ShardMap(std::vector<Range> ranges) : ranges_(std::move(ranges)) {
  std::sort(ranges_.begin(), ranges_.end(),
            [](const Range& a, const Range& b) { return a.start < b.start; });
}

Result<ShardMap> ShardMap::from_shards(const std::vector<kinesis::Shard>& shards) {
  std::vector<Range> open;
  for (const auto& s : shards) {
    if (s.closed()) continue;
    auto start = parse_hash_key(s.hash_key_range.starting_hash_key);
    auto end = parse_hash_key(s.hash_key_range.ending_hash_key);
    if (!start || !end) {
      return Status(StatusCode::kInternal,
                    "ListShards: shard " + s.shard_id + " has an unreadable hash key range");
    }
    open.push_back(Range{*start, *end, s.shard_id});
  }
  return ShardMap(std::move(open));
}

std::size_t ShardMap::find(HashKey hash) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), hash,
                             [](HashKey h, const Range& r) { return h < r.start; });
  if (it != ranges_.begin() && hash <= std::prev(it)->end) {
    return static_cast<std::size_t>(std::prev(it) - ranges_.begin());
  }
  return kNone;
}

}  // namespace kcl::producer
