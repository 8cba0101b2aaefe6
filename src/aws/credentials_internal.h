// The links of the default credentials chain, one factory each, plus the parsers they use.
// Internal to src/aws (and its tests); the public entry points are in aws/credentials.h.
//
// Every provider reads its environment variables through an EnvLookup at get() time, so
// tests pass a map instead of touching the process environment. Providers returned here do
// not cache; make_caching_provider() adds the cache-and-refresh-before-expiry behaviour and
// make_default_chain() wraps the ones that fetch temporary credentials with it.
//
// Status codes used by the providers:
//   kNotFound          nothing configured for this provider (the chain moves on)
//   kPermissionDenied  configured but unusable: a broken credential_process, an unreadable
//                      token file, a role the identity may not assume, ...
//   kInvalidArgument   configured inconsistently (e.g. AWS_ACCESS_KEY_ID without the secret)
//   kUnavailable       a transient failure talking to STS / ECS / IMDS: retry later
//   kInternal          a malformed response from an endpoint
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aws/credentials.h"
#include "aws/http_transport.h"
#include "aws/ini_file.h"
#include "kcl/aws_config.h"
#include "kcl/clock.h"
#include "kcl/logging.h"
#include "kcl/status.h"

namespace kcl::aws::credentials_internal {

// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN (+ AWS_CREDENTIAL_EXPIRATION).
std::shared_ptr<CredentialsProvider> make_environment_provider(EnvLookup env);

struct ProfileProviderOptions {
  // Longest a credential_process may run before it is killed.
  std::chrono::milliseconds process_timeout{60000};
  // Largest output accepted from a credential_process.
  std::size_t max_process_output = 64 * 1024;
};

// The shared files: static keys, credential_process, role_arn + web_identity_token_file.
// `config.profile` names the profile (else AWS_PROFILE, else "default"); `transport` is used
// only for web identity profiles.
std::shared_ptr<CredentialsProvider> make_profile_provider(const AwsConfig& config, EnvLookup env,
                                                           std::shared_ptr<HttpTransport> transport,
                                                           const Clock& clock,
                                                           ProfileProviderOptions options = {});

// AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (+ AWS_ROLE_SESSION_NAME) through STS
// AssumeRoleWithWebIdentity.
std::shared_ptr<CredentialsProvider> make_web_identity_provider(
    const AwsConfig& config, EnvLookup env, std::shared_ptr<HttpTransport> transport,
    const Clock& clock);

// AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / _FULL_URI with AWS_CONTAINER_AUTHORIZATION_TOKEN
// or _TOKEN_FILE.
std::shared_ptr<CredentialsProvider> make_container_provider(
    EnvLookup env, std::shared_ptr<HttpTransport> transport);

struct ImdsOptions {
  // Timeout of the token PUT, the first contact (on a machine without IMDS this is how long
  // it takes to fall through).
  std::chrono::milliseconds connect_timeout{1000};
  // Timeout of the metadata GETs.
  std::chrono::milliseconds request_timeout{2000};
};

// EC2 instance metadata, IMDSv2 (AWS_EC2_METADATA_SERVICE_ENDPOINT, _ENDPOINT_MODE,
// AWS_EC2_METADATA_DISABLED, AWS_EC2_METADATA_V1_DISABLED).
std::shared_ptr<CredentialsProvider> make_imds_provider(EnvLookup env,
                                                        std::shared_ptr<HttpTransport> transport,
                                                        ImdsOptions options = {});

struct CachingOptions {
  // Refresh when less than this remains before expiration.
  std::chrono::seconds refresh_before{300};
  // When a refresh fails, keep serving the cached credentials while more than this remains.
  std::chrono::seconds usable_until_before{10};
  // After a fetch that answered credentials inside the refresh window (or already expired),
  // or a failed refresh while the cached credentials still work, the next fetch waits this
  // long (monotonic clock). Also the longest wait between failed fetches.
  std::chrono::seconds min_refresh_interval{30};
  // After a failed fetch with nothing usable cached, the next fetch waits this long, doubled
  // per further failure up to min_refresh_interval; the failure is answered meanwhile.
  // A kNotFound answer (nothing configured) is not backed off.
  std::chrono::milliseconds failure_backoff{1000};
  // Where the warning about credentials fetched already expired goes (once per provider).
  // Null: make_default_logger().
  std::shared_ptr<Logger> logger;
};

// Caches what `inner` returns: credentials without expiration for good, temporary ones until
// `refresh_before` their expiration (by clock.wall_now()). One caller refreshes at a time;
// others get the cached credentials while they are usable, or wait for the refresh and share
// its result. Between fetches (see min_refresh_interval and failure_backoff) callers get what
// the last fetch left: the cached credentials, even when they expired (served as the AWS
// SDKs' static stability does: the service decides), or the last failure.
std::shared_ptr<CredentialsProvider> make_caching_provider(
    std::shared_ptr<CredentialsProvider> inner, const Clock& clock, CachingOptions options = {});

// Tries `providers` in order; the first that yields wins and is tried first next time.
// kNotFound moves on; any other error is returned as it is. When none yields:
// kPermissionDenied "no AWS credentials found: tried <names>" plus each provider's reason.
std::shared_ptr<CredentialsProvider> make_chain(
    std::vector<std::shared_ptr<CredentialsProvider>> providers);

// make_default_chain with an explicit environment (tests). A null `transport` is replaced by
// make_curl_transport(config.http).
std::shared_ptr<CredentialsProvider> make_default_chain(const AwsConfig& config,
                                                        std::shared_ptr<HttpTransport> transport,
                                                        const Clock& clock, EnvLookup env);

// ---- pieces, exposed for tests ----

// Two environment variables that go together, `a` and `b`: kNotFound when neither is set,
// kInvalidArgument "<a> is set but <b> is not" (or the other way) plus `advice` when one is,
// OK when both are.
Status both_or_neither(bool has_a, bool has_b, std::string_view a, std::string_view b,
                       std::string_view advice);

// "2024-05-01T12:00:00Z", with optional fractional seconds and a Z / ±hh:mm / ±hhmm offset.
std::optional<std::chrono::system_clock::time_point> parse_iso8601(std::string_view text);

// The text of the first element named `tag` in `xml` (entities and CDATA decoded);
// nullopt when absent. Tolerates attributes, namespace prefixes and whitespace.
std::optional<std::string> xml_element_text(std::string_view xml, std::string_view tag);

// application/x-www-form-urlencoded value encoding (RFC 3986 unreserved kept).
std::string form_encode(std::string_view value);

// The JSON a credential_process prints. `what` names the source in messages
// ("credential_process of profile 'dev'"). Messages never quote the output.
Result<Credentials> parse_process_output(std::string_view json, std::string_view what);

// The JSON the ECS/EKS container endpoint and IMDS return
// ({AccessKeyId, SecretAccessKey, Token, Expiration[, Code]}).
Result<Credentials> parse_metadata_credentials(std::string_view json, std::string_view what);

// An STS AssumeRole*-style XML response (success or error) to credentials or a Status.
Result<Credentials> parse_sts_response(const HttpResponse& response, std::string_view operation,
                                       std::string_view endpoint);

// Runs `command` through /bin/sh -c and returns what it printed on stdout (stderr is
// inherited). Non-zero exit, a signal, a timeout or too much output: kPermissionDenied
// naming `what`, never quoting the output or the command.
Result<std::string> run_process(const std::string& command, std::string_view what,
                                const ProfileProviderOptions& options);

// The STS endpoint for `region` (AWS_ENDPOINT_URL_STS, config.endpoint_url,
// AWS_ENDPOINT_URL, else https://sts.<region>.amazonaws.com; the global endpoint when no
// region is known). No trailing slash.
std::string sts_endpoint(const AwsConfig& config, const EnvLookup& env);

// AssumeRoleWithWebIdentity with the token read from `token_file`.
struct WebIdentitySettings {
  std::string role_arn;
  std::string token_file;
  std::string session_name;  // empty: "kcl-cpp-<millis>"
  std::string source;        // for messages: "AWS_WEB_IDENTITY_TOKEN_FILE" / "profile 'x'"
};
Result<Credentials> assume_role_with_web_identity(const WebIdentitySettings& settings,
                                                  const AwsConfig& config, const EnvLookup& env,
                                                  HttpTransport& transport, const Clock& clock);

}  // namespace kcl::aws::credentials_internal
