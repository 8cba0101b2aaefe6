// kcl/status.h: the error model of kcl-cpp.
//
// Every operation below the public API returns a Status or a Result<T>. The code says
// what the caller should do next, not merely what happened:
//   kUnavailable       transient (throttled, 5xx, timeout, connection failure): retry the call
//                      later, with backoff.
//   kConditionFailed   a conditional write lost a race: re-read and restart the
//                      read-modify-write (it is an expected outcome, not a fault).
//   kLeaseLost         this worker no longer holds the lease: stop working on the shard.
//   kNotFound          the stream / table / item / shard does not exist.
//   kAlreadyExists     the resource exists or is being changed (ResourceInUse).
//   kExpiredIterator   the shard iterator expired: get a new one from the last position.
//   kInvalidArgument   the request is wrong (validation, bad input): fix the input; retrying
//                      the same call will not help.
//   kPermissionDenied  credentials missing, wrong or not allowed: fix the configuration.
//   kFailedPrecondition the system is in a state that does not allow the operation
//                      (e.g. wrong table schema, SHARD_END not checkpointed): fix the state.
//   kDeadlineExceeded  the per-call deadline passed (after retries).
//   kCancelled         the operation was abandoned because of shutdown.
//   kInternal          a malformed response or a broken invariant: a bug or a bad peer.
//
// Thread safety: Status and Result are values; distinct objects may be used from any thread.
#pragma once

#include <cassert>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kcl {

enum class StatusCode {
  kOk = 0,
  kUnavailable,
  kConditionFailed,
  kLeaseLost,
  kNotFound,
  kAlreadyExists,
  kExpiredIterator,
  kInvalidArgument,
  kPermissionDenied,
  kFailedPrecondition,
  kDeadlineExceeded,
  kCancelled,
  kInternal,
};

std::string_view to_string(StatusCode code) noexcept;

// Details of a failed call to an AWS service. Never holds secrets.
struct AwsErrorDetails {
  std::string operation;   // e.g. "Kinesis.GetRecords"
  std::string endpoint;    // e.g. "https://kinesis.us-east-1.amazonaws.com"
  int http_status = 0;     // 0 when no response was received
  std::string error_type;  // AWS error type, e.g. "ResourceNotFoundException"
  std::string request_id;  // x-amzn-RequestId, when the service sent one
  int attempts = 0;        // how many attempts were made
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  Status(StatusCode code, std::string message, AwsErrorDetails aws)
      : code_(code), message_(std::move(message)), aws_(std::move(aws)) {}

  static Status Ok() { return Status(); }

  bool ok() const noexcept { return code_ == StatusCode::kOk; }
  StatusCode code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  const std::optional<AwsErrorDetails>& aws() const noexcept { return aws_; }

  // True when retrying the same call later may succeed (kUnavailable). The callers that go
  // on after a whole call failed (a shard's records source, the worker's start) retry more
  // codes than this; their rules are in one place, the retry policy (src/aws/retry.h).
  bool retryable() const noexcept { return code_ == StatusCode::kUnavailable; }

  // True for a failure that ended because no answer came in time (a connect or request
  // timeout), set by the HTTP transport. It is retried as its code says; the retry quota
  // charges more for retrying it, as the AWS SDKs do.
  bool timed_out() const noexcept { return timed_out_; }
  // This status marked as a timeout (see timed_out()).
  Status as_timeout() const {
    Status s = *this;
    s.timed_out_ = true;
    return s;
  }

  // One line for people: "<code>: <message> [operation=... endpoint=... http=... type=...
  // request-id=...]".
  std::string to_string() const;

  // Prepends context ("while taking lease shardId-0001: ") to the message.
  Status with_context(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::optional<AwsErrorDetails> aws_;
  bool timed_out_ = false;
};

inline std::ostream& operator<<(std::ostream& os, const Status& s) { return os << s.to_string(); }

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(implicit)
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }  // NOLINT

  bool ok() const noexcept { return std::holds_alternative<T>(v_); }
  explicit operator bool() const noexcept { return ok(); }

  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace kcl
