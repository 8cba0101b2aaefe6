// The providers that fetch temporary credentials over HTTP: STS AssumeRoleWithWebIdentity,
// the ECS/EKS container endpoint and EC2 instance metadata (IMDSv2). None of them caches;
// make_default_chain wraps them with make_caching_provider.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <string>
#include <utility>

#include "aws/credentials_internal.h"
#include "aws/text.h"
#include "base/status_macros.h"

namespace kcl::aws::credentials_internal {
namespace {

std::string strip_trailing_slashes(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

bool env_true(const EnvLookup& env, std::string_view name) {
  auto v = env_value(env, name);
  return v && to_lower(trim(*v)) == "true";
}

// scheme://host[:port]... -> lower-case scheme and host (IPv6 keeps its brackets).
struct UrlParts {
  std::string scheme;
  std::string host;
};
std::optional<UrlParts> split_url(std::string_view url) {
  auto sep = url.find("://");
  if (sep == std::string_view::npos || sep == 0) return std::nullopt;
  UrlParts parts;
  parts.scheme = to_lower(url.substr(0, sep));
  std::string_view rest = url.substr(sep + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = rest.rfind('@'); at != std::string_view::npos) rest.remove_prefix(at + 1);
  if (!rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    parts.host = to_lower(rest.substr(0, close + 1));
  } else {
    parts.host = to_lower(rest.substr(0, rest.find(':')));
  }
  if (parts.host.empty()) return std::nullopt;
  return parts;
}

bool is_loopback_ipv4(std::string_view host) {
  // 127.0.0.0/8 written as a dotted quad.
  if (host.rfind("127.", 0) != 0) return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.')
      ++dots;
    else if (c < '0' || c > '9')
      return false;
  }
  return dots == 3;
}

std::string millis_since_epoch(const Clock& clock) {
  return std::to_string(
      std::chrono::duration_cast<std::chrono::milliseconds>(clock.wall_now().time_since_epoch())
          .count());
}

StatusCode status_for_http(int http_status) {
  if (http_status >= 500 || http_status == 429 || http_status == 408) {
    return StatusCode::kUnavailable;
  }
  if (http_status == 401 || http_status == 403) return StatusCode::kPermissionDenied;
  return StatusCode::kInternal;
}

// ---- web identity ----

class WebIdentityProvider final : public CredentialsProvider {
 public:
  WebIdentityProvider(const AwsConfig& config, EnvLookup env,
                      std::shared_ptr<HttpTransport> transport, const Clock& clock)
      : config_(config), env_(std::move(env)), transport_(std::move(transport)), clock_(clock) {}

  Result<Credentials> get() override {
    auto token_file = env_value(env_, "AWS_WEB_IDENTITY_TOKEN_FILE");
    auto role = env_value(env_, "AWS_ROLE_ARN");
    KCL_RETURN_IF_ERROR(both_or_neither(token_file.has_value(), role.has_value(),
                                        "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
                                        "; web identity needs both"));
    if (!transport_) {
      return Status(StatusCode::kFailedPrecondition,
                    "web identity is configured but no HTTP transport was given");
    }
    WebIdentitySettings s;
    s.role_arn = *role;
    s.token_file = *token_file;
    s.session_name = env_value(env_, "AWS_ROLE_SESSION_NAME").value_or("");
    s.source = "web identity (AWS_WEB_IDENTITY_TOKEN_FILE)";
    return assume_role_with_web_identity(s, config_, env_, *transport_, clock_);
  }
  std::string name() const override { return "web identity"; }

 private:
  AwsConfig config_;
  EnvLookup env_;
  std::shared_ptr<HttpTransport> transport_;
  const Clock& clock_;
};

// ---- container ----

// Where the container credentials come from: the URL to ask and, for messages, its scheme
// and host.
struct ContainerEndpoint {
  std::string url;
  std::string shown;
};

// AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (on the ECS address) or _FULL_URI, which over plain
// http must name a loopback or ECS/EKS address.
Result<ContainerEndpoint> container_endpoint(const std::optional<std::string>& relative,
                                             const std::string& full) {
  if (relative) {
    return ContainerEndpoint{
        "http://169.254.170.2" + (relative->front() == '/' ? *relative : "/" + *relative),
        "http://169.254.170.2"};
  }
  auto parts = split_url(full);
  if (!parts || (parts->scheme != "http" && parts->scheme != "https")) {
    return Status(StatusCode::kInvalidArgument,
                  "AWS_CONTAINER_CREDENTIALS_FULL_URI is not an http(s) URL");
  }
  const std::string& h = parts->host;
  const bool allowed_http = is_loopback_ipv4(h) || h == "localhost" || h == "[::1]" ||
                            h == "169.254.170.2" || h == "169.254.170.23" || h == "[fd00:ec2::23]";
  if (parts->scheme == "http" && !allowed_http) {
    return Status(StatusCode::kInvalidArgument,
                  "AWS_CONTAINER_CREDENTIALS_FULL_URI host " + h +
                      " is not allowed over plain http: use https, a loopback address, "
                      "or the ECS/EKS addresses 169.254.170.2 / 169.254.170.23");
  }
  return ContainerEndpoint{full, parts->scheme + "://" + h};
}

// The Authorization header's value, from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE or
// AWS_CONTAINER_AUTHORIZATION_TOKEN; nullopt when neither is set.
Result<std::optional<std::string>> container_authorization(const EnvLookup& env) {
  std::optional<std::string> auth;
  if (auto file = env_value(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")) {
    auto text = read_text_file(*file);
    if (!text) {
      return Status(StatusCode::kPermissionDenied,
                    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE " + *file + " cannot be read");
    }
    auth = std::string(trim(*text));
  } else if (auto token = env_value(env, "AWS_CONTAINER_AUTHORIZATION_TOKEN")) {
    auth = *token;
  }
  if (auth && auth->find_first_of("\r\n") != std::string::npos) {
    return Status(StatusCode::kInvalidArgument,
                  "the container authorization token contains a line break");
  }
  return auth;
}

class ContainerProvider final : public CredentialsProvider {
 public:
  ContainerProvider(EnvLookup env, std::shared_ptr<HttpTransport> transport)
      : env_(std::move(env)), transport_(std::move(transport)) {}

  Result<Credentials> get() override {
    auto relative = env_value(env_, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    auto full = env_value(env_, "AWS_CONTAINER_CREDENTIALS_FULL_URI");
    if (!relative && !full) {
      return Status(StatusCode::kNotFound,
                    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and _FULL_URI not set");
    }
    KCL_ASSIGN_OR_RETURN(ContainerEndpoint endpoint,
                         container_endpoint(relative, full.value_or("")));
    if (!transport_) {
      return Status(StatusCode::kFailedPrecondition,
                    "container credentials are configured but no HTTP transport was given");
    }
    HttpRequest req;
    req.method = "GET";
    req.url = endpoint.url;
    req.timeout = std::chrono::milliseconds(5000);
    req.no_proxy = true;  // as the SDKs: a proxy would see the authorization token
    req.headers.emplace_back("Accept", "application/json");
    KCL_ASSIGN_OR_RETURN(std::optional<std::string> auth, container_authorization(env_));
    if (auth) req.headers.emplace_back("Authorization", *auth);

    const std::string what = "container credentials endpoint " + endpoint.shown;
    auto resp = transport_->send(req);
    if (!resp.ok()) {
      return Status(StatusCode::kUnavailable,
                    what + " could not be reached: " + resp.status().message());
    }
    if (resp->status != 200) {
      return Status(status_for_http(resp->status),
                    what + " returned HTTP " + std::to_string(resp->status));
    }
    return parse_metadata_credentials(resp->body, what);
  }
  std::string name() const override { return "container"; }

 private:
  EnvLookup env_;
  std::shared_ptr<HttpTransport> transport_;
};

// ---- instance metadata ----

// AWS_EC2_METADATA_SERVICE_ENDPOINT, else the IPv6 or IPv4 address by
// AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE.
std::string imds_endpoint(const EnvLookup& env) {
  if (auto e = env_value(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT")) {
    return strip_trailing_slashes(*e);
  }
  if (to_lower(env_value(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE").value_or("")) == "ipv6") {
    return "http://[fd00:ec2::254]";
  }
  return "http://169.254.169.254";
}

class ImdsProvider final : public CredentialsProvider {
 public:
  ImdsProvider(EnvLookup env, std::shared_ptr<HttpTransport> transport, ImdsOptions options)
      : env_(std::move(env)), transport_(std::move(transport)), options_(options) {}

  Result<Credentials> get() override {
    if (env_true(env_, "AWS_EC2_METADATA_DISABLED")) {
      return Status(StatusCode::kNotFound, "disabled by AWS_EC2_METADATA_DISABLED");
    }
    if (!transport_) return Status(StatusCode::kNotFound, "no HTTP transport was given");
    const std::string endpoint = imds_endpoint(env_);
    const std::string what = "instance metadata at " + endpoint;
    bool token_timed_out = false;
    KCL_ASSIGN_OR_RETURN(const std::string token, session_token(endpoint, what, token_timed_out));
    HttpRequest get_role;
    get_role.method = "GET";
    get_role.url = endpoint + "/latest/meta-data/iam/security-credentials/";
    get_role.timeout = options_.request_timeout;
    get_role.no_proxy = true;  // a link-local address, never through a proxy (as the SDKs)
    if (!token.empty()) get_role.headers.emplace_back("X-aws-ec2-metadata-token", token);
    auto listed = role_name(get_role, what);
    if (!listed.ok() && token_timed_out && !succeeded_once_.load() &&
        listed.status().code() == StatusCode::kUnavailable) {
      // Neither request answered: no instance metadata service here.
      return Status(StatusCode::kNotFound, "no instance metadata service reachable at " + endpoint +
                                               " (not on EC2?): " + listed.status().message());
    }
    if (!listed.ok() && token_timed_out &&
        listed.status().code() == StatusCode::kPermissionDenied) {
      // The fallback was refused (HTTP 401: the instance requires IMDSv2): the token request's
      // timeout is the cause, not the role. Retried, as a slow answer at boot passes.
      return Status(StatusCode::kUnavailable,
                    what + ": the session token request (IMDSv2) got no answer within " +
                        std::to_string(options_.connect_timeout.count()) +
                        " ms, and the request without a token was refused (" +
                        listed.status().message() +
                        "; the instance requires IMDSv2). From a container, the instance's "
                        "metadata hop limit may be one hop short (raise it to 2)");
    }
    KCL_ASSIGN_OR_RETURN(const std::string role, std::move(listed));
    auto creds = role_credentials(get_role, role, what);
    if (creds.ok()) succeeded_once_.store(true);
    return creds;
  }
  std::string name() const override { return "instance metadata"; }

 private:
  // IMDSv2: a session token first. Empty when the service has no IMDSv2 and IMDSv1 may be
  // used, or when the token request timed out and IMDSv1 may be used (`timed_out`): a
  // container on EC2 one hop further than the instance's hop limit never gets the answer to
  // the PUT, while IMDSv1 answers it (as the AWS SDKs fall back).
  Result<std::string> session_token(const std::string& endpoint, const std::string& what,
                                    bool& timed_out) {
    HttpRequest put;
    put.method = "PUT";
    put.url = endpoint + "/latest/api/token";
    put.timeout = options_.connect_timeout;
    put.no_proxy = true;
    put.headers.emplace_back("X-aws-ec2-metadata-token-ttl-seconds", "21600");
    auto resp = transport_->send(put);
    if (!resp.ok() && resp.status().timed_out() &&
        !env_true(env_, "AWS_EC2_METADATA_V1_DISABLED")) {
      timed_out = true;
      return std::string();
    }
    if (!resp.ok()) {
      if (succeeded_once_.load()) {
        return Status(StatusCode::kUnavailable,
                      what + " did not answer: " + resp.status().message());
      }
      return Status(StatusCode::kNotFound, "no instance metadata service reachable at " + endpoint +
                                               " (not on EC2?): " + resp.status().message());
    }
    if (resp->status == 200) return std::string(trim(resp->body));
    if ((resp->status == 404 || resp->status == 405) &&
        !env_true(env_, "AWS_EC2_METADATA_V1_DISABLED")) {
      return std::string();  // no IMDSv2 here (an older proxy or emulator): IMDSv1
    }
    if (resp->status == 403) {
      return Status(StatusCode::kNotFound,
                    what +
                        " refused a session token (HTTP 403): instance metadata is "
                        "disabled on this instance");
    }
    return Status(status_for_http(resp->status),
                  what + " answered the token request with HTTP " + std::to_string(resp->status));
  }

  // The name of the instance's role: the first line of the role listing.
  Result<std::string> role_name(const HttpRequest& get_role, const std::string& what) {
    auto resp = transport_->send(get_role);
    if (!resp.ok()) {
      return Status(StatusCode::kUnavailable, what + " did not answer: " + resp.status().message());
    }
    std::string role;
    if (resp->status == 200) {
      std::string_view body = resp->body;
      role = std::string(trim(body.substr(0, body.find('\n'))));
    } else if (resp->status != 404) {
      return Status(status_for_http(resp->status),
                    what + " answered the role request with HTTP " + std::to_string(resp->status));
    }
    if (role.empty()) {
      return Status(StatusCode::kNotFound,
                    "this instance has no IAM role (instance profile) attached");
    }
    return role;
  }

  Result<Credentials> role_credentials(const HttpRequest& get_role, const std::string& role,
                                       const std::string& what) {
    HttpRequest get_creds = get_role;
    get_creds.url += role;
    auto resp = transport_->send(get_creds);
    if (!resp.ok()) {
      return Status(StatusCode::kUnavailable, what + " did not answer: " + resp.status().message());
    }
    if (resp->status != 200) {
      // 404 here means the role changed between the two requests: try again.
      return Status(resp->status == 404 ? StatusCode::kUnavailable : status_for_http(resp->status),
                    what + " answered the credentials request for role " + role + " with HTTP " +
                        std::to_string(resp->status));
    }
    return parse_metadata_credentials(resp->body, what + " (role " + role + ")");
  }

  EnvLookup env_;
  std::shared_ptr<HttpTransport> transport_;
  ImdsOptions options_;
  std::atomic<bool> succeeded_once_{false};
};

}  // namespace

std::string sts_endpoint(const AwsConfig& config, const EnvLookup& env) {
  if (!env_true(env, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")) {
    if (auto e = env_value(env, "AWS_ENDPOINT_URL_STS")) return strip_trailing_slashes(*e);
    if (!config.endpoint_url.empty()) return strip_trailing_slashes(config.endpoint_url);
    if (auto e = env_value(env, "AWS_ENDPOINT_URL")) return strip_trailing_slashes(*e);
  }
  std::string region = config.region;
  if (region.empty()) region = env_value(env, "AWS_REGION").value_or("");
  if (region.empty()) region = env_value(env, "AWS_DEFAULT_REGION").value_or("");
  if (region.empty()) {
    region = load_shared_profile(resolve_profile_name(config.profile, env), env)
                 .get("region")
                 .value_or("");
  }
  if (region.empty()) return "https://sts.amazonaws.com";
  const char* suffix = region.rfind("cn-", 0) == 0 ? ".amazonaws.com.cn" : ".amazonaws.com";
  return "https://sts." + region + suffix;
}

Result<Credentials> assume_role_with_web_identity(const WebIdentitySettings& settings,
                                                  const AwsConfig& config, const EnvLookup& env,
                                                  HttpTransport& transport, const Clock& clock) {
  const std::string what = settings.source + " for role " + settings.role_arn;
  auto text = read_text_file(settings.token_file);
  if (!text) {
    return Status(StatusCode::kPermissionDenied,
                  what + ": web identity token file " + settings.token_file + " cannot be read");
  }
  const std::string token(trim(*text));
  if (token.empty()) {
    return Status(StatusCode::kPermissionDenied,
                  what + ": web identity token file " + settings.token_file + " is empty");
  }
  const std::string session = settings.session_name.empty() ? "kcl-cpp-" + millis_since_epoch(clock)
                                                            : settings.session_name;
  const std::string endpoint = sts_endpoint(config, env);

  HttpRequest req;
  req.method = "POST";
  req.url = endpoint + "/";
  req.timeout = std::chrono::milliseconds(10000);
  req.headers.emplace_back("Content-Type", "application/x-www-form-urlencoded; charset=utf-8");
  req.headers.emplace_back("Accept", "text/xml");
  req.body = "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=" +
             form_encode(settings.role_arn) + "&RoleSessionName=" + form_encode(session) +
             "&WebIdentityToken=" + form_encode(token);
  auto resp = transport.send(req);
  if (!resp.ok()) {
    return Status(StatusCode::kUnavailable,
                  what + ": STS AssumeRoleWithWebIdentity at " + endpoint +
                      " could not be reached: " + resp.status().message());
  }
  auto creds = parse_sts_response(*resp, "AssumeRoleWithWebIdentity", endpoint);
  if (!creds.ok()) return creds.status().with_context(what + ": ");
  return creds;
}

std::shared_ptr<CredentialsProvider> make_web_identity_provider(
    const AwsConfig& config, EnvLookup env, std::shared_ptr<HttpTransport> transport,
    const Clock& clock) {
  return std::make_shared<WebIdentityProvider>(config, std::move(env), std::move(transport), clock);
}

std::shared_ptr<CredentialsProvider> make_container_provider(
    EnvLookup env, std::shared_ptr<HttpTransport> transport) {
  return std::make_shared<ContainerProvider>(std::move(env), std::move(transport));
}

std::shared_ptr<CredentialsProvider> make_imds_provider(EnvLookup env,
                                                        std::shared_ptr<HttpTransport> transport,
                                                        ImdsOptions options) {
  return std::make_shared<ImdsProvider>(std::move(env), std::move(transport), options);
}

}  // namespace kcl::aws::credentials_internal
