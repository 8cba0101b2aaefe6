// A scripted aws::AwsJsonClient for unit tests of the Kinesis calls: it records every call
// (operation and parsed JSON body) and answers from a queue of responses, or from a handler
// that sees the call. Shared by the tests of tests/unit/kinesis.
#pragma once

#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aws/aws_json_client.h"
#include "kcl/status.h"

namespace kcl::kinesis::fake {

struct Call {
  std::string operation;
  nlohmann::json body;       // decoded from JSON, or from CBOR when content_type says so
  std::string content_type;  // CallOptions::content_type (empty: the service's JSON)
};

class FakeJsonClient : public aws::AwsJsonClient {
 public:
  Result<std::string> call(std::string_view operation, std::string json_body,
                           const aws::CallOptions& options = {}) override {
    const bool cbor = options.content_type.find("cbor") != std::string_view::npos;
    calls.push_back({std::string(operation),
                     cbor ? nlohmann::json::from_cbor(json_body) : nlohmann::json::parse(json_body),
                     std::string(options.content_type)});
    if (handler) return handler(calls.back());
    if (responses.empty()) return Status(StatusCode::kInternal, "fake: no response scripted");
    auto r = std::move(responses.front());
    responses.pop_front();
    return r;
  }
  const std::string& endpoint() const override { return endpoint_; }
  const std::string& region() const override { return region_; }

  // The operations called, in order.
  std::vector<std::string> operations() const {
    std::vector<std::string> out;
    for (const Call& c : calls) out.push_back(c.operation);
    return out;
  }

  std::vector<Call> calls;
  std::deque<Result<std::string>> responses;
  std::function<Result<std::string>(const Call&)> handler;

 private:
  std::string endpoint_ = "http://127.0.0.1:4567";
  std::string region_ = "us-east-1";
};

// An AWS error answer of Kinesis operation `op` as the real client reports it.
inline Status aws_error(StatusCode code, std::string type, std::string op) {
  AwsErrorDetails d;
  d.operation = "Kinesis." + op;
  d.endpoint = "http://127.0.0.1:4567";
  d.http_status = 400;
  d.error_type = std::move(type);
  return Status(code, "scripted " + d.error_type, d);
}

}  // namespace kcl::kinesis::fake
