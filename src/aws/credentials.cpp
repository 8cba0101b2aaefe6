// The static and environment providers, the caching wrapper and the chain.
#include "aws/credentials.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>
#include <vector>

#include "aws/credentials_internal.h"
#include "aws/http_transport.h"
#include "base/status_macros.h"
#include "kcl/logging.h"

namespace kcl::aws {
namespace credentials_internal {
namespace {

class StaticProvider final : public CredentialsProvider {
 public:
  StaticProvider(const StaticCredentials& creds, std::string name) : name_(std::move(name)) {
    creds_.access_key_id = creds.access_key_id;
    creds_.secret_access_key = creds.secret_access_key;
    creds_.session_token = creds.session_token;
  }
  Result<Credentials> get() override {
    if (creds_.access_key_id.empty() || creds_.secret_access_key.empty()) {
      return Status(StatusCode::kInvalidArgument,
                    "static credentials are configured but access_key_id or "
                    "secret_access_key is empty");
    }
    return creds_;
  }
  std::string name() const override { return name_; }

 private:
  Credentials creds_;
  std::string name_;
};

// Stands for the "static config" link when AwsConfig has no credentials.
class NotConfiguredProvider final : public CredentialsProvider {
 public:
  NotConfiguredProvider(std::string name, std::string reason)
      : name_(std::move(name)), reason_(std::move(reason)) {}
  Result<Credentials> get() override { return Status(StatusCode::kNotFound, reason_); }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  std::string reason_;
};

class EnvironmentProvider final : public CredentialsProvider {
 public:
  explicit EnvironmentProvider(EnvLookup env) : env_(std::move(env)) {}

  Result<Credentials> get() override {
    auto id = env_value(env_, "AWS_ACCESS_KEY_ID");
    auto secret = env_value(env_, "AWS_SECRET_ACCESS_KEY");
    KCL_RETURN_IF_ERROR(both_or_neither(
        id.has_value(), secret.has_value(), "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
        "; set both (and AWS_SESSION_TOKEN for temporary credentials) or neither"));
    Credentials c;
    c.access_key_id = std::move(*id);
    c.secret_access_key = std::move(*secret);
    if (auto token = env_value(env_, "AWS_SESSION_TOKEN")) c.session_token = std::move(*token);
    if (auto exp = env_value(env_, "AWS_CREDENTIAL_EXPIRATION")) {
      auto t = parse_iso8601(*exp);
      if (!t) {
        return Status(StatusCode::kInvalidArgument,
                      "AWS_CREDENTIAL_EXPIRATION is not an ISO 8601 time");
      }
      c.expiration = *t;
    }
    return c;
  }
  std::string name() const override { return "environment"; }

 private:
  EnvLookup env_;
};

class CachingProvider final : public CredentialsProvider {
 public:
  CachingProvider(std::shared_ptr<CredentialsProvider> inner, const Clock& clock,
                  CachingOptions options)
      : inner_(std::move(inner)), clock_(clock), options_(std::move(options)) {
    if (!options_.logger) options_.logger = make_default_logger();
  }

  Result<Credentials> get() override {
    std::unique_lock<std::mutex> lock(mu_);
    if (cached_ && fresh(*cached_)) return *cached_;
    if (refreshing_) {
      if (cached_ && usable(*cached_)) return *cached_;  // these still work meanwhile
      // Nothing usable: wait for the refresh in progress and share its outcome.
      const std::uint64_t generation = generation_;
      cv_.wait(lock, [&] { return generation_ != generation; });
      // After a success cached_ holds what was fetched; after a failure it holds the old
      // credentials only while they are usable.
      if (cached_) return *cached_;
      return last_error_;
    }
    if (clock_.now() < next_attempt_) {
      // A fetch ended recently: what it left is the answer until the next one is due (the
      // credentials it brought, expired or not, or its failure), so credentials answered
      // near or past their expiry, or a failing source, cost one fetch per interval rather
      // than one per AWS request.
      if (cached_) return *cached_;
      return last_error_;
    }

    refreshing_ = true;
    lock.unlock();
    Result<Credentials> fetched =
        Status(StatusCode::kInternal, "credentials provider " + inner_->name() + " threw");
    try {
      fetched = inner_->get();
    } catch (...) {
      // Keep the waiters from hanging; the library reports failures as a Status.
    }
    lock.lock();
    refreshing_ = false;
    ++generation_;
    const Clock::MonoTime now = clock_.now();
    Result<Credentials> out = fetched;
    std::string warning;
    if (fetched.ok()) {
      cached_ = fetched.value();
      failures_ = 0;
      last_error_ = Status(StatusCode::kInternal, "no refresh failed");
      last_fetch_ = now;
      fetched_after_refusal_ = refusal_pending_;
      refusal_pending_ = false;
      refused_ = false;
      // Credentials issued with less than refresh_before left (or already expired) would
      // otherwise be fetched again on every call.
      if (!fresh(*cached_)) next_attempt_ = now + options_.min_refresh_interval;
      if (expired(*cached_)) {
        // As the AWS SDKs' static stability does: use them and let the service decide.
        if (!warned_expired_) warning = expired_warning(*cached_);
        warned_expired_ = true;
      } else {
        warned_expired_ = false;
      }
    } else {
      last_error_ = fetched.status();
      if (cached_ && usable(*cached_)) {
        // A failed refresh while the cached credentials still work: keep using them.
        out = *cached_;
        next_attempt_ = now + options_.min_refresh_interval;
      } else {
        cached_.reset();
        if (fetched.status().code() == StatusCode::kNotFound) {
          next_attempt_ = {};  // nothing configured: settings made later count at once
        } else {
          ++failures_;
          next_attempt_ = now + failure_backoff();
        }
      }
    }
    lock.unlock();
    cv_.notify_all();
    if (!warning.empty() && options_.logger->enabled(LogLevel::kWarn)) {
      options_.logger->log(LogLevel::kWarn, "credentials", warning);
    }
    return out;
  }

  std::string name() const override { return inner_->name(); }

  void reject(const Credentials& used) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ && cached_->access_key_id == used.access_key_id &&
          cached_->session_token == used.session_token) {
        const Clock::MonoTime retry_at = last_fetch_ + options_.min_refresh_interval;
        if (fetched_after_refusal_ && clock_.now() < retry_at) {
          // Those fetched anew after a refusal are refused too: the source answers the same
          // ones (IMDS's static stability, a host clock behind). They stay the answer until
          // the interval has passed, rather than a fetch for each refused request.
          refused_ = true;
          next_attempt_ = retry_at;
        } else {
          cached_.reset();
          next_attempt_ = {};
          refusal_pending_ = true;
        }
      }
    }
    inner_->reject(used);
  }

 private:
  bool fresh(const Credentials& c) const {
    if (refused_) return false;
    return !c.expiration || clock_.wall_now() + options_.refresh_before < *c.expiration;
  }
  bool usable(const Credentials& c) const {
    return !c.expiration || clock_.wall_now() + options_.usable_until_before < *c.expiration;
  }
  bool expired(const Credentials& c) const {
    return c.expiration && clock_.wall_now() >= *c.expiration;
  }

  // failure_backoff doubled per failure after the first, at most min_refresh_interval.
  std::chrono::milliseconds failure_backoff() const {
    const std::chrono::milliseconds cap = options_.min_refresh_interval;
    std::chrono::milliseconds delay = options_.failure_backoff;
    for (int i = 1; i < failures_ && delay < cap; ++i) delay *= 2;
    return std::min(delay, cap);
  }

  std::string expired_warning(const Credentials& c) const {
    const auto ago =
        std::chrono::duration_cast<std::chrono::seconds>(clock_.wall_now() - *c.expiration);
    return "credentials from " + inner_->name() + " had expired " + std::to_string(ago.count()) +
           " s before they were fetched (the source serves stale credentials, or this host's "
           "clock is ahead); they are used as they are and fetched again every " +
           std::to_string(options_.min_refresh_interval.count()) + " s";
  }

  std::shared_ptr<CredentialsProvider> inner_;
  const Clock& clock_;
  CachingOptions options_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Credentials> cached_;
  bool refreshing_ = false;
  std::uint64_t generation_ = 0;
  Status last_error_{StatusCode::kInternal, "no refresh failed"};
  Clock::MonoTime next_attempt_{};
  int failures_ = 0;                    // failed fetches in a row with nothing usable cached
  bool warned_expired_ = false;         // the last fetch's credentials were expired and said so
  Clock::MonoTime last_fetch_{};        // when the last successful fetch ended
  bool refusal_pending_ = false;        // the cached ones were refused: the next fetch renews
  bool fetched_after_refusal_ = false;  // the cached ones were fetched after a refusal
  bool refused_ = false;                // ... and refused again: served until next_attempt_
};

class ChainProvider final : public CredentialsProvider {
 public:
  explicit ChainProvider(std::vector<std::shared_ptr<CredentialsProvider>> providers)
      : providers_(std::move(providers)) {}

  Result<Credentials> get() override {
    const int last = last_winner_.load(std::memory_order_acquire);
    if (last >= 0) {
      Result<Credentials> r = providers_[static_cast<std::size_t>(last)]->get();
      if (r.ok() || r.status().code() != StatusCode::kNotFound) return r;
      // The winner has nothing any more (e.g. the variables went away): walk the chain.
      last_winner_.store(-1, std::memory_order_release);
    }
    std::string tried;
    std::string reasons;
    for (std::size_t i = 0; i < providers_.size(); ++i) {
      Result<Credentials> r = providers_[i]->get();
      if (r.ok()) {
        last_winner_.store(static_cast<int>(i), std::memory_order_release);
        return r;
      }
      if (r.status().code() != StatusCode::kNotFound) return r;
      const std::string n = providers_[i]->name();
      if (!tried.empty()) tried += ", ";
      tried += n;
      if (!r.status().message().empty()) {
        reasons += reasons.empty() ? " (" : "; ";
        reasons += n + ": " + r.status().message();
      }
    }
    if (!reasons.empty()) reasons += ")";
    return Status(StatusCode::kPermissionDenied,
                  "no AWS credentials found: tried " + tried + reasons);
  }

  std::string name() const override {
    const int last = last_winner_.load(std::memory_order_acquire);
    if (last >= 0) return "chain: " + providers_[static_cast<std::size_t>(last)]->name();
    return "default credentials chain";
  }

  void reject(const Credentials& used) override {
    for (const auto& p : providers_) p->reject(used);
  }

 private:
  std::vector<std::shared_ptr<CredentialsProvider>> providers_;
  std::atomic<int> last_winner_{-1};
};

}  // namespace

Status both_or_neither(bool has_a, bool has_b, std::string_view a, std::string_view b,
                       std::string_view advice) {
  if (!has_a && !has_b) {
    return Status(StatusCode::kNotFound, std::string(a) + " and " + std::string(b) + " not set");
  }
  if (!has_a || !has_b) {
    const std::string_view set = has_a ? a : b;
    const std::string_view unset = has_a ? b : a;
    return Status(
        StatusCode::kInvalidArgument,
        std::string(set) + " is set but " + std::string(unset) + " is not" + std::string(advice));
  }
  return Status::Ok();
}

std::shared_ptr<CredentialsProvider> make_environment_provider(EnvLookup env) {
  return std::make_shared<EnvironmentProvider>(std::move(env));
}

std::shared_ptr<CredentialsProvider> make_caching_provider(
    std::shared_ptr<CredentialsProvider> inner, const Clock& clock, CachingOptions options) {
  return std::make_shared<CachingProvider>(std::move(inner), clock, options);
}

std::shared_ptr<CredentialsProvider> make_chain(
    std::vector<std::shared_ptr<CredentialsProvider>> providers) {
  return std::make_shared<ChainProvider>(std::move(providers));
}

std::shared_ptr<CredentialsProvider> make_default_chain(const AwsConfig& config,
                                                        std::shared_ptr<HttpTransport> transport,
                                                        const Clock& clock, EnvLookup env) {
  if (!transport) transport = make_curl_transport(config.http);
  std::vector<std::shared_ptr<CredentialsProvider>> links;
  if (config.credentials) {
    links.push_back(std::make_shared<StaticProvider>(*config.credentials, "static config"));
  } else {
    links.push_back(std::make_shared<NotConfiguredProvider>(
        "static config", std::string()));  // nothing to explain: not configured
  }
  // A profile named in the configuration (--profile) is what the user asked for: the
  // environment's keys are not read ahead of it, as the AWS CLI and boto3 do (AWS_PROFILE
  // names no profile here: the environment's keys still come first then).
  if (config.profile.empty()) links.push_back(make_environment_provider(env));
  links.push_back(
      make_caching_provider(make_profile_provider(config, env, transport, clock), clock));
  links.push_back(
      make_caching_provider(make_web_identity_provider(config, env, transport, clock), clock));
  links.push_back(make_caching_provider(make_container_provider(env, transport), clock));
  links.push_back(make_caching_provider(make_imds_provider(env, transport), clock));
  return make_chain(std::move(links));
}

}  // namespace credentials_internal

std::shared_ptr<CredentialsProvider> make_static_provider(const StaticCredentials& creds) {
  return std::make_shared<credentials_internal::StaticProvider>(creds, "static");
}

std::shared_ptr<CredentialsProvider> make_default_chain(const AwsConfig& config,
                                                        std::shared_ptr<HttpTransport> transport,
                                                        const Clock& clock) {
  return credentials_internal::make_default_chain(config, std::move(transport), clock,
                                                  process_env());
}

}  // namespace kcl::aws
