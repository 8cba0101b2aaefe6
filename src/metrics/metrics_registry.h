// metrics/metrics_registry.h: a MetricsSink that keeps every metric point it is given as
// counters, gauges and histograms by name and labels, and writes them out in the Prometheus
// text exposition format (version 0.0.4).
//
// Library metric names ("leases.held") are mapped to Prometheus names ("kcl_leases_held") by
// a fixed table (docs/metrics.md lists it); names not in the table become
// kcl_<name with dots as underscores>, with `_total` for counts and `_seconds` for timings.
//
// Hot path: a consumer thread looks its series up under a shared lock (taken exclusively only
// the first time a name+labels pair is seen) and updates atomics. A scrape takes the same
// shared lock to read the atomics, so consumers never wait for a scrape and a scrape never
// waits for a consumer (other than one creating a new series).
//
// Thread safety: every member is safe to call from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "kcl/metrics.h"

namespace kcl::metrics {

enum class MetricKind { kCounter, kGauge, kHistogram };

// Upper bounds (seconds) of the histogram buckets; +Inf is implied.
inline constexpr std::array<double, 14> kDurationBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

using Labels = std::vector<std::pair<std::string, std::string>>;  // sorted by key

// One series as read by a scrape.
struct SeriesSnapshot {
  std::string family;  // Prometheus name, without _bucket/_sum/_count
  MetricKind kind = MetricKind::kCounter;
  Labels labels;
  double value = 0;  // counter or gauge
  // Histogram: cumulative counts per bucket of kDurationBuckets, then +Inf; sum in seconds.
  std::array<std::uint64_t, kDurationBuckets.size() + 1> buckets{};
  double sum = 0;
  std::uint64_t count = 0;
};

class MetricsRegistry final : public MetricsSink {
 public:
  MetricsRegistry();
  ~MetricsRegistry() override;

  void count(std::string_view name, double value, MetricTags tags) override;
  void gauge(std::string_view name, double value, MetricTags tags) override;
  void timing(std::string_view name, std::chrono::nanoseconds value, MetricTags tags) override;
  // Hides the gauges whose labels include every tag until one is set again (a series is never
  // freed: the hot path writes through references to it).
  void forget(MetricTags tags) override;

  // Every series, sorted by family then labels.
  std::vector<SeriesSnapshot> snapshot() const;
  // The Prometheus text exposition (Content-Type: text/plain; version=0.0.4).
  std::string prometheus_text() const;

  // The Prometheus family a library metric point lands in, and its HELP text.
  static std::string family_name(std::string_view name, MetricKind kind);
  static std::string help_text(const std::string& family);

 private:
  struct Series;
  Series& series(std::string_view name, MetricKind kind, MetricTags tags);

  mutable std::shared_mutex mu_;
  // Key: family + '\0' + label pairs; a node map so references stay valid.
  std::map<std::string, std::unique_ptr<Series>> series_;
};

// Escapes a label value for the exposition (backslash, double quote, line feed).
std::string escape_label_value(std::string_view v);
// A valid Prometheus label name made from a tag key ([a-zA-Z_][a-zA-Z0-9_]*).
std::string sanitize_label_name(std::string_view key);

}  // namespace kcl::metrics
