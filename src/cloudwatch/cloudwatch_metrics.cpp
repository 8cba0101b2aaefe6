#include "cloudwatch/cloudwatch_metrics.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace kcl::cloudwatch {

namespace {

struct Row {
  std::string_view point;
  JavaMetric metric;
};

// The Java KCL's Operation and metric names (its CloudWatch documentation's table).
constexpr std::array<Row, 9> kRows = {{
    {"consumer.records_processed",
     {"ProcessTask", "RecordsProcessed", "Count", MetricsLevel::kSummary}},
    {"consumer.bytes_processed",
     {"ProcessTask", "DataBytesProcessed", "Bytes", MetricsLevel::kSummary}},
    {"consumer.millis_behind_latest",
     {"ProcessTask", "MillisBehindLatest", "Milliseconds", MetricsLevel::kSummary}},
    {"processor.process_records",
     {"ProcessTask", "RecordProcessor.processRecords.Time", "Milliseconds",
      MetricsLevel::kSummary}},
    {"retrieval.get_records",
     {"ProcessTask", "KinesisDataFetcher.getRecords.Time", "Milliseconds",
      MetricsLevel::kDetailed}},
    {"leases.held", {"RenewAllLeases", "CurrentLeases", "Count", MetricsLevel::kSummary}},
    {"leases.lost", {"RenewAllLeases", "LostLeases", "Count", MetricsLevel::kSummary}},
    {"leases.renew_latency",
     {"RenewAllLeases", "RenewLease.Time", "Milliseconds", MetricsLevel::kDetailed}},
    {"leases.taken", {"TakeLeases", "TakenLeases", "Count", MetricsLevel::kSummary}},
}};

// Adds one value to a statistic set (count 0: empty).
void include(Datum& d, double value) {
  d.min = d.count == 0 ? value : std::min(d.min, value);
  d.max = d.count == 0 ? value : std::max(d.max, value);
  d.count += 1;
  d.sum += value;
}

}  // namespace

std::optional<JavaMetric> java_metric(std::string_view point) {
  for (const Row& row : kRows) {
    if (row.point == point) return row.metric;
  }
  return std::nullopt;
}

CloudWatchAggregator::CloudWatchAggregator(const CloudWatchMetricsConfig& config)
    : level_(config.level),
      shard_dimension_(config.shard_id_dimension),
      max_series_(config.max_series) {}

void CloudWatchAggregator::count(std::string_view name, double value, MetricTags tags) {
  add(name, Kind::kCount, value, tags);
}
void CloudWatchAggregator::gauge(std::string_view name, double value, MetricTags tags) {
  add(name, Kind::kGauge, value, tags);
}
void CloudWatchAggregator::timing(std::string_view name, std::chrono::nanoseconds value,
                                  MetricTags tags) {
  add(name, Kind::kTiming, std::chrono::duration<double, std::milli>(value).count(), tags);
}

void CloudWatchAggregator::add(std::string_view point, Kind kind, double value, MetricTags tags) {
  if (level_ == MetricsLevel::kNone) return;
  std::string shard, stream;
  for (const MetricTag& t : tags) {
    if (t.key == "shard") shard = t.value;
    if (t.key == "stream") stream = t.value;
  }
  if (!shard_dimension_) shard.clear();
  std::string operation, name, unit;
  if (auto java = java_metric(point)) {
    if (java->level == MetricsLevel::kDetailed && level_ != MetricsLevel::kDetailed) return;
    operation = java->operation;
    name = java->name;
    unit = java->unit;
  } else {
    if (level_ != MetricsLevel::kDetailed) return;
    const std::size_t dot = point.find('.');
    operation = std::string(point.substr(0, dot));
    name = std::string(point);
    for (const MetricTag& t : tags) {
      if (t.key != "shard" && t.key != "stream") name += "." + std::string(t.value);
    }
    unit = kind == Kind::kTiming ? "Milliseconds" : kind == Kind::kCount ? "Count" : "None";
  }
  Labels labels;
  if (kind == Kind::kGauge) {
    labels.reserve(tags.size());
    for (const MetricTag& t : tags) labels.emplace_back(t.key, t.value);
  }
  std::lock_guard<std::mutex> lock(mu_);
  SeriesKey key{std::move(operation), std::move(name), std::move(shard), std::move(stream)};
  auto it = series_.find(key);
  if (it == series_.end()) {
    if (series_.size() >= max_series_) {
      ++dropped_;
      return;
    }
    Series s;
    Datum& d = s.datum;
    d.operation = std::get<0>(key);
    d.name = std::get<1>(key);
    d.shard_id = std::get<2>(key);
    d.stream = std::get<3>(key);
    d.unit = std::move(unit);
    d.level = kind == Kind::kGauge;
    it = series_.emplace(std::move(key), std::move(s)).first;
  }
  Series& s = it->second;
  include(s.datum, value);
  if (s.datum.level) s.last[std::move(labels)] = Last{value, true};
}

void CloudWatchAggregator::forget(MetricTags tags) {
  if (tags.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = series_.begin(); it != series_.end();) {
    Series& s = it->second;
    if (!s.datum.level) {
      ++it;
      continue;
    }
    std::erase_if(s.last, [&](const auto& entry) {
      const Labels& labels = entry.first;
      return std::all_of(tags.begin(), tags.end(), [&](const MetricTag& t) {
        return std::any_of(labels.begin(), labels.end(),
                           [&](const auto& l) { return l.first == t.key && l.second == t.value; });
      });
    });
    it = s.last.empty() ? series_.erase(it) : std::next(it);
  }
}

std::vector<Datum> CloudWatchAggregator::drain() {
  std::vector<Datum> out;
  std::lock_guard<std::mutex> lock(mu_);
  out.reserve(series_.size());
  for (auto it = series_.begin(); it != series_.end();) {
    Series& s = it->second;
    if (!s.datum.level) {
      out.push_back(std::move(s.datum));
      it = series_.erase(it);
      continue;
    }
    // A gauge: this interval's points, and the last value of each tag set not set in it.
    Datum d = s.datum;
    for (auto& [labels, last] : s.last) {
      if (!last.set_this_interval) include(d, last.value);
      last.set_this_interval = false;
    }
    s.datum.count = s.datum.sum = s.datum.min = s.datum.max = 0;
    if (d.count > 0) out.push_back(std::move(d));
    ++it;
  }
  return out;
}

std::uint64_t CloudWatchAggregator::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

}  // namespace kcl::cloudwatch
