// AwsJsonClient: one AWS JSON-protocol service (Kinesis: JSON 1.1, DynamoDB: JSON 1.0), or a
// query-protocol one (CloudWatch's PutMetricData: ServiceSpec::query_protocol).
// Builds the request (X-Amz-Target, content type), signs it with SigV4, sends it with
// retries (AWS SDK "standard" mode: capped exponential backoff with full jitter on
// throttling, 5xx, timeouts, connection failures; no retry on validation errors), and maps
// failures to a Status whose AwsErrorDetails name the operation, endpoint, HTTP status,
// AWS error type, message and request id.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "aws/credentials.h"
#include "aws/http_transport.h"
#include "kcl/aws_config.h"
#include "kcl/clock.h"
#include "kcl/metrics.h"
#include "kcl/status.h"

namespace kcl::aws {

struct ServiceSpec {
  std::string signing_name;   // "kinesis", "dynamodb", "sts"
  std::string target_prefix;  // "Kinesis_20131202", "DynamoDB_20120810"
  std::string content_type;   // "application/x-amz-json-1.1" / "application/x-amz-json-1.0"
  std::string display_name;   // "Kinesis", "DynamoDB" (used in "Kinesis.GetRecords")
  // The query protocol (CloudWatch): the body is form-encoded (Action=...&Version=...) by
  // the caller, no X-Amz-Target is sent, errors come as XML.
  bool query_protocol = false;
};

ServiceSpec kinesis_service();
ServiceSpec dynamodb_service();

// The budget a caller gives one call; zero fields take the client's RetryConfig. Callers
// never loop around call() for retries: they set the budget (1 attempt for a caller that
// backs off by rescheduling itself, see RetryPolicy).
struct CallOptions {
  // Overrides the configured per-request timeout when non-zero (e.g. long reads).
  std::chrono::milliseconds request_timeout{0};
  // Overrides the configured attempts when non-zero.
  int max_attempts = 0;
  // Overrides the configured call deadline (all attempts and backoffs) when non-zero.
  std::chrono::milliseconds deadline{0};
  // The request's Content-Type when not empty (e.g. "application/x-amz-cbor-1.1" for a body
  // in CBOR); else the service's. An error answer is read in the encoding it names.
  std::string_view content_type{};
  // When set, receives the Content-Type header of the last answer (cleared first; stays
  // empty when no answer came), for a caller that checks which encoding a server answers in.
  std::string* answer_content_type = nullptr;
};

class RetryPolicy;

// Thread safety: call() may be used from many threads at once.
class AwsJsonClient {
 public:
  virtual ~AwsJsonClient() = default;
  // Sends `json_body` as operation `operation` (e.g. "GetRecords"). Returns the response
  // body on HTTP 200, else a Status as described above.
  virtual Result<std::string> call(std::string_view operation, std::string json_body,
                                   const CallOptions& options = {}) = 0;
  // The request call() would send first, signed, for a caller that sends it itself (a
  // streaming call such as SubscribeToShard over aws::StreamingTransport). Errors: no
  // credentials, an unresolved endpoint; kFailedPrecondition for clients that cannot sign
  // (fakes).
  // `content_type` as in CallOptions.
  virtual Result<HttpRequest> signed_request(std::string_view operation, std::string json_body,
                                             std::string_view content_type = {}) {
    (void)operation;
    (void)json_body;
    (void)content_type;
    return Status(StatusCode::kFailedPrecondition, "this client cannot sign requests");
  }
  virtual const std::string& endpoint() const = 0;
  virtual const std::string& region() const = 0;
  // The client's retry policy (classification, backoff, quota), for callers that make
  // single-attempt calls and back off themselves; nullptr when the client has none (fakes).
  virtual RetryPolicy* retry_policy() { return nullptr; }
};

// Maps an AWS error (HTTP status + error type from the body or x-amzn-ErrorType) to a
// StatusCode. Exposed for tests.
StatusCode classify_aws_error(int http_status, std::string_view error_type);

// Whether an error refuses a request's signature for the host's clock (RequestTimeTooSkewed,
// RequestExpired, "Signature expired" or "not yet current") or for credentials that expired
// (ExpiredTokenException): what the client's own calls mend, measuring the skew from the
// answer's Date or fetching the credentials anew, and which a streaming request signed with
// signed_request() (SubscribeToShard) cannot mend itself.
bool is_signing_rejection(std::string_view error_type, std::string_view message);

struct ResolvedEndpoint {
  std::string url;  // scheme://host[:port]
  std::string region;
};

// Resolves region and endpoint for a service from config, env vars and the shared config
// file, as the AWS SDKs do. Errors: kInvalidArgument naming what is missing.
Result<ResolvedEndpoint> resolve_endpoint(const AwsConfig& config, std::string_view service);

std::unique_ptr<AwsJsonClient> make_aws_json_client(
    ServiceSpec service, const AwsConfig& config, std::shared_ptr<HttpTransport> transport,
    std::shared_ptr<CredentialsProvider> credentials, const Clock& clock = SystemClock::instance());

// What clients of several services share: one HTTP transport (its connection pool) and one
// credentials chain (one fetch and refresh of temporary credentials for all of them).
struct AwsClientParts {
  std::shared_ptr<HttpTransport> transport;
  std::shared_ptr<CredentialsProvider> credentials;
  // Where clients made with these parts report their requests and retries; null = nowhere.
  std::shared_ptr<MetricsSink> metrics;
};

// Convenience: everything from config (curl transport, default credentials chain). With
// `shared`, the parts in it are used, and made there first when empty, so the next client
// made with the same `shared` reuses them. Errors: the endpoint cannot be resolved.
Result<std::unique_ptr<AwsJsonClient>> make_aws_json_client(ServiceSpec service,
                                                            const AwsConfig& config,
                                                            AwsClientParts* shared = nullptr);

}  // namespace kcl::aws
