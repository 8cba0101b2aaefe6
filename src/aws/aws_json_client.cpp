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
//     once per call, with the skew measured from the response's Date header (measured by a
//     call of one attempt too, for the next call; measured again when the clock is set right
//     later, so a correction never outlives the skew).
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
#include "kcl/version.h"

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

// `rewritten` (a new message or details for `from`), still marked as a timeout if `from` was.
Status keep_timeout(const Status& from, Status rewritten) {
  return from.timed_out() ? rewritten.as_timeout() : rewritten;
}

// Parses an HTTP date ("Sun, 06 Nov 1994 08:49:37 GMT") with libcurl's date parser.
std::optional<std::chrono::system_clock::time_point> parse_http_date(const std::string& s) {
  if (s.empty()) return std::nullopt;
  const std::time_t t = curl_getdate(s.c_str(), nullptr);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(t);
}

// Credentials the service says expired (a session rotated before its stated expiry, or a
// host clock behind).
bool is_expired_token(std::string_view type) {
  return type == "ExpiredTokenException" || type == "ExpiredToken";
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

// What one call may spend: attempts, each request's timeout, and the call deadline.
struct CallBudget {
  int max_attempts = 1;
  std::chrono::milliseconds request_timeout{0};
  std::chrono::milliseconds call_deadline{0};
  Clock::MonoTime deadline{};
};

// One call across its attempts: the request (signed again for each attempt) and what the
// retry rules keep count of.
struct Call {
  std::string_view operation;  // "GetRecords"
  std::string op;              // "Kinesis.GetRecords", for messages
  std::string target;          // the X-Amz-Target header
  std::string content_type;    // the Content-Type header
  std::string payload_hash;
  HttpRequest request;
  AwsErrorDetails details;
  bool skew_retried = false;        // the one at-once retry after a clock-skew rejection is used
  std::int64_t signed_skew_ms = 0;  // the clock correction the last attempt was signed with
  bool renewed = false;             // the one at-once retry with credentials fetched anew is used
  int retries = 0;                  // backoffs taken so far
  int quota_taken = 0;              // retry-quota tokens this call's retries took
  Status last;                      // the last attempt's failure
  std::string* answer_content_type = nullptr;  // CallOptions::answer_content_type
};

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

  Result<HttpRequest> signed_request(std::string_view operation, std::string json_body,
                                     std::string_view content_type) override {
    Call c = new_call(operation, std::move(json_body), content_type);
    KCL_RETURN_IF_ERROR(check_usable(c, /*needs_transport=*/false));
    Credentials creds;
    std::string signature;
    KCL_RETURN_IF_ERROR(prepare_request(c, creds, signature));
    return std::move(c.request);
  }

  const std::string& endpoint() const override { return endpoint_; }
  const std::string& region() const override { return region_; }
  RetryPolicy* retry_policy() override { return &policy_; }

  Result<std::string> call(std::string_view operation, std::string json_body,
                           const CallOptions& options) override {
    const CallBudget budget = budget_for(options);
    Call c = new_call(operation, std::move(json_body), options.content_type);
    c.answer_content_type = options.answer_content_type;
    if (c.answer_content_type != nullptr) c.answer_content_type->clear();
    KCL_RETURN_IF_ERROR(check_usable(c, /*needs_transport=*/true));
    for (int attempt = 1;; ++attempt) {
      c.details.attempts = attempt;
      c.details.http_status = 0;
      c.details.error_type.clear();
      c.details.request_id.clear();
      const std::optional<std::chrono::milliseconds> timeout = attempt_timeout(budget, attempt);
      if (!timeout) {
        return deadline_exceeded(c.op, budget.call_deadline, c.details, attempt - 1, c.last);
      }
      c.request.timeout = *timeout;
      bool retry_at_once = false;
      Result<std::string> body = attempt_once(c, attempt < budget.max_attempts, &retry_at_once);
      if (body.ok()) return body;
      // At once: the signature was rejected for its time, not the load.
      if (retry_at_once) continue;
      if (std::optional<Status> end = back_off(c, budget, attempt, body.status())) return *end;
    }
  }

 private:
  Call new_call(std::string_view operation, std::string json_body,
                std::string_view content_type) const {
    Call c;
    c.operation = operation;
    c.content_type = content_type.empty() ? service_.content_type : std::string(content_type);
    c.op = service_.display_name + "." + std::string(operation);
    c.target = service_.target_prefix + "." + std::string(operation);
    c.details.operation = c.op;
    c.details.endpoint = endpoint_;
    c.request.method = "POST";
    c.request.url = url_;
    c.request.body = std::move(json_body);
    c.payload_hash = sha256_hex(c.request.body);
    return c;
  }

  // Why this client cannot make the call: an endpoint configuration that did not resolve,
  // no credentials provider, or (to send, not only sign) no transport.
  Status check_usable(const Call& c, bool needs_transport) const {
    if (!config_error_.ok()) {
      return Status(config_error_.code(), c.op + ": " + config_error_.message(), c.details);
    }
    if (needs_transport && (!transport_ || !credentials_)) {
      return Status(StatusCode::kFailedPrecondition,
                    c.op + ": the client has no transport or no credentials provider", c.details);
    }
    if (!credentials_) {
      return Status(StatusCode::kFailedPrecondition, c.op + ": the client has no credentials",
                    c.details);
    }
    return Status::Ok();
  }

  // The caller's budget, with RetryConfig and HttpConfig filling in what it leaves unset; the
  // call deadline counts from now.
  CallBudget budget_for(const CallOptions& options) const {
    CallBudget b;
    b.max_attempts =
        std::max(1, options.max_attempts > 0 ? options.max_attempts : retry_.max_attempts);
    b.request_timeout =
        options.request_timeout.count() > 0 ? options.request_timeout : http_.request_timeout;
    b.call_deadline = options.deadline.count() > 0 ? options.deadline : retry_.call_deadline;
    b.deadline = clock_.now() + b.call_deadline;
    return b;
  }

  // The request timeout of an attempt: the per-request timeout cut to the time left before
  // the call deadline, at least 1 ms (a first attempt is always made, with the full request
  // timeout when the deadline has already passed). nullopt: a later attempt would start
  // after the deadline.
  std::optional<std::chrono::milliseconds> attempt_timeout(const CallBudget& b, int attempt) const {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(b.deadline - clock_.now());
    if (attempt > 1 && left.count() <= 0) return std::nullopt;
    return std::max(std::chrono::milliseconds(1), attempt == 1 && left.count() <= 0
                                                      ? b.request_timeout
                                                      : std::min(b.request_timeout, left));
  }

  // One attempt: fresh credentials, a new signature, the request sent and its answer judged.
  // Returns the body of a 2xx answer, else the attempt's failure (kept in c.last). A
  // clock-skew rejection sets *retry_at_once when the skew could be measured and applied,
  // once per call and only while `more_attempts` remain.
  Result<std::string> attempt_once(Call& c, bool more_attempts, bool* retry_at_once) {
    const Clock::MonoTime attempt_start = clock_.now();
    Credentials creds;
    std::string signature;
    Status st = prepare_request(c, creds, signature);
    if (st.ok()) {
      Result<HttpResponse> resp = transport_->send(c.request);
      if (resp.ok() && c.answer_content_type != nullptr) {
        *c.answer_content_type = resp->header("content-type");
      }
      if (!resp.ok()) {
        st = keep_timeout(resp.status(), Status(resp.status().code(),
                                                c.op + ": " + resp.status().message(), c.details));
      } else if (resp->status >= 200 && resp->status < 300) {
        policy_.on_success(c.quota_taken);
        report_attempt(c.operation, Status(), attempt_start);
        return std::move(resp->body);
      } else {
        bool skew = false;
        st = http_error(c.op, *resp, creds, signature, c.details, &skew);
        // Measured whatever attempts are left: a call of one attempt (GetRecords, PutRecords)
        // fails, and the next call is signed right.
        bool mended = false;  // the next call is signed right: the failure is not final
        if (skew && !c.skew_retried && adjust_skew(*resp, c.signed_skew_ms)) {
          mended = true;
          if (more_attempts) {
            c.skew_retried = true;
            *retry_at_once = true;
          }
        }
        // Credentials the service says expired (a session rotated before its stated
        // expiry, or a host clock behind): fetched anew, and tried once more at once.
        if (is_expired_token(c.details.error_type)) {
          credentials_->reject(creds);
          mended = !c.renewed;
          if (!c.renewed && more_attempts) {
            c.renewed = true;
            *retry_at_once = true;
          }
        }
        // A call of one attempt (GetRecords, PutRecords) ends here, but not for good: its
        // caller's own retry (after a backoff) is signed with the skew or the credentials
        // just mended, where an access error would have ended a shard's reading.
        if (mended && !more_attempts) {
          st = Status(StatusCode::kUnavailable,
                      st.message() + " (" +
                          (skew ? "clock skew measured" : "credentials fetched anew") +
                          "; the next call is signed with them)",
                      c.details);
        }
      }
    }
    report_attempt(c.operation, st, attempt_start);
    if (*retry_at_once) report_retry(c.operation);
    c.last = st;
    return st;
  }

  // After attempt `attempt` failed with `st`: the status that ends the call (not retryable,
  // attempts used up, the deadline passed or too near for the backoff, the retry quota
  // spent), or nullopt once the backoff before the next attempt has been waited out.
  std::optional<Status> back_off(Call& c, const CallBudget& b, int attempt, const Status& st) {
    if (!is_retryable(st.code())) return st;
    if (attempt >= b.max_attempts) {
      return keep_timeout(st, Status(st.code(),
                                     st.message() + " (gave up after " + std::to_string(attempt) +
                                         (attempt == 1 ? " attempt)" : " attempts)"),
                                     st.aws().value_or(c.details)));
    }
    if (clock_.now() >= b.deadline) {
      return deadline_exceeded(c.op, b.call_deadline, c.details, attempt, c.last);
    }
    const std::optional<std::chrono::milliseconds> delay =
        policy_.next_delay(st, c.retries++, &c.quota_taken);
    if (!delay) {
      return keep_timeout(
          st, Status(st.code(),
                     st.message() + " (not retried: the client's retry quota is spent after " +
                         "repeated failures; it refills as calls succeed)",
                     st.aws().value_or(c.details)));
    }
    if (clock_.now() + *delay >= b.deadline) {
      return deadline_exceeded(c.op, b.call_deadline, c.details, attempt, c.last);
    }
    report_retry(c.operation);
    sleep(*delay);
    return std::nullopt;
  }

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

  // Fetches credentials and fills in c.request's signed headers. `creds` and `signature` are
  // kept for scrubbing server text.
  Status prepare_request(Call& c, Credentials& creds, std::string& signature) {
    Result<Credentials> got = credentials_->get();
    if (!got.ok()) {
      StatusCode code = got.status().code() == StatusCode::kUnavailable
                            ? StatusCode::kUnavailable
                            : StatusCode::kPermissionDenied;
      return Status(code,
                    c.op + ": cannot get credentials (provider " + credentials_->name() +
                        "): " + got.status().message(),
                    c.details);
    }
    creds = std::move(got).value();

    HttpRequest& request = c.request;
    SigningInput in;
    in.method = request.method;
    in.path = path_;
    in.headers = {{"Host", host_}, {"Content-Type", c.content_type}};
    if (!service_.query_protocol) in.headers.emplace_back("X-Amz-Target", c.target);
    in.payload = request.body;
    in.payload_hash = c.payload_hash;
    in.region = region_;
    in.service = service_.signing_name;
    in.credentials = creds;
    c.signed_skew_ms = skew_ms_.load();
    in.time = clock_.wall_now() + std::chrono::milliseconds(c.signed_skew_ms);
    SigningResult signed_req = signer_.sign(in);
    signature = signed_req.signature;

    request.headers = std::move(in.headers);
    for (auto& h : signed_req.headers_to_add) request.headers.push_back(std::move(h));
    request.headers.emplace_back("User-Agent", "kcl-cpp/" + std::string(kcl::version()));
    return Status::Ok();
  }

  Status http_error(const std::string& op, const HttpResponse& resp, const Credentials& creds,
                    const std::string& signature, AwsErrorDetails& details, bool* skew) const {
    // Taken out of the server's text before it is cut: a proxy's error page may echo the
    // request's headers, and a cut copy of a secret would no longer match it.
    const std::string_view secrets[] = {creds.secret_access_key, creds.session_token, signature};
    AwsErrorBody e = parse_aws_error(resp, secrets);
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
    return Status(code, redact_secrets(std::move(msg), secrets), details);
  }

  // Measures the clock skew from the response's Date header against the time requests are
  // signed with (this clock and the correction in use); true when that is off by enough to
  // explain the rejection and the correction was measured again from this clock (to 0 when
  // the clock itself is now within minutes: a host whose clock was set right since). Also
  // true when the correction changed since the rejected request was signed with
  // `signed_skew_ms` (another call in flight with it measured the skew first): the next
  // attempt is signed with the new one.
  bool adjust_skew(const HttpResponse& resp, std::int64_t signed_skew_ms) {
    if (skew_ms_.load() != signed_skew_ms) return true;
    auto server = parse_http_date(resp.header("date"));
    if (!server) return false;
    const auto wall = clock_.wall_now();
    const auto signed_at = wall + std::chrono::milliseconds(skew_ms_.load());
    if (std::chrono::abs(*server - signed_at) < std::chrono::minutes(4)) return false;
    auto skew = std::chrono::duration_cast<std::chrono::milliseconds>(*server - wall);
    skew_ms_.store(std::chrono::abs(skew) < std::chrono::minutes(4) ? 0 : skew.count());
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

bool is_signing_rejection(std::string_view error_type, std::string_view message) {
  return looks_like_skew(error_type, message) || is_expired_token(error_type);
}

}  // namespace kcl::aws
