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

// Who retries; what a failure is worth depends on it. Every retry decision of kcl-cpp is
// retryable(code, scope) below, by status code (the AWS error types were mapped to codes by
// classify_aws_error, the transport's failures by the transport):
//   kUnavailable       throttling, 5xx, 429, a timeout, a connection failure: retried in
//                      every scope.
//   kDeadlineExceeded  a whole call's deadline passed (after its own retries): retried by a
//                      series (kSeries), never inside the call.
//   kInternal          a malformed answer (a body cut short by a dropped connection, a
//                      proxy's page): retried by a series while its rule allows
//                      (SeriesRule::max_malformed_in_a_row), never inside the call.
//   anything else      final: the caller gets it.
enum class RetryScope {
  // An attempt of one AWS call inside AwsJsonClient's loop, and a record the producer sends
  // again: kUnavailable only (Status::retryable()).
  kCall,
  // A caller that goes on after a whole call failed: a shard's records source (polling and
  // fan-out) and the worker's start-up steps (RetrySeries).
  kSeries,
};
bool retryable(StatusCode code, RetryScope scope);

// Whether an attempt of a call that ended with `code` may be retried inside the call:
// retryable(code, RetryScope::kCall).
inline bool is_retryable(StatusCode code) { return retryable(code, RetryScope::kCall); }

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
  // The same wait, for a retry already paid for: the records of one failed call retried
  // shard by shard pay the quota once, as one retried request does.
  std::optional<std::chrono::milliseconds> next_delay_paid(const Status& failure, int retry);
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

// The rule of one caller's series of attempts (RetrySeries): the backoff's base and cap,
// how many attempts, and how many malformed answers (kInternal) in a row are retried.
struct SeriesRule {
  std::chrono::milliseconds base_delay{100};
  std::chrono::milliseconds max_backoff{6400};
  int max_attempts = 0;            // attempts in a row before giving up; 0 = for ever
  int max_malformed_in_a_row = 0;  // kInternal since the last success that are retried; -1 = all

  // A shard's polling records source: for ever, with the retrieval backoff; kInternal up to
  // 5 in a row (more mean a broken peer, not a dropped connection).
  static SeriesRule records_source(std::chrono::milliseconds base, std::chrono::milliseconds cap);
  // A shard's fan-out subscription: for ever, with the retrieval backoff; kInternal (a
  // request that could not be made) is final: the event stream's own breaks are retried as
  // kUnavailable.
  static SeriesRule fan_out(std::chrono::milliseconds base, std::chrono::milliseconds cap);
  // The worker's start-up steps (the lease table, the assignment's table, the first shard
  // sync): 8 attempts of a step, 100 ms doubling up to 6.4 s; each step's AWS calls are
  // retried by the client as well, so a step makes at most 8 x RetryConfig::max_attempts
  // attempts of a call.
  static SeriesRule start_up();
};

// One caller's series of attempts outside AwsJsonClient (a records source, a start-up step):
// after each failure, the wait before the next attempt under the caller's SeriesRule, or
// nullopt when the failure ends the series. The caller waits (or reschedules itself) for the
// delay; nothing here sleeps. The client's retry quota is not asked: a records source goes on
// for ever at its own backoff, and its calls are single attempts that take nothing from it.
//
// Thread safety: one series belongs to one caller; not for concurrent use.
class RetrySeries {
 public:
  explicit RetrySeries(SeriesRule rule, std::optional<std::uint64_t> jitter_seed = std::nullopt);

  // After a failed attempt: the wait before the next one (full jitter, capped exponential in
  // the failures in a row), or nullopt when `failure` is final for a series (retryable()),
  // the attempts are used up, or too many malformed answers came in a row.
  std::optional<std::chrono::milliseconds> next_delay(const Status& failure);
  // An attempt succeeded: the series starts again.
  void on_success() {
    failures_ = 0;
    malformed_ = 0;
  }
  // Failures since the last success.
  int failures_in_a_row() const { return failures_; }

 private:
  const SeriesRule rule_;
  int failures_ = 0;
  int malformed_ = 0;
  std::mt19937_64 rng_;
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
