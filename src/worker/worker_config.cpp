#include <string>

#include "base/config_checks.h"
#include "kcl/worker.h"
#include "observability/status_server.h"

namespace kcl {

namespace {
using base::check_range;
void append(std::vector<std::string>& to, const std::vector<std::string>& from) {
  to.insert(to.end(), from.begin(), from.end());
}
}  // namespace

std::vector<std::string> WorkerConfig::validate() const {
  using std::chrono::milliseconds;
  std::vector<std::string> problems;
  if (stream_name.empty()) {
    problems.emplace_back("stream_name is empty: name the Kinesis stream to read");
  } else if (stream_name.size() > 128) {
    problems.emplace_back("stream_name is longer than 128 characters");
  }
  LeaseConfig l = leases;
  if (l.worker_id.empty()) l.worker_id = "default-worker-id";  // filled in at start
  append(problems, l.validate());
  if (initial_position.kind == StartPosition::Kind::kAfterCheckpoint) {
    problems.emplace_back(
        "initial_position is AFTER_CHECKPOINT, a resume point; it must be TRIM_HORIZON, "
        "LATEST or AT_TIMESTAMP");
  } else {
    for (const std::string& p : initial_position.validate()) {
      problems.push_back("initial_position: " + p);
    }
  }
  append(problems, retrieval.validate());
  if (!http_address.empty()) {
    if (auto a = observability::parse_http_address(http_address); !a.ok()) {
      problems.push_back(a.status().message());
    }
  }
  const ProcessingConfig& p = processing;
  if (p.thread_pool_size < 1 || p.thread_pool_size > 256) {
    problems.push_back("processing.thread_pool_size is " + std::to_string(p.thread_pool_size) +
                       "; it must be between 1 and 256");
  }
  check_range(problems, "processing.parent_check_interval", p.parent_check_interval,
              milliseconds(10), milliseconds(60000));
  check_range(problems, "processing.shard_sync_interval", p.shard_sync_interval, milliseconds(100),
              milliseconds(3600000));
  check_range(problems, "processing.failure_backoff_base", p.failure_backoff_base, milliseconds(1),
              milliseconds(60000));
  check_range(problems, "processing.failure_backoff_max", p.failure_backoff_max,
              p.failure_backoff_base, milliseconds(3600000));
  if (p.max_attempts_before_skip < 1 || p.max_attempts_before_skip > 1000) {
    problems.push_back("processing.max_attempts_before_skip is " +
                       std::to_string(p.max_attempts_before_skip) +
                       "; it must be between 1 and 1000");
  }
  check_range(problems, "processing.hung_processor_warning", p.hung_processor_warning,
              milliseconds(1000), milliseconds(3600000));
  check_range(problems, "processing.scheduler_interval", p.scheduler_interval, milliseconds(10),
              milliseconds(10000));
  check_range(problems, "processing.shutdown_timeout", p.shutdown_timeout, milliseconds(1000),
              milliseconds(3600000));
  if (p.empty_batch_interval.count() != 0) {
    check_range(problems, "processing.empty_batch_interval", p.empty_batch_interval,
                milliseconds(100), milliseconds(3600000));
  }
  append(problems, aws.validate());
  append(problems, cloudwatch.validate());
  return problems;
}

}  // namespace kcl
