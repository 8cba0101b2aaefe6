// Canned shard listings and small helpers for the shard sync unit tests.
#pragma once

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/lease.h"
#include "kcl/metrics.h"
#include "kinesis/kinesis_types.h"

namespace kcl::shardsync::test {

// A timestamp the tests start leases at (AT_TIMESTAMP), some 55 years after the epoch.
inline const auto kTimestamp =
    std::chrono::system_clock::time_point{} + std::chrono::hours(24 * 365 * 55);

inline std::string sid(int n) {
  std::string digits = std::to_string(n);
  return "shardId-" + std::string(12 - digits.size(), '0') + digits;
}

// A shard with a hash range [lo, hi] and, when `closed`, an ending sequence number.
inline kinesis::Shard shard(int id, int parent = -1, int adjacent = -1, bool closed = false,
                            int lo = 0, int hi = 99) {
  kinesis::Shard s;
  s.shard_id = sid(id);
  if (parent >= 0) s.parent_shard_id = sid(parent);
  if (adjacent >= 0) s.adjacent_parent_shard_id = sid(adjacent);
  s.hash_key_range = {std::to_string(lo), std::to_string(hi)};
  s.sequence_number_range.starting_sequence_number = std::to_string(1000 + id);
  if (closed) s.sequence_number_range.ending_sequence_number = std::to_string(2000 + id);
  return s;
}

// The lineage used by most tests:
//   0 (closed root) split into 3 (open) and 4 (closed);
//   4 and 1 (closed root) merged into 5 (open): 5 is a grandchild of 0;
//   2 (open root) untouched.
inline std::vector<kinesis::Shard> lineage_listing() {
  return {
      shard(0, -1, -1, true, 0, 49),   shard(1, -1, -1, true, 50, 79),
      shard(2, -1, -1, false, 80, 99), shard(3, 0, -1, false, 0, 24),
      shard(4, 0, -1, true, 25, 49),   shard(5, 4, 1, false, 25, 79),
  };
}

inline std::vector<std::string> ids(std::initializer_list<int> ns) {
  std::vector<std::string> out;
  for (int n : ns) out.push_back(sid(n));
  return out;
}

inline std::vector<std::string> keys(const std::vector<Lease>& leases) {
  std::vector<std::string> out;
  for (const Lease& l : leases) out.push_back(l.lease_key);
  std::sort(out.begin(), out.end());
  return out;
}

inline const Lease* find(const std::vector<Lease>& leases, std::string_view key) {
  for (const Lease& l : leases) {
    if (l.lease_key == key) return &l;
  }
  return nullptr;
}

inline Lease lease(int id, ExtendedSequenceNumber checkpoint = ExtendedSequenceNumber(),
                   std::vector<std::string> parents = {}, std::vector<std::string> children = {}) {
  Lease l;
  l.lease_key = sid(id);
  l.checkpoint = std::move(checkpoint);
  l.parent_shard_ids = std::move(parents);
  l.child_shard_ids = std::move(children);
  return l;
}

inline ExtendedSequenceNumber seq(std::string n) { return ExtendedSequenceNumber(std::move(n)); }

// Remembers counts by name (tags ignored).
class RecordingMetrics final : public MetricsSink {
 public:
  void count(std::string_view name, double value, MetricTags) override {
    std::lock_guard<std::mutex> lock(mu_);
    counts_[std::string(name)] += value;
  }
  void gauge(std::string_view, double, MetricTags) override {}
  void timing(std::string_view, std::chrono::nanoseconds, MetricTags) override {}
  double get(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = counts_.find(name);
    return it == counts_.end() ? 0 : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, double> counts_;
};

}  // namespace kcl::shardsync::test
