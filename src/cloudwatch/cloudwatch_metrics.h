// cloudwatch/cloudwatch_metrics.h: kcl-cpp's metric points as CloudWatch metrics. Maps each
// point to the Java KCL's Operation, metric name, unit and level (docs/metrics.md has the
// table), and aggregates points per series into statistic sets until they are published.
//
//   point "consumer.records_processed" {shard=S}  ->  Operation=ProcessTask,
//       RecordsProcessed (Count, SUMMARY), ShardId=S
//
// A point tagged with its stream (a worker of several streams) carries a StreamId dimension,
// so the same shard id of two streams stays two series (the Java KCL's StreamId; its value
// there is the serialized identifier, here the stream's name).
//
// A point without a Java counterpart is published at DETAILED only, under Operation = its
// first word ("aws.requests" -> Operation "aws") and its name with its tag values appended
// ("aws.requests.Kinesis.GetRecords.ok").
//
// Thread safety: CloudWatchAggregator's members may be called from any thread; a point costs
// one short critical section (no I/O).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "kcl/cloudwatch_config.h"
#include "kcl/metrics.h"

namespace kcl::cloudwatch {

struct JavaMetric {
  std::string_view operation;
  std::string_view name;
  std::string_view unit;  // CloudWatch StandardUnit: "Count", "Bytes", "Milliseconds"
  MetricsLevel level = MetricsLevel::kSummary;
};

// The Java KCL's name of a point; nullopt when it has none.
std::optional<JavaMetric> java_metric(std::string_view point);

// One series' values over a publication interval.
struct Datum {
  std::string operation;
  std::string name;
  std::string unit;
  std::string shard_id;  // empty: no ShardId dimension
  double count = 0;      // SampleCount
  double sum = 0;
  double min = 0;
  double max = 0;
  // A level (a gauge: leases held, a queue's depth), whatever its unit: one value for it
  // (EMF) is its mean over the interval, never a sum of its samples.
  bool level = false;
  // Several streams: the stream's name (the StreamId dimension); empty: none.
  std::string stream = {};
};

class CloudWatchAggregator final : public MetricsSink {
 public:
  explicit CloudWatchAggregator(const CloudWatchMetricsConfig& config);

  void count(std::string_view name, double value, MetricTags tags) override;
  void gauge(std::string_view name, double value, MetricTags tags) override;
  void timing(std::string_view name, std::chrono::nanoseconds value, MetricTags tags) override;

  // Everything aggregated since the last drain (and resets).
  std::vector<Datum> drain();
  // Points dropped because max_series distinct series were already held.
  std::uint64_t dropped() const;

 private:
  enum class Kind { kCount, kGauge, kTiming };
  void add(std::string_view point, Kind kind, double value, MetricTags tags);

  const MetricsLevel level_;
  const bool shard_dimension_;
  const std::size_t max_series_;
  mutable std::mutex mu_;
  // (operation, name, shard, stream) -> datum
  using SeriesKey = std::tuple<std::string, std::string, std::string, std::string>;
  std::map<SeriesKey, Datum, std::less<>> series_;
  std::uint64_t dropped_ = 0;
};

}  // namespace kcl::cloudwatch
