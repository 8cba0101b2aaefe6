#include "kcl/retrieval_config.h"

#include <string>

namespace kcl {
namespace {

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// A stream consumer's name, as RegisterStreamConsumer takes it.
void check_consumer_name(const std::string& consumer_name, std::vector<std::string>& problems) {
  if (consumer_name.size() > 128) {
    problems.emplace_back("consumer_name is longer than 128 characters");
  }
  for (char c : consumer_name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) {
      problems.push_back("consumer_name '" + consumer_name +
                         "' may hold only letters, digits, '_', '.' and '-'");
      break;
    }
  }
}

}  // namespace

std::vector<std::string> RetrievalConfig::validate() const {
  using std::chrono::milliseconds;
  using std::chrono::minutes;
  using std::chrono::seconds;
  std::vector<std::string> problems;
  auto within = [&](std::string_view name, milliseconds value, milliseconds lo, milliseconds hi,
                    std::string_view hi_text) {
    if (value < lo || value > hi) {
      problems.push_back(std::string(name) + " is " + ms(value) + "; it must be between " + ms(lo) +
                         " and " + std::string(hi_text));
    }
  };

  if (max_records_per_call < 1 || max_records_per_call > 10000) {
    problems.push_back("max_records_per_call is " + std::to_string(max_records_per_call) +
                       "; it must be between 1 and 10000 (the GetRecords limit)");
  }
  within("min_call_interval", min_call_interval, milliseconds(0), seconds(60), "60 s");
  // Both waits stay inside a shard iterator's 5-minute life: an iterator that expires during an
  // idle wait at LATEST is asked for again at LATEST, past what came meanwhile.
  within("idle_time_between_calls", idle_time_between_calls, milliseconds(0), minutes(4),
         "4 min (a shard iterator lives 5)");
  if (max_read_bytes_per_second != 0 && max_read_bytes_per_second < 1024) {
    problems.push_back("max_read_bytes_per_second is " + std::to_string(max_read_bytes_per_second) +
                       "; it must be 0 (no pacing by bytes) or at least 1024");
  }
  if (max_prefetch_records < 1 || max_prefetch_records > 10'000'000) {
    problems.push_back("max_prefetch_records is " + std::to_string(max_prefetch_records) +
                       "; it must be between 1 and 10000000");
  }
  if (max_prefetch_bytes < 1 || max_prefetch_bytes > (std::size_t{16} << 30)) {
    problems.push_back("max_prefetch_bytes is " + std::to_string(max_prefetch_bytes) +
                       "; it must be between 1 byte and 16 GiB");
  }
  within("throttle_backoff_base", throttle_backoff_base, milliseconds(1), minutes(1), "1 min");
  if (throttle_backoff_max < throttle_backoff_base || throttle_backoff_max > minutes(4)) {
    problems.push_back("throttle_backoff_max is " + ms(throttle_backoff_max) +
                       "; it must be at least throttle_backoff_base (" + ms(throttle_backoff_base) +
                       ") and at most 4 min (a shard iterator lives 5)");
  }
  within("get_records_timeout", get_records_timeout, milliseconds(100), minutes(10), "10 min");
  within("iterator_request_timeout", iterator_request_timeout, milliseconds(100), minutes(10),
         "10 min");
  if (call_max_attempts < 0 || call_max_attempts > 20) {
    problems.push_back("call_max_attempts is " + std::to_string(call_max_attempts) +
                       "; it must be between 0 (the AWS client's setting) and 20");
  }
  within("fanout_idle_timeout", fanout_idle_timeout, seconds(1), minutes(10), "10 min");
  within("fanout_in_use_backoff", fanout_in_use_backoff, milliseconds(100), minutes(5), "5 min");
  within("fanout_resubscribe_jitter", fanout_resubscribe_jitter, milliseconds(0), seconds(10),
         "10 s");
  check_consumer_name(consumer_name, problems);
  return problems;
}

}  // namespace kcl
