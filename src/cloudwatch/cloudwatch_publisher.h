// cloudwatch/cloudwatch_publisher.h: publishes a worker's metrics to CloudWatch
// (kcl/cloudwatch_config.h) from a thread of its own. Every point goes to a
// CloudWatchAggregator (a short critical section on the caller's thread); every buffer_time
// the publisher thread drains it and either appends EMF lines to the file (or stderr) or
// sends PutMetricData calls (batched to the API's limits, SigV4-signed, retried by the
// shared retry policy). stop() publishes what is left.
//
// Failures: a call that fails after its retries drops that batch (metrics are not worth
// holding records' memory for), counts it ("cloudwatch.publish_failures", stats()) and is
// logged once per series of failures with its count; publishing never blocks a point.
// Points dropped past max_series are counted (stats().dropped_points) and logged with the
// count so far at the 1st, 3rd, 10th, 100th... publication that found more of them.
//
// Deadlines: PutMetricData calls go through a client that cannot cancel a call in flight,
// so every call is bounded instead. A periodic publication's call gets
// min(buffer_time, kPublishCallDeadline) for all its attempts; once stop() is called, calls
// get one attempt each and share kStopPublishDeadline from that moment, and those that would
// start after it are not sent (counted as failed calls). stop() so returns within about
// max(kStopPublishDeadline, the rest of the call in flight) even against an endpoint that
// accepts and never answers (it took two minutes: the call in flight and a final publication
// of 5 attempts of 30 s), well inside Kubernetes' 30 s grace period.
//
// Thread safety: sink() from any thread; start() and stop() from one thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "aws/aws_json_client.h"
#include "cloudwatch/cloudwatch_format.h"
#include "cloudwatch/cloudwatch_metrics.h"
#include "kcl/clock.h"
#include "kcl/cloudwatch_config.h"
#include "kcl/logging.h"
#include "kcl/status.h"

namespace kcl::cloudwatch {

// The query protocol client PutMetricData goes through (signing name "monitoring").
aws::ServiceSpec cloudwatch_service();

struct PublisherStats {
  std::uint64_t datums_published = 0;
  std::uint64_t calls = 0;           // PutMetricData calls that succeeded
  std::uint64_t failed_calls = 0;    // PutMetricData calls that failed after retries
  std::uint64_t emf_lines = 0;       // EMF lines written
  std::uint64_t dropped_points = 0;  // points of series beyond max_series
};

class CloudWatchPublisher {
 public:
  // What one periodic publication's call may take, retries included (less when buffer_time
  // is shorter: a publication does not run into the next one).
  static constexpr std::chrono::milliseconds kPublishCallDeadline{10000};
  // What publishing may take after stop() is called, besides the rest of a call in flight:
  // one attempt per call.
  static constexpr std::chrono::milliseconds kStopPublishDeadline{5000};

  // `client` is the PutMetricData client (mode kPutMetricData; null for kEmf).
  CloudWatchPublisher(CloudWatchMetricsConfig config, std::string metrics_namespace,
                      std::string worker_id, std::unique_ptr<aws::AwsJsonClient> client,
                      std::shared_ptr<Logger> logger, const Clock& clock);
  ~CloudWatchPublisher();
  CloudWatchPublisher(const CloudWatchPublisher&) = delete;
  CloudWatchPublisher& operator=(const CloudWatchPublisher&) = delete;

  std::shared_ptr<MetricsSink> sink() const { return aggregator_; }
  // Where else to count the calls that fail (`cloudwatch.publish_failures`): the worker's own
  // sinks (its /metrics, the application's), since CloudWatch is what fails. Before start().
  void report_failures_to(std::shared_ptr<MetricsSink> sink) { failures_to_ = std::move(sink); }
  // Opens the EMF file (kFailedPrecondition naming it when it cannot be) and starts the
  // thread.
  Status start();
  // Publishes what is left (within kStopPublishDeadline, see above) and joins the thread.
  // Idempotent.
  void stop();
  // Publishes what was aggregated so far, on the caller's thread (the thread calls it every
  // buffer_time).
  void publish_now();
  PublisherStats stats() const;

 private:
  void run();
  void write_emf(const std::vector<Datum>& datums, const PublishContext& ctx);
  void put(const std::vector<Datum>& datums, const PublishContext& ctx);
  void log(LogLevel level, const std::string& message) const;

  const CloudWatchMetricsConfig config_;
  const std::string namespace_;
  const std::string worker_id_;
  std::unique_ptr<aws::AwsJsonClient> client_;
  std::shared_ptr<Logger> logger_;
  const Clock& clock_;
  std::shared_ptr<CloudWatchAggregator> aggregator_;
  std::FILE* emf_ = nullptr;  // owned unless it is stderr
  std::mutex publish_mu_;     // one publication at a time
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  Clock::MonoTime stop_by_{};  // set by stop(): calls after it are not sent
  bool started_ = false;
  std::thread thread_;
  PublisherStats stats_;
  std::uint64_t failures_in_a_row_ = 0;
  std::shared_ptr<MetricsSink> failures_to_;  // may be null
  // Metric names too long for CloudWatch, each warned about once (at most this many kept).
  static constexpr std::size_t kMaxRefusedNamesKept = 1000;
  std::set<std::string> refused_names_;
  std::uint64_t publications_with_drops_ = 0;  // publications that found new points dropped
};

}  // namespace kcl::cloudwatch
