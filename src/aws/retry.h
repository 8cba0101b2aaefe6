// Retry policy of the AWS calls, in the manner of the AWS SDKs' "standard" mode: which
// failures are retried, capped exponential backoff with full jitter, and the hooks that let
// tests drive the retry loop without real sleeps.
//
// Thread safety: the free functions are pure; JitterSource::next() may be called from many
// threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string_view>

#include "aws/aws_json_client.h"
#include "kcl/aws_config.h"
#include "kcl/metrics.h"
#include "kcl/status.h"

namespace kcl::aws {

// Throttling error types (ThrottlingException, ProvisionedThroughputExceededException,
// RequestLimitExceeded, SlowDown, ...).
bool is_throttling_error(std::string_view error_type);

// Error types that say the service had a transient problem (InternalFailure,
// ServiceUnavailable, RequestTimeout, TransactionConflictException, ...).
bool is_transient_error(std::string_view error_type);

// Whether an attempt that ended with `code` (from classify_aws_error or the transport) may
// be retried: only kUnavailable (throttling, 5xx, 429, timeouts, connection failures).
inline bool is_retryable(StatusCode code) { return code == StatusCode::kUnavailable; }

// The upper bound of the backoff before retry number `retry` (0 = before the second
// attempt): min(max_backoff, base_delay * 2^retry).
std::chrono::milliseconds backoff_ceiling(const RetryConfig& config, int retry);

// Full jitter: `random_bits` mapped uniformly onto [0, backoff_ceiling(config, retry)].
std::chrono::milliseconds full_jitter_backoff(const RetryConfig& config, int retry,
                                              std::uint64_t random_bits);

// A seeded random source shared by the calls of one client.
class JitterSource {
 public:
  // nullopt = seeded from std::random_device.
  explicit JitterSource(std::optional<std::uint64_t> seed = std::nullopt);
  std::uint64_t next();

 private:
  std::mutex mu_;
  std::mt19937_64 rng_;
};

// Test seams of the retry loop of AwsJsonClient.
struct RetryHooks {
  // Waits between attempts; empty = std::this_thread::sleep_for. A test passes one that
  // advances a ManualClock and records the delays.
  std::function<void(std::chrono::milliseconds)> sleep;
  // Seed of the jitter; nullopt = random.
  std::optional<std::uint64_t> jitter_seed;
  // Told of every attempt ("aws.requests" {service, operation, outcome: ok, throttled,
  // error}) and every retry ("aws.retries" {service, operation}); null = not reported.
  std::shared_ptr<MetricsSink> metrics;
};

// make_aws_json_client with the retry hooks (defined in aws_json_client.cpp).
std::unique_ptr<AwsJsonClient> make_aws_json_client(
    ServiceSpec service, const AwsConfig& config, std::shared_ptr<HttpTransport> transport,
    std::shared_ptr<CredentialsProvider> credentials, const Clock& clock, RetryHooks hooks);

}  // namespace kcl::aws
