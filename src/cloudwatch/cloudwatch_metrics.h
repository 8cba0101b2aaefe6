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
// A gauge (a level: leases held, a shard's lag) is published in every interval, not only in
// those it was set in: callers set some gauges only when they change (leases held on a take
// or a loss, an idle shard's lag), and a series that goes silent blanks dashboards and sends
// alarms to INSUFFICIENT_DATA (the Java KCL publishes CurrentLeases every renewal). An interval
// it was not set in carries its last value (count 1, sum = min = max = that value) until it is
// set again or forget() drops it (a shard's consumer ended). Counts and timings reset every
// interval.
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
#include <utility>
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
  // Gauges set with every one of `tags` (among all the tags they were set with, not only
  // those that became dimensions) are no longer carried into later intervals, nor published
  // for the current one; a gauge set again afterwards is published again.
  void forget(MetricTags tags) override;

  // Everything aggregated since the last drain, and every gauge's last value in a series
  // not set since (see above). Resets counts and timings.
  std::vector<Datum> drain();
  // Points dropped because max_series distinct series were already held (gauges carried
  // from earlier intervals count among them until forgotten).
  std::uint64_t dropped() const;

 private:
  enum class Kind { kCount, kGauge, kTiming };
  void add(std::string_view point, Kind kind, double value, MetricTags tags);

  // A gauge's tags as set (key, value), which forget() matches.
  using Labels = std::vector<std::pair<std::string, std::string>>;
  struct Last {
    double value = 0;
    bool set_this_interval = false;
  };
  struct Series {
    Datum datum;  // this interval's points; count 0: none yet
    // Gauges: the last value of each tag set that maps to this series (one, unless a
    // dimension is off: then the shards of a ShardId-less series).
    std::map<Labels, Last> last;
  };

  const MetricsLevel level_;
  const bool shard_dimension_;
  const std::size_t max_series_;
  mutable std::mutex mu_;
  // (operation, name, shard, stream) -> datum
  using SeriesKey = std::tuple<std::string, std::string, std::string, std::string>;
  std::map<SeriesKey, Series, std::less<>> series_;
  std::uint64_t dropped_ = 0;
};

}  // namespace kcl::cloudwatch
