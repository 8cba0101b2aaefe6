#include <algorithm>
#include <optional>
#include <set>
#include <string>

#include "base/config_checks.h"
#include "kcl/worker.h"
#include "observability/status_server.h"
#include "worker/stream_set.h"

namespace kcl {

namespace {
using base::check_range;
void append(std::vector<std::string>& to, const std::vector<std::string>& from) {
  to.insert(to.end(), from.begin(), from.end());
}
// processing.*: the pool, the intervals, the processor's error policy.
void check_processing(const ProcessingConfig& p, std::vector<std::string>& problems) {
  using std::chrono::milliseconds;
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
  if (p.max_attempts_before_dead_letter < 1 || p.max_attempts_before_dead_letter > 1000) {
    problems.push_back("processing.max_attempts_before_dead_letter is " +
                       std::to_string(p.max_attempts_before_dead_letter) +
                       "; it must be between 1 and 1000");
  }
  if (p.dead_letter_outage_limit.count() != 0) {
    check_range(problems, "processing.dead_letter_outage_limit", p.dead_letter_outage_limit,
                milliseconds(1000), milliseconds(7LL * 24 * 3600 * 1000));  // or 0 = never
  }
  if (p.on_processor_error == ProcessorErrorPolicy::kDeadLetter && !p.dead_letter_sink) {
    problems.push_back(
        "processing.on_processor_error is kDeadLetter but processing.dead_letter_sink is not "
        "set; give it a sink (kcl/dead_letter.h)");
  }
  check_range(problems, "processing.hung_processor_warning", p.hung_processor_warning,
              milliseconds(1000), milliseconds(3600000));
  check_range(problems, "processing.scheduler_interval", p.scheduler_interval, milliseconds(10),
              milliseconds(10000));
  check_range(problems, "processing.shutdown_timeout", p.shutdown_timeout, milliseconds(1000),
              milliseconds(3600000));
  if (p.stall_threshold.count() != 0) {
    check_range(problems, "processing.stall_threshold", p.stall_threshold, milliseconds(1000),
                milliseconds(3600000));  // or 0 = off
  }
  if (p.empty_batch_interval.count() != 0) {
    check_range(problems, "processing.empty_batch_interval", p.empty_batch_interval,
                milliseconds(100), milliseconds(3600000));
  }
}

}  // namespace

void WorkerConfig::check_streams(std::vector<std::string>& problems) const {
  using std::chrono::milliseconds;
  const int ways = !stream_name.empty() + !streams.empty() + (stream_tracker != nullptr);
  if (ways == 0) {
    problems.emplace_back(
        "stream_name is empty: name the Kinesis stream to read (or the streams, or a "
        "stream_tracker)");
  } else if (ways > 1) {
    problems.emplace_back("set one of stream_name, streams and stream_tracker, not several");
  }
  if (!stream_name.empty()) {
    if (auto p = worker::stream_name_problem(stream_name)) problems.push_back("stream_name " + *p);
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < streams.size(); ++i) {
    const StreamConfig& s = streams[i];
    const std::string where = "streams[" + std::to_string(i) + "]";
    if (auto p = worker::stream_name_problem(s.name)) problems.push_back(where + ".name " + *p);
    if (!seen.insert(s.name).second)
      problems.push_back(where + ": stream " + s.name + " is listed twice");
    if (s.initial_position) {
      if (auto p = worker::initial_position_problem(*s.initial_position)) {
        problems.push_back(where + ".initial_position (stream " + s.name + ") " + *p);
      }
    }
  }
  if (!streams.empty() || stream_tracker) {
    check_range(problems, "stream_poll_interval", stream_poll_interval, milliseconds(1000),
                milliseconds(3600000));
    check_range(problems, "former_stream_deletion_delay", former_stream_deletion_delay,
                milliseconds(0), milliseconds(7LL * 24 * 3600 * 1000));
  }
  // Fan-out registers a stream consumer on each stream read, named retrieval.consumer_name
  // (checked by RetrievalConfig::validate), else the application name: that name must then
  // be one Kinesis accepts, or no stream could be read.
  if (retrieval.mode == RetrievalMode::kFanOut && retrieval.consumer_name.empty() &&
      !leases.application_name.empty()) {
    const std::string& name = leases.application_name;
    const bool allowed = name.size() <= 128 && std::all_of(name.begin(), name.end(), [](char c) {
                           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                  (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
                         });
    if (!allowed) {
      problems.push_back(
          "retrieval.mode is fan-out and retrieval.consumer_name is empty, so the stream "
          "consumer would be named after application_name '" +
          name +
          "', which Kinesis does not accept as a consumer name (1..128 of a-z A-Z 0-9 _ . -); "
          "set retrieval.consumer_name");
    }
  }
}

std::vector<std::string> WorkerConfig::validate() const {
  using std::chrono::milliseconds;
  std::vector<std::string> problems;
  check_streams(problems);
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
  if (!http_advertise_address.empty()) {
    if (http_address.empty()) {
      problems.push_back("http_advertise_address is set, but http_address (the endpoint) is off");
    }
    if (http_advertise_address.find_first_of(" \t\r\n/?#") != std::string::npos &&
        http_advertise_address.rfind("http://", 0) != 0) {
      problems.push_back("http_advertise_address '" + http_advertise_address +
                         "': expected HOST, HOST:PORT, [IPv6]:PORT or http://HOST:PORT");
    }
  }
  check_processing(processing, problems);
  append(problems, aws.validate());
  append(problems, cloudwatch.validate());
  return problems;
}

}  // namespace kcl
