#include "aws/retry.h"

#include <algorithm>
#include <array>

namespace kcl::aws {

bool is_throttling_error(std::string_view t) {
  static constexpr std::array<std::string_view, 17> kThrottling = {
      "ThrottlingException",
      "Throttling",
      "ThrottledException",
      "RequestThrottledException",
      "RequestThrottled",
      "TooManyRequestsException",
      "ProvisionedThroughputExceededException",
      "TransactionInProgressException",
      "RequestLimitExceeded",
      "BandwidthLimitExceeded",
      "LimitExceededException",
      "SlowDown",
      "PriorRequestNotComplete",
      "EC2ThrottledException",
      "KMSThrottlingException",
      "ThroughputExceededException",
      "RequestLimitExceededException",
  };
  return std::find(kThrottling.begin(), kThrottling.end(), t) != kThrottling.end();
}

bool is_transient_error(std::string_view t) {
  static constexpr std::array<std::string_view, 11> kTransient = {
      "RequestTimeout",
      "RequestTimeoutException",
      "InternalFailure",
      "InternalFailureException",
      "InternalError",
      "InternalServerError",
      "InternalServerErrorException",
      "ServiceUnavailable",
      "ServiceUnavailableException",
      "TransactionConflictException",
      "IDPCommunicationError",
  };
  return std::find(kTransient.begin(), kTransient.end(), t) != kTransient.end();
}

std::chrono::milliseconds backoff_ceiling(const RetryConfig& config, int retry) {
  const auto base = std::max<std::int64_t>(0, config.base_delay.count());
  const auto cap = std::max<std::int64_t>(0, config.max_backoff.count());
  retry = std::clamp(retry, 0, 62);
  // base * 2^retry without overflow: stop doubling once past the cap.
  std::int64_t v = base;
  for (int i = 0; i < retry && v < cap; ++i) v *= 2;
  return std::chrono::milliseconds(std::min(v, cap));
}

std::chrono::milliseconds full_jitter_backoff(const RetryConfig& config, int retry,
                                              std::uint64_t random_bits) {
  const auto ceiling = static_cast<std::uint64_t>(backoff_ceiling(config, retry).count());
  if (ceiling == 0) return std::chrono::milliseconds(0);
  // Uniform in [0, ceiling]; the modulo bias is negligible for ceilings far below 2^64.
  return std::chrono::milliseconds(static_cast<std::int64_t>(random_bits % (ceiling + 1)));
}

bool retryable(StatusCode code, RetryScope scope) {
  switch (code) {
    case StatusCode::kUnavailable:
      return true;
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kInternal:
      return scope == RetryScope::kSeries;
    default:
      return false;
  }
}

bool RetryQuota::acquire(const Status& failure, int* taken) {
  const int cost = failure.code() == StatusCode::kDeadlineExceeded || failure.timed_out()
                       ? kTimeoutCost
                       : kRetryCost;
  std::lock_guard<std::mutex> lock(mu_);
  if (tokens_ < cost) return false;
  tokens_ -= cost;
  if (taken) *taken += cost;
  return true;
}

void RetryQuota::on_success(int taken) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_ = std::min(capacity_, tokens_ + (taken > 0 ? taken : kSuccessRefund));
}

int RetryQuota::available() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_;
}

std::optional<std::chrono::milliseconds> RetryPolicy::next_delay(const Status& failure, int retry,
                                                                 int* taken) {
  if (!is_retryable(failure.code()) || !quota_.acquire(failure, taken)) return std::nullopt;
  return next_delay_paid(failure, retry);
}

std::optional<std::chrono::milliseconds> RetryPolicy::next_delay_paid(const Status& failure,
                                                                      int retry) {
  if (!is_retryable(failure.code())) return std::nullopt;
  return full_jitter_backoff(config_, retry, jitter_.next());
}

SeriesRule SeriesRule::records_source(std::chrono::milliseconds base,
                                      std::chrono::milliseconds cap) {
  return SeriesRule{base, cap, 0, 5};
}

SeriesRule SeriesRule::fan_out(std::chrono::milliseconds base, std::chrono::milliseconds cap) {
  return SeriesRule{base, cap, 0, 0};
}

SeriesRule SeriesRule::start_up() {
  return SeriesRule{std::chrono::milliseconds(100), std::chrono::milliseconds(6400), 8, -1};
}

namespace {
std::uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}
}  // namespace

RetrySeries::RetrySeries(SeriesRule rule, std::optional<std::uint64_t> jitter_seed)
    : rule_(rule), rng_(jitter_seed ? *jitter_seed : random_seed()) {}

std::optional<std::chrono::milliseconds> RetrySeries::next_delay(const Status& failure) {
  if (failures_ < 1'000'000) ++failures_;
  if (!retryable(failure.code(), RetryScope::kSeries)) return std::nullopt;
  if (rule_.max_attempts > 0 && failures_ >= rule_.max_attempts) return std::nullopt;
  if (failure.code() == StatusCode::kInternal && rule_.max_malformed_in_a_row >= 0 &&
      ++malformed_ > rule_.max_malformed_in_a_row) {
    return std::nullopt;
  }
  RetryConfig backoff;
  backoff.base_delay = rule_.base_delay;
  backoff.max_backoff = rule_.max_backoff;
  return full_jitter_backoff(backoff, failures_ - 1, rng_());
}

JitterSource::JitterSource(std::optional<std::uint64_t> seed) {
  if (seed) {
    rng_.seed(*seed);
  } else {
    std::random_device rd;
    rng_.seed((static_cast<std::uint64_t>(rd()) << 32) ^ rd());
  }
}

std::uint64_t JitterSource::next() {
  std::lock_guard<std::mutex> lock(mu_);
  return rng_();
}

}  // namespace kcl::aws
