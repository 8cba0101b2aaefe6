#include "cloudwatch/cloudwatch_publisher.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/repeat_report.h"
#include "base/thread_name.h"

namespace kcl::cloudwatch {

aws::ServiceSpec cloudwatch_service() {
  aws::ServiceSpec s{"monitoring", "", "application/x-www-form-urlencoded; charset=utf-8",
                     "CloudWatch"};
  s.query_protocol = true;
  return s;
}

CloudWatchPublisher::CloudWatchPublisher(CloudWatchMetricsConfig config,
                                         std::string metrics_namespace, std::string worker_id,
                                         std::unique_ptr<aws::AwsJsonClient> client,
                                         std::shared_ptr<Logger> logger, const Clock& clock)
    : config_(std::move(config)),
      namespace_(std::move(metrics_namespace)),
      worker_id_(config_.worker_identifier_dimension ? std::move(worker_id) : std::string()),
      client_(std::move(client)),
      logger_(std::move(logger)),
      clock_(clock),
      aggregator_(std::make_shared<CloudWatchAggregator>(config_)) {}

CloudWatchPublisher::~CloudWatchPublisher() { stop(); }

void CloudWatchPublisher::log(LogLevel level, const std::string& message) const {
  if (logger_ && logger_->enabled(level)) logger_->log(level, "cloudwatch", message);
}

Status CloudWatchPublisher::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return Status::Ok();
  if (config_.mode == CloudWatchMetricsMode::kEmf) {
    if (config_.emf_path.empty()) {
      emf_ = stderr;
    } else {
      emf_ = std::fopen(config_.emf_path.c_str(), "a");
      if (!emf_) {
        return Status(
            StatusCode::kFailedPrecondition,
            "cannot open the EMF metrics file " + config_.emf_path + ": " + std::strerror(errno));
      }
    }
  } else if (config_.mode == CloudWatchMetricsMode::kPutMetricData && !client_) {
    return Status(StatusCode::kFailedPrecondition, "PutMetricData publishing has no client");
  }
  started_ = true;
  thread_ = base::named_thread("kcl-cloudwatch", [this] { run(); });
  return Status::Ok();
}

void CloudWatchPublisher::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    clock_.wait_for(lock, cv_, config_.buffer_time, [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    publish_now();
    lock.lock();
  }
}

void CloudWatchPublisher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
    stop_by_ = clock_.now() + kStopPublishDeadline;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  publish_now();  // what is left
  if (emf_ && emf_ != stderr) std::fclose(emf_);
  emf_ = nullptr;
}

void CloudWatchPublisher::publish_now() {
  std::lock_guard<std::mutex> publishing(publish_mu_);
  std::vector<Datum> datums = aggregator_->drain();
  const std::uint64_t dropped = aggregator_->dropped();
  std::uint64_t nth_with_drops = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dropped > stats_.dropped_points) nth_with_drops = ++publications_with_drops_;
    stats_.dropped_points = dropped;
  }
  if (nth_with_drops > 0 && base::worth_reporting(nth_with_drops)) {
    log(LogLevel::kWarn,
        std::to_string(dropped) + " metric points dropped so far (" +
            std::to_string(nth_with_drops) +
            (nth_with_drops == 1 ? " publication" : " publications") +
            " with drops): max_series (" + std::to_string(config_.max_series) +
            ") distinct series were already held, points of further series are not published; "
            "raise cloudwatch.max_series (metrics_max_series) or lower the metrics level");
  }
  if (datums.empty() || config_.mode == CloudWatchMetricsMode::kOff) return;
  PublishContext ctx{namespace_, worker_id_, clock_.wall_now()};
  if (config_.mode == CloudWatchMetricsMode::kEmf) {
    write_emf(datums, ctx);
  } else {
    put(datums, ctx);
  }
}

void CloudWatchPublisher::write_emf(const std::vector<Datum>& datums, const PublishContext& ctx) {
  if (!emf_) return;
  std::uint64_t written = 0;
  for (std::string& line : emf_lines(datums, ctx)) {
    line.push_back('\n');
    // One write per line, so lines of several writers to one file do not interleave.
    if (std::fwrite(line.data(), 1, line.size(), emf_) == line.size()) ++written;
    std::fflush(emf_);
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.emf_lines += written;
  stats_.datums_published += datums.size();
}

void CloudWatchPublisher::put(const std::vector<Datum>& datums, const PublishContext& ctx) {
  std::vector<std::string> dropped;
  const std::vector<PutBody> bodies =
      put_metric_data_bodies(datums, ctx, kMaxDatumsPerCall, kMaxBytesPerCall, &dropped);
  for (const std::string& name : dropped) {
    // Once per name (a name is built from a table's, a sink's...: it comes back each interval).
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (refused_names_.size() < kMaxRefusedNamesKept) first = refused_names_.insert(name).second;
    }
    if (first) {
      log(LogLevel::kWarn, "metric " + name.substr(0, 80) + "... (" + std::to_string(name.size()) +
                               " bytes) is not published to CloudWatch: a metric name has at "
                               "most 255 characters there");
    }
  }
  for (const PutBody& put : bodies) {
    // The call's budget: the periodic one, or after stop() one attempt within what is left
    // of kStopPublishDeadline (none left: not sent).
    aws::CallOptions options;
    bool stopping = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping = stopping_;
    }
    if (stopping) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(stop_by_ - clock_.now());
      options.max_attempts = 1;
      options.deadline = left;
    } else {
      options.deadline = std::min(config_.buffer_time, kPublishCallDeadline);
    }
    Result<std::string> r =
        stopping && options.deadline.count() <= 0
            ? Result<std::string>(Status(StatusCode::kDeadlineExceeded,
                                         "PutMetricData not sent: the " +
                                             std::to_string(kStopPublishDeadline.count()) +
                                             " ms given to publishing after stop() have passed"))
            : client_->call("PutMetricData", put.body, options);
    std::uint64_t failures = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (r.ok()) {
        ++stats_.calls;
        stats_.datums_published += put.datums;
        failures_in_a_row_ = 0;
      } else {
        ++stats_.failed_calls;
        failures = ++failures_in_a_row_;
      }
    }
    if (r.ok()) continue;
    aggregator_->count("cloudwatch.publish_failures", 1, {});
    if (failures_to_) failures_to_->count("cloudwatch.publish_failures", 1, {});
    if (base::worth_reporting(failures)) {
      log(LogLevel::kWarn, "PutMetricData failed" +
                               (failures > 1 ? " (" + std::to_string(failures) + " calls in a row)"
                                             : std::string()) +
                               ": " + r.status().to_string() +
                               "; those metrics are dropped, records are not affected");
    }
  }
}

PublisherStats CloudWatchPublisher::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace kcl::cloudwatch
