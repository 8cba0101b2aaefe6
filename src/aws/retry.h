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

// The retry quota of the SDKs' standard mode: a bucket of tokens shared by every call of one
// client. A retry takes kRetryCost tokens (kTimeoutCost after a timeout); a call that
// succeeds puts back what its retries took, or kSuccessRefund when it needed none. When the
// bucket cannot pay for a retry, the failure is returned at once: a storm of failures does
// not multiply the load on a struggling service.
class RetryQuota {
 public:
  static constexpr int kCapacity = 500;
  static constexpr int kRetryCost = 5;
  static constexpr int kTimeoutCost = 10;
  static constexpr int kSuccessRefund = 1;

  explicit RetryQuota(int capacity = kCapacity) : capacity_(capacity), tokens_(capacity) {}
  // Takes the cost of retrying after `failure`; false (nothing taken) when it cannot pay.
  bool acquire(const Status& failure, int* taken);
  // A call succeeded after retries that took `taken` tokens (0: it needed none).
  void on_success(int taken);
  int available() const;

 private:
  const int capacity_;
  mutable std::mutex mu_;
  int tokens_;
};

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

// The one retry policy of kcl-cpp's AWS calls: which failures are retried (is_retryable),
// how long to wait before each retry (full jitter, capped exponential), and whether the
// client's retry quota allows one more. AwsJsonClient runs it for blocking calls; a caller
// that must not block (a shard's records source on the worker's pool) makes single-attempt
// calls and asks the same policy for the delay, then reschedules itself after it.
//
// Thread safety: all methods may be called from many threads at once.
class RetryPolicy {
 public:
  explicit RetryPolicy(RetryConfig config, std::optional<std::uint64_t> jitter_seed = std::nullopt)
      : config_(config), jitter_(jitter_seed) {}

  // The wait before retry number `retry` (0 = before the second attempt) after `failure`,
  // or nullopt when the failure is not retryable or the quota cannot pay for a retry. When a
  // delay is returned, the quota's tokens were taken and are added to `*taken`.
  std::optional<std::chrono::milliseconds> next_delay(const Status& failure, int retry, int* taken);
  // A call (or a single-attempt caller's series of calls) succeeded; `taken` is what its
  // retries took from the quota.
  void on_success(int taken) { quota_.on_success(taken); }

  const RetryConfig& config() const { return config_; }
  const RetryQuota& quota() const { return quota_; }

 private:
  const RetryConfig config_;
  RetryQuota quota_;
  JitterSource jitter_;
};

// Test seams of the retry loop of AwsJsonClient.
struct RetryHooks {
  // Waits between attempts; empty = the client's Clock (idle_for). A test passes one that
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
