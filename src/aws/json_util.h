// Reading AWS JSON-protocol error responses, and making server text safe to show.
//
// Thread safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aws/http_transport.h"

namespace kcl::aws {

struct AwsErrorBody {
  std::string type;     // e.g. "ResourceNotFoundException"; empty when none was found
  std::string message;  // the service's message; empty when none
  bool empty_body = false;
  bool body_is_json = false;  // a structured error (JSON, the query protocol's XML, or CBOR
                              // when the Content-Type says so); false for HTML pages, plain
                              // text, truncated JSON or CBOR
  std::string snippet;        // when not JSON: the start of the body, sanitized (<= ~200 chars)
  std::string content_type;   // the response's Content-Type, sanitized
};

// "com.amazonaws.kinesis.v20131202#ResourceNotFoundException" -> "ResourceNotFoundException";
// "ValidationException:http://internal.amazon.com/coral/..." -> "ValidationException".
std::string normalize_error_type(std::string_view raw);

// The error type (x-amzn-ErrorType header, else the body's `__type`, `code` or `Code`) and
// message (`message`, `Message` or `errorMessage`) of an error response. A body that is not
// a JSON object is reported as such with a snippet; from truncated JSON the `__type` is
// still recovered when it is complete.
// `secrets` (credentials, the request's session token and signature) are replaced by
// "[redacted]" in the message and the snippet before either is cut to its length: a cut copy
// of a secret would no longer match it afterwards.
AwsErrorBody parse_aws_error(const HttpResponse& response,
                             std::span<const std::string_view> secrets = {});

// `text` with every occurrence of each non-empty secret replaced by "[redacted]".
std::string redact_secrets(std::string text, std::span<const std::string_view> secrets);

// The secrets a signed request carries, to keep out of messages about its answer: its
// session token (X-Amz-Security-Token) and its signature (the Authorization's Signature=).
std::vector<std::string> request_secrets(const HttpRequest& request);

// At most `max_chars` characters of `text` for a one-line message: whitespace runs become
// one space, control and non-ASCII bytes become '?', "..." marks a cut.
std::string sanitize_snippet(std::string_view text, std::size_t max_chars = 200);

}  // namespace kcl::aws
