#include "kcl/status.h"

namespace kcl {

std::string_view to_string(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kConditionFailed:
      return "CONDITION_FAILED";
    case StatusCode::kLeaseLost:
      return "LEASE_LOST";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kExpiredIterator:
      return "EXPIRED_ITERATOR";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kCancelled:
      return "CANCELLED";
    case StatusCode::kInternal:
      return "INTERNAL";
  }
  return "UNKNOWN";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  std::string out(kcl::to_string(code_));
  out += ": ";
  out += message_;
  if (aws_) {
    out += " [operation=" + aws_->operation;
    out += " endpoint=" + aws_->endpoint;
    out += " http=" + std::to_string(aws_->http_status);
    if (!aws_->error_type.empty()) out += " type=" + aws_->error_type;
    if (!aws_->request_id.empty()) out += " request-id=" + aws_->request_id;
    if (aws_->attempts > 0) out += " attempts=" + std::to_string(aws_->attempts);
    out += "]";
  }
  return out;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  Status s = *this;
  s.message_ = std::string(context) + s.message_;
  return s;
}

}  // namespace kcl
