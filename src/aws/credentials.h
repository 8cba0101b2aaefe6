// Credentials and the default credentials chain (as the AWS SDKs resolve them).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "kcl/aws_config.h"
#include "kcl/clock.h"
#include "kcl/status.h"

namespace kcl::aws {

class HttpTransport;

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;                                        // empty for long-term keys
  std::optional<std::chrono::system_clock::time_point> expiration;  // absent: never expires
};

// Thread safety: get() may be called from many threads at once; providers that fetch
// temporary credentials refresh them before they expire.
class CredentialsProvider {
 public:
  virtual ~CredentialsProvider() = default;
  // kNotFound when this provider has nothing to offer (the chain moves on); other errors
  // when it should have had credentials but failed. Messages never contain secrets.
  virtual Result<Credentials> get() = 0;
  virtual std::string name() const = 0;
  // The service refused `used` as expired (ExpiredToken): what this provider keeps of them is
  // dropped, so the next get() fetches anew (a role session rotated early, a credentials
  // file rewritten since). Providers that keep nothing ignore it.
  virtual void reject(const Credentials& /*used*/) {}
};

std::shared_ptr<CredentialsProvider> make_static_provider(const StaticCredentials& creds);

// The default chain: static (when configured), environment, shared files (profile,
// credential_process), web identity (STS AssumeRoleWithWebIdentity), ECS container
// endpoint, EC2 instance metadata (IMDSv2).
std::shared_ptr<CredentialsProvider> make_default_chain(
    const AwsConfig& config, std::shared_ptr<HttpTransport> transport,
    const Clock& clock = SystemClock::instance());

}  // namespace kcl::aws
