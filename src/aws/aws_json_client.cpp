// AwsJsonClient: the AWS JSON protocol over an HttpTransport, signed with SigV4, retried in
// the manner of the AWS SDKs' "standard" mode. See aws_json_client.h and retry.h.
//
// The retry loop, per call:
//   - the call deadline (RetryConfig.call_deadline) bounds the whole call: no attempt starts
//     after it, each attempt's request timeout is min(request timeout, time left), and a
//     backoff that would end past it ends the call with kDeadlineExceeded;
//   - only kUnavailable outcomes are retried (throttling, 5xx, 429, timeouts, connection
//     failures, transient error types), after a full-jitter backoff, while the client's
//     retry quota can pay for it (RetryPolicy in retry.h: the SDKs' standard mode);
//   - a clock-skew rejection (RequestTimeTooSkewed, "Signature expired") is retried at once,
//     once per call, with the skew measured from the response's Date header.
// Credentials are fetched for every attempt (the provider caches and refreshes them).
//
// Secrets: error messages carry the service's error type and message and a sanitized
// snippet of a non-JSON body; any occurrence of the secret key, the session token or the
// request signature in text from the server is replaced by "[redacted]".
#include "aws/aws_json_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <utility>

#include "aws/json_util.h"
#include "aws/retry.h"
#include "aws/sigv4.h"
#include "base/status_macros.h"

namespace kcl::aws {

ServiceSpec kinesis_service() {
  return ServiceSpec{"kinesis", "Kinesis_20131202", "application/x-amz-json-1.1", "Kinesis"};
}

ServiceSpec dynamodb_service() {
  return ServiceSpec{"dynamodb", "DynamoDB_20120810", "application/x-amz-json-1.0", "DynamoDB"};
}

StatusCode classify_aws_error(int http_status, std::string_view t) {
  if (!t.empty()) {
    if (is_throttling_error(t) || is_transient_error(t)) return StatusCode::kUnavailable;
    if (t == "ConditionalCheckFailedException") return StatusCode::kConditionFailed;
    // A cancelled transaction is nearly always a failed condition (or a conflict): re-read
    // and restart the read-modify-write.
    if (t == "TransactionCanceledException") return StatusCode::kConditionFailed;
    if (t == "ResourceNotFoundException" || t == "ResourceNotFound" ||
        t == "TableNotFoundException") {
      return StatusCode::kNotFound;
    }
    if (t == "ResourceInUseException" || t == "TableAlreadyExistsException") {
      return StatusCode::kAlreadyExists;
    }
    // An expired ListShards NextToken calls for the same action: start again from a
    // position you know.
    if (t == "ExpiredIteratorException" || t == "ExpiredNextTokenException") {
      return StatusCode::kExpiredIterator;
    }
    if (t == "UnrecognizedClientException" || t == "InvalidSignatureException" ||
        t == "AccessDeniedException" || t == "AccessDenied" || t == "ExpiredTokenException" ||
        t == "ExpiredToken" || t == "MissingAuthenticationToken" ||
        t == "MissingAuthenticationTokenException" || t == "IncompleteSignature" ||
        t == "IncompleteSignatureException" || t == "InvalidClientTokenId" ||
        t == "SignatureDoesNotMatch" || t == "RequestExpired" || t == "RequestTimeTooSkewed" ||
        t == "NotAuthorized" || t == "UnauthorizedOperation") {
      return StatusCode::kPermissionDenied;
    }
    if (t == "ValidationException" || t == "InvalidArgumentException" ||
        t == "SerializationException" || t == "InvalidParameterValue" ||
        t == "InvalidParameterCombination" || t == "MissingParameter" ||
        t == "UnknownOperationException" || t == "InvalidAction") {
      return StatusCode::kInvalidArgument;
    }
    if (t.substr(0, 3) == "KMS") return StatusCode::kFailedPrecondition;
    if (t == "ItemCollectionSizeLimitExceededException") return StatusCode::kFailedPrecondition;
  }
  if (http_status >= 500 || http_status == 429) return StatusCode::kUnavailable;
  if (http_status == 401 || http_status == 403) return StatusCode::kPermissionDenied;
  // An unknown 404 is most likely a wrong endpoint (a path on some other server), not a
  // missing stream or table: kNotFound here could make a caller create one.
  return StatusCode::kInvalidArgument;
}

namespace {

constexpr std::string_view kUserAgent = "kcl-cpp/0.1.0";

std::string replace_all(std::string text, std::string_view secret, std::string_view with) {
  if (secret.size() < 4) return text;  // too short to be a secret; avoids mangling text
  std::size_t pos = 0;
  while ((pos = text.find(secret, pos)) != std::string::npos) {
    text.replace(pos, secret.size(), with);
    pos += with.size();
  }
  return text;
}

// Parses an HTTP date ("Sun, 06 Nov 1994 08:49:37 GMT") with libcurl's date parser.
std::optional<std::chrono::system_clock::time_point> parse_http_date(const std::string& s) {
  if (s.empty()) return std::nullopt;
  const std::time_t t = curl_getdate(s.c_str(), nullptr);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(t);
}

bool looks_like_skew(std::string_view type, std::string_view message) {
  if (type == "RequestTimeTooSkewed" || type == "RequestExpired") return true;
  if (type == "InvalidSignatureException" || type == "SignatureDoesNotMatch") {
    return message.find("Signature expired") != std::string_view::npos ||
           message.find("Signature not yet current") != std::string_view::npos;
  }
  return false;
}

// host[:port] and path of an endpoint URL already validated by resolve_endpoint.
void split_endpoint(const std::string& url, std::string& host, std::string& path) {
  std::size_t sep = url.find("://");
  std::size_t start = sep == std::string::npos ? 0 : sep + 3;
  std::size_t slash = url.find('/', start);
  host = url.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
  path = slash == std::string::npos ? "/" : url.substr(slash);
  // Default ports are not part of the Host header curl sends.
  std::string scheme = sep == std::string::npos ? "" : url.substr(0, sep);
  auto strip = [&](std::string_view suffix) {
    if (host.size() > suffix.size() &&
        host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        host[host.size() - suffix.size() - 1] != ':') {
      host.resize(host.size() - suffix.size());
    }
  };
  if (scheme == "https") strip(":443");
  if (scheme == "http") strip(":80");
}

class JsonClient final : public AwsJsonClient {
 public:
  JsonClient(ServiceSpec service, const AwsConfig& config, std::shared_ptr<HttpTransport> transport,
             std::shared_ptr<CredentialsProvider> credentials, const Clock& clock, RetryHooks hooks)
      : service_(std::move(service)),
        retry_(config.retry),
        http_(config.http),
        transport_(std::move(transport)),
        credentials_(std::move(credentials)),
        clock_(clock),
        policy_(config.retry, hooks.jitter_seed),
        hooks_(std::move(hooks)) {
    Result<ResolvedEndpoint> ep = resolve_endpoint(config, service_.signing_name);
    if (ep.ok()) {
      endpoint_ = ep->url;
      region_ = ep->region;
      split_endpoint(endpoint_, host_, path_);
      url_ = endpoint_ + (path_ == "/" ? "/" : "");
    } else {
      config_error_ = ep.status();
    }
  }

  Result<HttpRequest> signed_request(std::string_view operation, std::string json_body) override {
    const std::string op = service_.display_name + "." + std::string(operation);
    AwsErrorDetails details;
    details.operation = op;
    details.endpoint = endpoint_;
    if (!config_error_.ok()) {
      return Status(config_error_.code(), op + ": " + config_error_.message(), details);
    }
    if (!credentials_) {
      return Status(StatusCode::kFailedPrecondition, op + ": the client has no credentials",
                    details);
    }
    HttpRequest request;
    request.method = "POST";
    request.url = url_;
    request.body = std::move(json_body);
    const std::string payload_hash = sha256_hex(request.body);
    Credentials creds;
    std::string signature;
    KCL_RETURN_IF_ERROR(prepare_request(op, service_.target_prefix + "." + std::string(operation),
                                        payload_hash, request, creds, signature, details));
    return request;
  }

  const std::string& endpoint() const override { return endpoint_; }
  const std::string& region() const override { return region_; }
  RetryPolicy* retry_policy() override { return &policy_; }

  Result<std::string> call(std::string_view operation, std::string json_body,
                           const CallOptions& options) override {
    const std::string op = service_.display_name + "." + std::string(operation);
    AwsErrorDetails details;
    details.operation = op;
    details.endpoint = endpoint_;
    if (!config_error_.ok()) {
      return Status(config_error_.code(), op + ": " + config_error_.message(), details);
    }
    if (!transport_ || !credentials_) {
      return Status(StatusCode::kFailedPrecondition,
                    op + ": the client has no transport or no credentials provider", details);
    }

    const int max_attempts =
        std::max(1, options.max_attempts > 0 ? options.max_attempts : retry_.max_attempts);
    const std::chrono::milliseconds request_timeout =
        options.request_timeout.count() > 0 ? options.request_timeout : http_.request_timeout;
    const Clock::MonoTime start = clock_.now();
    const std::chrono::milliseconds call_deadline =
        options.deadline.count() > 0 ? options.deadline : retry_.call_deadline;
    const Clock::MonoTime deadline = start + call_deadline;

    HttpRequest request;
    request.method = "POST";
    request.url = url_;
    request.body = std::move(json_body);
    const std::string payload_hash = sha256_hex(request.body);
    const std::string target = service_.target_prefix + "." + std::string(operation);

    bool skew_retried = false;
    int retries = 0;      // backoffs taken so far
    int quota_taken = 0;  // retry-quota tokens this call's retries took
    Status last;
    for (int attempt = 1;; ++attempt) {
      details.attempts = attempt;
      details.http_status = 0;
      details.error_type.clear();
      details.request_id.clear();

      const auto now = clock_.now();
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
      if (attempt > 1 && left.count() <= 0) {
        return deadline_exceeded(op, call_deadline, details, attempt - 1, last);
      }
      request.timeout = std::max(
          std::chrono::milliseconds(1),
          attempt == 1 && left.count() <= 0 ? request_timeout : std::min(request_timeout, left));

      const Clock::MonoTime attempt_start = clock_.now();
      Credentials creds;
      std::string signature;
      Status st = prepare_request(op, target, payload_hash, request, creds, signature, details);
      if (st.ok()) {
        Result<HttpResponse> resp = transport_->send(request);
        if (!resp.ok()) {
          st = Status(resp.status().code(), op + ": " + resp.status().message(), details);
        } else if (resp->status >= 200 && resp->status < 300) {
          policy_.on_success(quota_taken);
          report_attempt(operation, Status(), attempt_start);
          return std::move(resp->body);
        } else {
          bool skew = false;
          st = http_error(op, *resp, creds, signature, details, &skew);
          if (skew && !skew_retried && attempt < max_attempts && adjust_skew(*resp)) {
            skew_retried = true;
            report_attempt(operation, st, attempt_start);
            report_retry(operation);
            last = st;
            continue;  // at once: the signature was rejected for its time, not the load
          }
        }
      }
      report_attempt(operation, st, attempt_start);
      last = st;
      if (!is_retryable(st.code())) return st;
      if (attempt >= max_attempts) {
        return Status(st.code(),
                      st.message() + " (gave up after " + std::to_string(attempt) +
                          (attempt == 1 ? " attempt)" : " attempts)"),
                      st.aws().value_or(details));
      }
      if (clock_.now() >= deadline) {
        return deadline_exceeded(op, call_deadline, details, attempt, last);
      }
      const std::optional<std::chrono::milliseconds> delay =
          policy_.next_delay(st, retries++, &quota_taken);
      if (!delay) {
        return Status(st.code(),
                      st.message() + " (not retried: the client's retry quota is spent after " +
                          "repeated failures; it refills as calls succeed)",
                      st.aws().value_or(details));
      }
      if (clock_.now() + *delay >= deadline) {
        return deadline_exceeded(op, call_deadline, details, attempt, last);
      }
      report_retry(operation);
      sleep(*delay);
    }
  }

 private:
  // ok, throttled (the service asked us to slow down) or error.
  static std::string_view outcome_of(const Status& st) {
    if (st.ok()) return "ok";
    if (const auto& aws = st.aws()) {
      const std::string& t = aws->error_type;
      if (aws->http_status == 429 || t.find("Throttl") != std::string::npos ||
          t.find("LimitExceeded") != std::string::npos ||
          t.find("ProvisionedThroughputExceeded") != std::string::npos) {
        return "throttled";
      }
    }
    return "error";
  }
  void report_attempt(std::string_view operation, const Status& st,
                      Clock::MonoTime attempt_start) const {
    if (!hooks_.metrics) return;
    const MetricTag tags[] = {
        {"service", service_.display_name}, {"operation", operation}, {"outcome", outcome_of(st)}};
    hooks_.metrics->count("aws.requests", 1, MetricTags(tags, 3));
    // GetRecords round trips have a family of their own (the Java KCL's
    // KinesisDataFetcher.getRecords.Time).
    if (service_.display_name == "Kinesis" && operation == "GetRecords") {
      hooks_.metrics->timing("retrieval.get_records", clock_.now() - attempt_start, {});
    }
  }
  void report_retry(std::string_view operation) const {
    if (!hooks_.metrics) return;
    const MetricTag tags[] = {{"service", service_.display_name}, {"operation", operation}};
    hooks_.metrics->count("aws.retries", 1, MetricTags(tags, 2));
  }

  void sleep(std::chrono::milliseconds d) const {
    if (hooks_.sleep) {
      hooks_.sleep(d);
    } else if (d.count() > 0) {
      clock_.idle_for(d);
    }
  }

  Status deadline_exceeded(const std::string& op, std::chrono::milliseconds call_deadline,
                           AwsErrorDetails details, int attempts, const Status& last) const {
    if (last.aws()) details = *last.aws();
    details.attempts = attempts;
    std::string msg = op + ": call deadline of " + std::to_string(call_deadline.count()) +
                      " ms passed after " + std::to_string(attempts) +
                      (attempts == 1 ? " attempt" : " attempts");
    if (!last.ok())
      msg += "; last error: " + std::string(to_string(last.code())) + ": " + last.message();
    return Status(StatusCode::kDeadlineExceeded, msg, details);
  }

  // Fetches credentials and fills in the signed headers. `creds` and `signature` are kept
  // for scrubbing server text.
  Status prepare_request(const std::string& op, const std::string& target,
                         const std::string& payload_hash, HttpRequest& request, Credentials& creds,
                         std::string& signature, const AwsErrorDetails& details) {
    Result<Credentials> got = credentials_->get();
    if (!got.ok()) {
      StatusCode code = got.status().code() == StatusCode::kUnavailable
                            ? StatusCode::kUnavailable
                            : StatusCode::kPermissionDenied;
      return Status(code,
                    op + ": cannot get credentials (provider " + credentials_->name() +
                        "): " + got.status().message(),
                    details);
    }
    creds = std::move(got).value();

    SigningInput in;
    in.method = request.method;
    in.path = path_;
    in.headers = {{"Host", host_}, {"Content-Type", service_.content_type}};
    if (!service_.query_protocol) in.headers.emplace_back("X-Amz-Target", target);
    in.payload = request.body;
    in.payload_hash = payload_hash;
    in.region = region_;
    in.service = service_.signing_name;
    in.credentials = creds;
    in.time = clock_.wall_now() + std::chrono::milliseconds(skew_ms_.load());
    SigningResult signed_req = signer_.sign(in);
    signature = signed_req.signature;

    request.headers = std::move(in.headers);
    for (auto& h : signed_req.headers_to_add) request.headers.push_back(std::move(h));
    request.headers.emplace_back("User-Agent", std::string(kUserAgent));
    return Status::Ok();
  }

  Status http_error(const std::string& op, const HttpResponse& resp, const Credentials& creds,
                    const std::string& signature, AwsErrorDetails& details, bool* skew) const {
    AwsErrorBody e = parse_aws_error(resp);
    details.http_status = resp.status;
    details.error_type = e.type;
    details.request_id = resp.header("x-amzn-requestid");
    if (details.request_id.empty()) details.request_id = resp.header("x-amz-request-id");
    details.request_id = sanitize_snippet(details.request_id, 100);
    StatusCode code = classify_aws_error(resp.status, e.type);

    std::string msg = op + ": ";
    if (!e.type.empty()) msg += e.type + ": ";
    if (e.body_is_json) {
      msg += e.message.empty() ? "(no message)" : sanitize_snippet(e.message, 500);
      msg += " (HTTP " + std::to_string(resp.status) + ")";
    } else if (e.empty_body) {
      msg += "HTTP " + std::to_string(resp.status) + " from " + endpoint_ + " with an empty body";
    } else {
      msg += "HTTP " + std::to_string(resp.status) + " from " + endpoint_ +
             ": the response body was not JSON";
      if (!e.content_type.empty()) msg += " (Content-Type " + e.content_type + ")";
      msg += ": " + e.snippet;
      if (code == StatusCode::kInvalidArgument && e.type.empty()) {
        msg += "; is the endpoint right?";
      }
    }
    *skew = looks_like_skew(e.type, e.message);
    msg = replace_all(std::move(msg), creds.secret_access_key, "[redacted]");
    msg = replace_all(std::move(msg), creds.session_token, "[redacted]");
    msg = replace_all(std::move(msg), signature, "[redacted]");
    return Status(code, std::move(msg), details);
  }

  // Measures the clock skew from the response's Date header; true when it was large enough
  // to explain the rejection and has been applied.
  bool adjust_skew(const HttpResponse& resp) {
    auto server = parse_http_date(resp.header("date"));
    if (!server) return false;
    auto skew = std::chrono::duration_cast<std::chrono::milliseconds>(*server - clock_.wall_now());
    if (std::chrono::abs(skew) < std::chrono::minutes(4)) return false;
    skew_ms_.store(skew.count());
    return true;
  }

  ServiceSpec service_;
  RetryConfig retry_;
  HttpConfig http_;
  std::shared_ptr<HttpTransport> transport_;
  std::shared_ptr<CredentialsProvider> credentials_;
  const Clock& clock_;
  RetryPolicy policy_;
  RetryHooks hooks_;
  SigV4Signer signer_;
  std::atomic<std::int64_t> skew_ms_{0};

  Status config_error_;
  std::string endpoint_;
  std::string region_;
  std::string host_;
  std::string path_ = "/";
  std::string url_;
};

}  // namespace

std::unique_ptr<AwsJsonClient> make_aws_json_client(
    ServiceSpec service, const AwsConfig& config, std::shared_ptr<HttpTransport> transport,
    std::shared_ptr<CredentialsProvider> credentials, const Clock& clock, RetryHooks hooks) {
  return std::make_unique<JsonClient>(std::move(service), config, std::move(transport),
                                      std::move(credentials), clock, std::move(hooks));
}

std::unique_ptr<AwsJsonClient> make_aws_json_client(
    ServiceSpec service, const AwsConfig& config, std::shared_ptr<HttpTransport> transport,
    std::shared_ptr<CredentialsProvider> credentials, const Clock& clock) {
  return make_aws_json_client(std::move(service), config, std::move(transport),
                              std::move(credentials), clock, RetryHooks{});
}

Result<std::unique_ptr<AwsJsonClient>> make_aws_json_client(ServiceSpec service,
                                                            const AwsConfig& config,
                                                            AwsClientParts* shared) {
  Result<ResolvedEndpoint> ep = resolve_endpoint(config, service.signing_name);
  if (!ep.ok()) return ep.status();
  AwsClientParts own;
  AwsClientParts& parts = shared != nullptr ? *shared : own;
  if (!parts.transport) parts.transport = make_curl_transport(config.http);
  if (!parts.credentials) parts.credentials = make_default_chain(config, parts.transport);
  RetryHooks hooks;
  hooks.metrics = parts.metrics;
  return make_aws_json_client(std::move(service), config, parts.transport, parts.credentials,
                              SystemClock::instance(), std::move(hooks));
}

}  // namespace kcl::aws
