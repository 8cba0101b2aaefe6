// kcl/cloudwatch_config.h: publishing the worker's metrics to Amazon CloudWatch, under the
// names, dimensions and levels the Java KCL uses, so existing dashboards and alarms keep
// working. Part of kcl::WorkerConfig (field `cloudwatch`). docs/metrics.md lists the names.
//
// Two ways:
//  - kEmf: CloudWatch Embedded Metric Format, one JSON object per line, appended to a file
//    (or written to stderr). The CloudWatch agent, the ECS/EKS log drivers (awslogs,
//    Fluent Bit) and Lambda turn these lines into metrics; no API calls from the worker.
//  - kPutMetricData: the worker calls CloudWatch's PutMetricData itself (SigV4, the shared
//    retry policy), batched to the API's limits, from a thread of its own.
// Either way points are aggregated per metric and dimensions over `buffer_time` (a
// statistic set: count, sum, minimum, maximum) and published off the processing threads;
// a failure to publish is counted and logged once per series, never blocks records.
//
// Thread safety: a plain value.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace kcl {

enum class CloudWatchMetricsMode { kOff, kEmf, kPutMetricData };

// As the Java KCL's MetricsLevel: NONE publishes nothing; SUMMARY the metrics a dashboard of
// the application needs (records processed, lag, leases held...); DETAILED everything
// (per-call times, every kcl-cpp point).
enum class MetricsLevel { kNone, kSummary, kDetailed };

struct CloudWatchMetricsConfig {
  CloudWatchMetricsMode mode = CloudWatchMetricsMode::kOff;
  // Default DETAILED (as the Java KCL).
  MetricsLevel level = MetricsLevel::kDetailed;
  // The CloudWatch namespace. Default (empty): the application name (as the Java KCL).
  std::string metrics_namespace;
  // kEmf: the file lines are appended to; empty = stderr.
  std::string emf_path;
  // Dimensions besides Operation (always on): ShardId on per-shard metrics (default on, as
  // the Java KCL) and WorkerIdentifier on every metric (default off, as the Java KCL).
  bool shard_id_dimension = true;
  bool worker_identifier_dimension = false;
  // How long points are aggregated before they are published. Default 10 s (the Java
  // KCL's metricsBufferTimeMillis), range 1 s..10 min.
  std::chrono::milliseconds buffer_time{10000};
  // Distinct metric+dimension series kept between publications; points of new series
  // beyond it are dropped (and counted). Default 10,000 (the Java KCL's
  // metricsMaxQueueSize), range 100..1,000,000.
  std::size_t max_series = 10000;

  // Every problem, in plain words; empty when valid.
  std::vector<std::string> validate() const;
};

// "NONE", "SUMMARY", "DETAILED" (case-insensitive) -> level; false when not one of them.
bool parse_metrics_level(const std::string& text, MetricsLevel& level);

}  // namespace kcl
