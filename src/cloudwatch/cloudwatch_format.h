// cloudwatch/cloudwatch_format.h: aggregated datums as CloudWatch Embedded Metric Format lines
// and as PutMetricData request bodies (the query protocol, form-encoded).
//
// EMF: one JSON object per line and per (Operation, ShardId) group, at most 100 metrics per
// line (the format's limit). A Count or Bytes metric carries the interval's sum; a time or
// level (Milliseconds, None) its mean over the interval (EMF has no statistic sets; for
// minimum and maximum use PutMetricData).
//
// PutMetricData: StatisticValues (SampleCount, Sum, Minimum, Maximum) per datum, at most
// `max_datums` datums and `max_bytes` bytes per body (the API's limits: 1,000 and 1 MB).
//
// Thread safety: pure functions.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "cloudwatch/cloudwatch_metrics.h"

namespace kcl::cloudwatch {

struct PublishContext {
  std::string metrics_namespace;
  std::string worker_id;  // the WorkerIdentifier dimension; empty = none
  std::chrono::system_clock::time_point timestamp;
};

std::vector<std::string> emf_lines(const std::vector<Datum>& datums, const PublishContext& ctx);

inline constexpr std::size_t kMaxDatumsPerCall = 1000;
inline constexpr std::size_t kMaxBytesPerCall = 1000 * 1000;

struct PutBody {
  std::string body;
  std::size_t datums = 0;
};
// The PutMetricData calls for `datums`, within CloudWatch's limits: a datum whose name the
// service would refuse (more than 255 characters; it would fail the whole call) is left out
// and its name added to `dropped`; a dimension value is made of printable ASCII characters
// (others become '?') and cut at 1,024, as the service takes them.
std::vector<PutBody> put_metric_data_bodies(const std::vector<Datum>& datums,
                                            const PublishContext& ctx,
                                            std::size_t max_datums = kMaxDatumsPerCall,
                                            std::size_t max_bytes = kMaxBytesPerCall,
                                            std::vector<std::string>* dropped = nullptr);

// RFC 3986 percent-encoding of everything but unreserved characters (form values).
std::string form_encode(std::string_view text);

}  // namespace kcl::cloudwatch
