#include "observability/local_figures.h"

#include <cmath>

namespace kcl::observability {

namespace {

// This worker's per-shard series from the registry: records processed so far and the lag,
// by series key.
struct ShardSeries {
  std::map<std::string, double> totals;
  std::map<std::string, double> lag;
  std::map<std::string, double> dead_lettered;
};

ShardSeries shard_series(const metrics::MetricsRegistry& registry) {
  ShardSeries out;
  for (const auto& s : registry.snapshot()) {
    std::string shard, stream;
    for (const auto& [k, v] : s.labels) {
      if (k == "shard") shard = v;
      if (k == "stream") stream = v;
    }
    if (shard.empty()) continue;
    const std::string plain_shard = shard;
    if (!stream.empty()) shard = stream + "/" + shard;  // ShardView::series_key
    if (s.family == "kcl_records_processed_total") out.totals[shard] += s.value;
    if (s.family == "kcl_millis_behind_latest") out.lag[shard] = s.value;
    if (s.family == "kcl_records_dead_lettered_total") {
      // Always labelled with its stream: found under either key a shard may use.
      out.dead_lettered[shard] += s.value;
      if (shard != plain_shard) out.dead_lettered[plain_shard] += s.value;
    }
  }
  return out;
}

}  // namespace

std::vector<ShardFigures> LocalFigures::sample(const metrics::MetricsRegistry& registry,
                                               const std::vector<OwnShard>& own,
                                               std::chrono::steady_clock::time_point now,
                                               std::int64_t now_ms) {
  const ShardSeries series = shard_series(registry);
  const bool first = last_sample_ == std::chrono::steady_clock::time_point{};
  const double secs = first ? 0 : std::chrono::duration<double>(now - last_sample_).count();
  for (const auto& [key, total] : series.totals) {
    const double before = last_totals_.count(key) ? last_totals_[key] : 0;
    if (total > before) last_progress_ms_[key] = now_ms;
    if (first) continue;
    auto& q = rates_[key];
    // Two decimals are plenty for a page, and keep a report of many shards short.
    q.push_back(secs > 0 ? std::round((total - before) / secs * 100) / 100 : 0);
    while (q.size() > keep_) q.pop_front();
  }
  last_totals_ = series.totals;
  last_sample_ = now;

  std::vector<ShardFigures> out;
  out.reserve(own.size());
  for (const OwnShard& s : own) {
    ShardFigures f;
    f.shard_id = s.lease_key;
    f.consumer_state = s.consumer_state;
    if (auto it = series.lag.find(s.series_key); it != series.lag.end())
      f.millis_behind = it->second;
    if (auto it = rates_.find(s.series_key); it != rates_.end()) {
      f.records_per_second.assign(it->second.begin(), it->second.end());
    }
    if (auto it = last_progress_ms_.find(s.series_key); it != last_progress_ms_.end()) {
      f.last_progress_ms = it->second;
    }
    if (auto it = series.dead_lettered.find(s.series_key); it != series.dead_lettered.end()) {
      f.dead_lettered = it->second;
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace kcl::observability
