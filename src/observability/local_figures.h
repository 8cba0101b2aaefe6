// observability/local_figures.h: this worker's per-shard figures, sampled from its metrics
// registry at each refresh of the status server: the last MillisBehindLatest, records/s
// since the previous sample (a history of them), and when records were last processed.
//
// Thread safety: used by one thread (the status server's refresher).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "metrics/metrics_registry.h"
#include "observability/fleet_figures.h"

namespace kcl::observability {

// A shard this worker reads: its lease key, its key in the metric series (the shard id, or
// "<stream>/<shard id>" in a multi-stream table) and its consumer's state.
struct OwnShard {
  std::string lease_key;
  std::string series_key;
  std::string consumer_state;
};

class LocalFigures {
 public:
  // Keeps `samples` records/s samples per shard (at least 2).
  explicit LocalFigures(std::size_t samples) : keep_(std::max<std::size_t>(2, samples)) {}

  // Samples `registry` at `now` (wall clock `now_ms`) and returns the figures of `own`.
  std::vector<ShardFigures> sample(const metrics::MetricsRegistry& registry,
                                   const std::vector<OwnShard>& own,
                                   std::chrono::steady_clock::time_point now, std::int64_t now_ms);

 private:
  const std::size_t keep_;
  std::map<std::string, double> last_totals_;
  std::map<std::string, std::deque<double>> rates_;
  std::map<std::string, std::int64_t> last_progress_ms_;
  std::chrono::steady_clock::time_point last_sample_{};
};

}  // namespace kcl::observability
