// The caching wrapper (refresh before expiry on a ManualClock, one refresh for many callers),
// the chain (order, kNotFound vs errors, remembering the winner, the final message) and the
// public make_default_chain with the real process environment (saved and restored).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "aws/credentials_internal.h"
#include "aws_test_util.h"
#include "support/captured_log.h"
#include "support/local_http_server.h"

namespace kcl::aws::credentials_internal {
namespace {

namespace fs = std::filesystem;
using kcl::testing::CannedResponse;
using kcl::testing::LocalHttpServer;
using kcl::testing::ServedRequest;
using std::chrono::minutes;
using std::chrono::seconds;
using test::FakeEnv;
using test::TempDir;

using test::kSecretKey;

// A provider whose answers the test scripts; counts calls; can block inside get().
class ScriptedProvider final : public CredentialsProvider {
 public:
  explicit ScriptedProvider(std::string name) : name_(std::move(name)) {}

  Result<Credentials> get() override {
    std::unique_lock<std::mutex> lock(mu_);
    ++calls_;
    ++inside_;
    max_inside_ = std::max(max_inside_, inside_);
    cv_.notify_all();
    cv_.wait(lock, [&] { return !blocked_; });
    --inside_;
    if (!next_) return next_error_;
    Credentials c = *next_;
    c.access_key_id += "#" + std::to_string(calls_);
    return c;
  }
  std::string name() const override { return name_; }

  void answer(Result<Credentials> r) {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.ok()) {
      next_ = r.value();
    } else {
      next_.reset();
      next_error_ = r.status();
    }
  }
  void block() {
    std::lock_guard<std::mutex> lock(mu_);
    blocked_ = true;
  }
  void unblock() {
    std::lock_guard<std::mutex> lock(mu_);
    blocked_ = false;
    cv_.notify_all();
  }
  void wait_until_inside() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return inside_ > 0; });
  }
  int calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  // The most calls that were inside get() at once.
  int max_inside() const {
    std::lock_guard<std::mutex> lock(mu_);
    return max_inside_;
  }

 private:
  std::string name_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // What get() answers: next_, else next_error_ (kept apart: GCC 12 warns of a Result built
  // from a Status in the constructor as maybe uninitialized).
  std::optional<Credentials> next_;
  Status next_error_{StatusCode::kNotFound, "nothing here"};
  int calls_ = 0;
  int inside_ = 0;
  int max_inside_ = 0;
  bool blocked_ = false;
};

Credentials creds(std::string id, std::optional<std::chrono::system_clock::time_point> exp) {
  Credentials c;
  c.access_key_id = std::move(id);
  c.secret_access_key = kSecretKey;
  c.expiration = exp;
  return c;
}

// ---- caching ----

TEST(CredentialsCacheTest, LongTermCredentialsAreFetchedOnce) {
  ManualClock clock;
  auto inner = std::make_shared<ScriptedProvider>("inner");
  inner->answer(creds("AKID", std::nullopt));
  auto p = make_caching_provider(inner, clock);
  EXPECT_EQ(p->get()->access_key_id, "AKID#1");
  clock.advance(std::chrono::hours(24 * 365));
  EXPECT_EQ(p->get()->access_key_id, "AKID#1");
  EXPECT_EQ(inner->calls(), 1);
  EXPECT_EQ(p->name(), "inner");
}

TEST(CredentialsCacheTest, CredentialsTheServiceRefusesAsExpiredAreFetchedAnew) {
  // Long-term keys from a credentials file rewritten since (or a session rotated before its
  // stated expiry): cached for good until the service refuses them.
  ManualClock clock;
  auto inner = std::make_shared<ScriptedProvider>("inner");
  inner->answer(creds("AKID", std::nullopt));
  auto chain = make_chain({make_caching_provider(inner, clock)});
  const Credentials first = *chain->get();
  EXPECT_EQ(first.access_key_id, "AKID#1");
  chain->reject(creds("OTHER", std::nullopt));
  EXPECT_EQ(chain->get()->access_key_id, "AKID#1") << "others' rejection drops nothing";
  chain->reject(first);
  EXPECT_EQ(chain->get()->access_key_id, "AKID#2");
  EXPECT_EQ(inner->calls(), 2);
}

TEST(CredentialsCacheTest, CredentialsRefusedAgainAfterARenewalAreNotFetchedPerRequest) {
  // The source answers the same refused credentials (IMDS's static stability, a host clock
  // behind): one renewal at once, then one fetch per minimum interval, not one per request.
  ManualClock clock;
  auto inner = std::make_shared<ScriptedProvider>("inner");
  inner->answer(creds("ASIA", clock.wall_now() + minutes(60)));
  auto p = make_caching_provider(inner, clock);
  const Credentials first = *p->get();
  p->reject(first);
  EXPECT_EQ(p->get()->access_key_id, "ASIA#2") << "fetched anew at once";
  for (int i = 0; i < 5; ++i) {  // each request refused, as the service does
    const Credentials used = *p->get();
    EXPECT_EQ(used.access_key_id, "ASIA#2");
    p->reject(used);
  }
  EXPECT_EQ(inner->calls(), 2);
  clock.advance(seconds(31));
  EXPECT_EQ(p->get()->access_key_id, "ASIA#3");
  EXPECT_EQ(p->get()->access_key_id, "ASIA#3");
  EXPECT_EQ(inner->calls(), 3);
}

TEST(CredentialsCacheTest, RefreshesWhenLessThanFiveMinutesRemain) {
  ManualClock clock;
  auto inner = std::make_shared<ScriptedProvider>("inner");
  inner->answer(creds("ASIA", clock.wall_now() + minutes(60)));
  auto p = make_caching_provider(inner, clock);
  EXPECT_EQ(p->get()->access_key_id, "ASIA#1");
  clock.advance(minutes(55) - seconds(1));
  EXPECT_EQ(p->get()->access_key_id, "ASIA#1");
  EXPECT_EQ(inner->calls(), 1);
  inner->answer(creds("ASIA", clock.wall_now() + minutes(60)));
  clock.advance(seconds(2));
  EXPECT_EQ(p->get()->access_key_id, "ASIA#2");
  EXPECT_EQ(inner->calls(), 2);
}

TEST(CredentialsCacheTest, UsesWallClockForExpiry) {
  ManualClock clock;
  auto inner = std::make_shared<ScriptedProvider>("inner");
  inner->answer(creds("ASIA", clock.wall_now() + minutes(60)));
  auto p = make_caching_provider(inner, clock);
  ASSERT_TRUE(p->get().ok());
  clock.skew_wall(minutes(58));  // only wall time moves: the token is near its expiry
  ASSERT_TRUE(p->get().ok());
  EXPECT_EQ(inner->calls(), 2);
}

TEST(CredentialsCacheTest, FailedRefreshKeepsUsableCredentialsThenFails) {
  ManualClock clock;
  auto inner = std::make_shared<ScriptedProvider>("inner");
  inner->answer(creds("ASIA", clock.wall_now() + minutes(4)));
  auto p = make_caching_provider(inner, clock);
  ASSERT_TRUE(p->get().ok());  // 4 minutes left: already inside the refresh window
  EXPECT_TRUE(p->get().ok());  // but no new attempt within the minimum interval (30 s)
  EXPECT_EQ(inner->calls(), 1);
  inner->answer(Status(StatusCode::kUnavailable, "endpoint down"));
  clock.advance(seconds(31));
  auto r = p->get();  // refresh fails, the cached ones still work
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->access_key_id, "ASIA#1");
  EXPECT_EQ(inner->calls(), 2);
  EXPECT_TRUE(p->get().ok());  // no new attempt within the minimum interval
  EXPECT_EQ(inner->calls(), 2);
  clock.advance(minutes(4));  // expired: the failure shows
  r = p->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(inner->calls(), 3);
}

TEST(CredentialsCacheTest, ConcurrentCallersShareOneFetch) {
  ManualClock clock;
  auto inner = std::make_shared<ScriptedProvider>("inner");
  inner->answer(creds("ASIA", clock.wall_now() + minutes(60)));
  inner->block();
  auto p = make_caching_provider(inner, clock);
  std::vector<std::thread> threads;
  std::vector<std::string> got(8);
  for (std::size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      auto r = p->get();
      got[i] = r.ok() ? r->access_key_id : r.status().to_string();
    });
  }
  inner->wait_until_inside();
  inner->unblock();
  for (auto& t : threads) t.join();
  EXPECT_EQ(inner->calls(), 1);
  for (const auto& g : got) EXPECT_EQ(g, "ASIA#1");
}

TEST(CredentialsCacheTest, DuringRefreshOthersGetTheStillValidCredentials) {
  ManualClock clock;
  auto inner = std::make_shared<ScriptedProvider>("inner");
  inner->answer(creds("ASIA", clock.wall_now() + minutes(60)));
  auto p = make_caching_provider(inner, clock);
  ASSERT_TRUE(p->get().ok());
  clock.advance(minutes(57));
  inner->block();
  std::thread refresher([&] { EXPECT_EQ(p->get()->access_key_id, "ASIA#2"); });
  inner->wait_until_inside();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(p->get()->access_key_id, "ASIA#1");  // no waiting
  inner->unblock();
  refresher.join();
  EXPECT_EQ(inner->calls(), 2);
  EXPECT_EQ(p->get()->access_key_id, "ASIA#2");
}

TEST(CredentialsCacheTest, WaitersShareAFailedFetch) {
  ManualClock clock;
  auto inner = std::make_shared<ScriptedProvider>("inner");
  inner->answer(Status(StatusCode::kPermissionDenied, "broken"));
  inner->block();
  auto p = make_caching_provider(inner, clock);
  std::vector<std::thread> threads;
  std::atomic<int> started{0};
  std::atomic<int> failures{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      ++started;
      auto r = p->get();
      if (!r.ok() && r.status().message() == "broken") ++failures;
    });
  }
  inner->wait_until_inside();
  while (started.load() < 4) std::this_thread::yield();
  // The others queue behind the fetch in flight (or come after it failed and fetch again,
  // one at a time): never two fetches at once, and each caller gets the error.
  inner->unblock();
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 4);
  EXPECT_EQ(inner->max_inside(), 1);
  EXPECT_LE(inner->calls(), 4);
}

TEST(CredentialsCacheTest, CredentialsFetchedAlreadyExpiredAreServedNotFetchedPerCall) {
  // IMDS static stability, a host clock ahead, a credential_process answering from its own
  // stale cache: the fetch answers credentials already expired. They are served (the service
  // decides) and fetched again only after the minimum interval, not once per call.
  ManualClock clock;
  auto log = std::make_shared<kcl::testing::CapturedLog>(LogLevel::kWarn);
  auto inner = std::make_shared<ScriptedProvider>("inner");
  inner->answer(creds("ASIA", clock.wall_now() - minutes(1)));
  CachingOptions options;
  options.logger = log;
  auto p = make_caching_provider(inner, clock, options);
  for (int i = 0; i < 5; ++i) {
    auto r = p->get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->access_key_id, "ASIA#1");
  }
  EXPECT_EQ(inner->calls(), 1);
  clock.advance(options.min_refresh_interval + seconds(1));
  EXPECT_EQ(p->get()->access_key_id, "ASIA#2");
  EXPECT_EQ(p->get()->access_key_id, "ASIA#2");
  EXPECT_EQ(inner->calls(), 2);
  // Logged once, not per fetch or per call.
  ASSERT_EQ(log->lines().size(), 1u);
  EXPECT_NE(log->lines()[0].find("expired"), std::string::npos) << log->lines()[0];
}

TEST(CredentialsCacheTest, FailingFetchWithNothingCachedBacksOff) {
  ManualClock clock;
  auto inner = std::make_shared<ScriptedProvider>("inner");
  inner->answer(Status(StatusCode::kUnavailable, "endpoint down"));
  auto p = make_caching_provider(inner, clock);
  for (int i = 0; i < 5; ++i) {
    auto r = p->get();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
    EXPECT_EQ(r.status().message(), "endpoint down");
  }
  EXPECT_EQ(inner->calls(), 1) << "the failure is answered again until the backoff passes";
  // The backoff grows (1 s, 2 s, 4 s, ...) up to the minimum refresh interval (30 s): over
  // 10 minutes of calls every 100 ms, at most 6 fetches in the first 31 s and then one per 30 s.
  for (int i = 0; i < 6000; ++i) {
    clock.advance(std::chrono::milliseconds(100));
    ASSERT_FALSE(p->get().ok());
  }
  EXPECT_GE(inner->calls(), 20);
  EXPECT_LE(inner->calls(), 26);
  // A success ends the failure series: served at once when the backoff passes.
  inner->answer(creds("ASIA", clock.wall_now() + minutes(60)));
  clock.advance(seconds(31));
  EXPECT_TRUE(p->get().ok());
}

TEST(CredentialsCacheTest, NotConfiguredIsNotBackedOff) {
  // kNotFound says the provider has nothing configured (the chain moves on); the settings
  // are read at each get(), so configuration made later is seen at the next call.
  ManualClock clock;
  auto inner = std::make_shared<ScriptedProvider>("inner");
  auto p = make_caching_provider(inner, clock);
  EXPECT_EQ(p->get().status().code(), StatusCode::kNotFound);
  EXPECT_EQ(p->get().status().code(), StatusCode::kNotFound);
  EXPECT_EQ(inner->calls(), 2);
  inner->answer(creds("AKID", std::nullopt));
  EXPECT_EQ(p->get()->access_key_id, "AKID#3");
}

// ---- chain ----

TEST(CredentialsChainTest, FirstThatYieldsWinsAndIsRemembered) {
  auto a = std::make_shared<ScriptedProvider>("a");
  auto b = std::make_shared<ScriptedProvider>("b");
  auto c = std::make_shared<ScriptedProvider>("c");
  b->answer(creds("B", std::nullopt));
  c->answer(creds("C", std::nullopt));
  auto chain = make_chain({a, b, c});
  EXPECT_EQ(chain->get()->access_key_id, "B#1");
  EXPECT_EQ(a->calls(), 1);
  EXPECT_EQ(c->calls(), 0);
  EXPECT_EQ(chain->get()->access_key_id, "B#2");
  EXPECT_EQ(a->calls(), 1);  // the winner is asked first
  EXPECT_EQ(chain->name(), "chain: b");

  // The winner has nothing any more: the chain is walked again from the top.
  b->answer(Status(StatusCode::kNotFound, "gone"));
  EXPECT_EQ(chain->get()->access_key_id, "C#1");
  EXPECT_EQ(a->calls(), 2);
  EXPECT_EQ(b->calls(), 4);
}

TEST(CredentialsChainTest, ErrorsOfAConfiguredProviderStopTheChain) {
  auto a = std::make_shared<ScriptedProvider>("a");
  auto b = std::make_shared<ScriptedProvider>("b");
  auto c = std::make_shared<ScriptedProvider>("c");
  b->answer(Status(StatusCode::kPermissionDenied, "credential_process of profile 'x' failed"));
  c->answer(creds("C", std::nullopt));
  auto r = make_chain({a, b, c})->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "credential_process of profile 'x' failed");
  EXPECT_EQ(c->calls(), 0);
}

TEST(CredentialsChainTest, NothingFoundNamesEveryProvider) {
  auto a = std::make_shared<ScriptedProvider>("first");
  auto b = std::make_shared<ScriptedProvider>("second");
  auto r = make_chain({a, b})->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(r.status().message(),
            "no AWS credentials found: tried first, second (first: nothing here; second: "
            "nothing here)");
}

// ---- the default chain with an explicit environment ----

class DefaultChainTest : public ::testing::Test {
 protected:
  DefaultChainTest() {
    env_.vars["HOME"] = dir_.path().string();
    env_.vars["AWS_EC2_METADATA_DISABLED"] = "true";  // never reach for 169.254.169.254
  }
  std::shared_ptr<CredentialsProvider> chain(const AwsConfig& config = {}) {
    return make_default_chain(config, transport_, clock_, env_.lookup());
  }
  TempDir dir_;
  FakeEnv env_;
  ManualClock clock_;
  std::shared_ptr<HttpTransport> transport_ = make_curl_transport(HttpConfig{});
};

TEST_F(DefaultChainTest, NothingConfiguredGivesTheMessageUsersSee) {
  dir_.write(".aws/config", "[profile X]\nregion = eu-west-1\n");
  AwsConfig config;
  config.profile = "X";
  auto r = chain(config)->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  const std::string prefix =
      "no AWS credentials found: tried static config, shared files (profile X), "
      "web identity, container, instance metadata";
  EXPECT_EQ(r.status().message().substr(0, prefix.size()), prefix) << r.status();
  EXPECT_NE(r.status().message().find("AWS_EC2_METADATA_DISABLED"), std::string::npos);
}

TEST_F(DefaultChainTest, Order) {
  dir_.write(".aws/credentials",
             "[default]\naws_access_key_id = FILE\naws_secret_access_key = s\n");
  EXPECT_EQ(chain()->get()->access_key_id, "FILE");

  env_.vars["AWS_ACCESS_KEY_ID"] = "ENV";
  env_.vars["AWS_SECRET_ACCESS_KEY"] = "s";
  EXPECT_EQ(chain()->get()->access_key_id, "ENV");

  AwsConfig config;
  config.credentials = StaticCredentials{"STATIC", "s", ""};
  EXPECT_EQ(chain(config)->get()->access_key_id, "STATIC");
}

// A profile named in the configuration (kcl --profile prod) wins over keys in the environment,
// as in the AWS CLI and boto3: `kcl --profile prod delete-stream` signed with a development
// account's keys from the environment before. AWS_PROFILE names no profile this way.
TEST_F(DefaultChainTest, AProfileNamedInTheConfigurationWinsOverTheEnvironmentsKeys) {
  dir_.write(".aws/credentials",
             "[default]\naws_access_key_id = DEFAULT\naws_secret_access_key = s\n"
             "[prod]\naws_access_key_id = PROD\naws_secret_access_key = s\n");
  env_.vars["AWS_ACCESS_KEY_ID"] = "ENV";
  env_.vars["AWS_SECRET_ACCESS_KEY"] = "s";
  AwsConfig config;
  config.profile = "prod";
  EXPECT_EQ(chain(config)->get()->access_key_id, "PROD");
  env_.vars["AWS_PROFILE"] = "prod";
  EXPECT_EQ(chain()->get()->access_key_id, "ENV");
}

TEST_F(DefaultChainTest, BrokenCredentialProcessIsReportedNotSkipped) {
  dir_.write(".aws/config", "[default]\ncredential_process = exit 2\n");
  env_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://127.0.0.1:1/never";
  auto r = chain()->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("credential_process of profile 'default' exited with "
                                      "status 2"),
            std::string::npos)
      << r.status();
}

TEST_F(DefaultChainTest, ContainerThenRefreshThroughTheChain) {
  std::atomic<int> served{0};
  LocalHttpServer ecs([&](const ServedRequest& req) {
    if (req.header("authorization") != "auth") return CannedResponse{401, {}, ""};
    const int n = ++served;
    const auto exp = std::chrono::system_clock::to_time_t(clock_.wall_now() + minutes(30));
    std::tm tm{};
    ::gmtime_r(&exp, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return CannedResponse{200,
                          {},
                          std::string(R"({"AccessKeyId": "ECS)") + std::to_string(n) +
                              R"(", "SecretAccessKey": "s", "Token": "t", "Expiration": ")" + buf +
                              "\"}"};
  });
  env_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url() + "/creds";
  env_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "auth";
  auto p = chain();
  EXPECT_EQ(p->get()->access_key_id, "ECS1");
  EXPECT_EQ(p->get()->access_key_id, "ECS1");
  EXPECT_EQ(p->name(), "chain: container");
  clock_.advance(minutes(26));
  EXPECT_EQ(p->get()->access_key_id, "ECS2");
  EXPECT_EQ(served.load(), 2);
}

// ---- the public entry points with the real process environment ----

// The variables the default chain reads: unset for a test, restored after it.
class EnvGuard : public test::ScopedEnv {
 public:
  EnvGuard()
      : test::ScopedEnv({"AWS_ACCESS_KEY_ID",
                         "AWS_SECRET_ACCESS_KEY",
                         "AWS_SESSION_TOKEN",
                         "AWS_CREDENTIAL_EXPIRATION",
                         "AWS_PROFILE",
                         "AWS_SHARED_CREDENTIALS_FILE",
                         "AWS_CONFIG_FILE",
                         "AWS_WEB_IDENTITY_TOKEN_FILE",
                         "AWS_ROLE_ARN",
                         "AWS_ROLE_SESSION_NAME",
                         "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                         "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                         "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                         "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                         "AWS_EC2_METADATA_DISABLED",
                         "AWS_EC2_METADATA_SERVICE_ENDPOINT",
                         "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
                         "AWS_EC2_METADATA_V1_DISABLED",
                         "AWS_ENDPOINT_URL",
                         "AWS_ENDPOINT_URL_STS",
                         "AWS_REGION",
                         "AWS_DEFAULT_REGION"}) {}
};

class PublicChainTest : public ::testing::Test {
 protected:
  PublicChainTest() {
    // Keep the user's real ~/.aws out of it, and never try 169.254.169.254.
    env_.set("AWS_SHARED_CREDENTIALS_FILE", (dir_.path() / "credentials").string());
    env_.set("AWS_CONFIG_FILE", (dir_.path() / "config").string());
    env_.set("AWS_EC2_METADATA_DISABLED", "true");
  }
  EnvGuard env_;
  TempDir dir_;
  std::shared_ptr<HttpTransport> transport_ = make_curl_transport(HttpConfig{});
};

TEST_F(PublicChainTest, EnvironmentVariables) {
  env_.set("AWS_ACCESS_KEY_ID", "AKIDENV");
  env_.set("AWS_SECRET_ACCESS_KEY", kSecretKey);
  env_.set("AWS_SESSION_TOKEN", "tok");
  auto c = make_default_chain(AwsConfig{}, transport_)->get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "AKIDENV");
  EXPECT_EQ(c->secret_access_key, kSecretKey);
  EXPECT_EQ(c->session_token, "tok");
}

TEST_F(PublicChainTest, NothingFoundAndNoSecretsInTheMessage) {
  env_.set("AWS_PROFILE", "dev");
  dir_.write("config", std::string("[profile dev]\nregion = us-east-1\n[profile other]\n"
                                   "aws_access_key_id = AKIDOTHER\naws_secret_access_key = ") +
                           kSecretKey + "\n");
  auto r = make_default_chain(AwsConfig{}, transport_)->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(r.status().message().rfind("no AWS credentials found: tried static config, "
                                       "environment, shared files (profile dev), web identity, "
                                       "container, instance metadata",
                                       0),
            0u)
      << r.status();
  EXPECT_EQ(r.status().to_string().find(kSecretKey), std::string::npos);
}

// Instance metadata with one role: a session token, the role, its credentials (ASIAIMDS).
CannedResponse imds_answer(const ServedRequest& req) {
  if (req.method == "PUT") return CannedResponse{200, {}, "tok"};
  if (req.header("x-aws-ec2-metadata-token") != "tok") return CannedResponse{401, {}, ""};
  if (req.target == "/latest/meta-data/iam/security-credentials/") {
    return CannedResponse{200, {}, "role"};
  }
  return CannedResponse{200,
                        {},
                        R"({"Code": "Success", "AccessKeyId": "ASIAIMDS", "SecretAccessKey": )"
                        R"("s", "Token": "t", "Expiration": "2999-01-01T00:00:00Z"})"};
}

TEST_F(PublicChainTest, ImdsThroughALocalServer) {
  LocalHttpServer imds(&imds_answer);
  env_.set("AWS_EC2_METADATA_DISABLED", "false");
  env_.set("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url());
  auto chain = make_default_chain(AwsConfig{}, transport_);
  auto c = chain->get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ASIAIMDS");
  EXPECT_EQ(chain->get()->access_key_id, "ASIAIMDS");
  EXPECT_EQ(imds.requests().size(), 3u);  // cached
}

// A proxy from the environment (http_proxy, ALL_PROXY) is never used for the link-local
// metadata endpoints, as the Java SDK v2 opens them: a proxy would answer for the wrong
// host, or see the container's authorization token. The test's proxy is a local server that
// refuses everything and records what reached it.
class MetadataProxyTest : public PublicChainTest {
 protected:
  MetadataProxyTest() {
    for (const char* name : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "ALL_PROXY",
                             "all_proxy", "NO_PROXY", "no_proxy"}) {
      env_.unset(name);
    }
    env_.set("http_proxy", proxy_.url());
    env_.set("ALL_PROXY", proxy_.url());
  }
  LocalHttpServer proxy_{[](const ServedRequest&) { return CannedResponse{502, {}, ""}; }};
};

TEST_F(MetadataProxyTest, ImdsIsAskedWithoutTheProxy) {
  LocalHttpServer imds(&imds_answer);
  env_.set("AWS_EC2_METADATA_DISABLED", "false");
  env_.set("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url());
  auto c = make_default_chain(AwsConfig{}, transport_)->get();
  EXPECT_EQ(proxy_.requests().size(), 0u);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ASIAIMDS");
  EXPECT_EQ(imds.requests().size(), 3u);
}

TEST_F(MetadataProxyTest, ContainerEndpointIsAskedWithoutTheProxy) {
  LocalHttpServer ecs([](const ServedRequest&) {
    return CannedResponse{200,
                          {},
                          R"({"AccessKeyId": "ASIAECS", "SecretAccessKey": "s", "Token": "t", )"
                          R"("Expiration": "2999-01-01T00:00:00Z"})"};
  });
  env_.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", ecs.url() + "/creds");
  env_.set("AWS_CONTAINER_AUTHORIZATION_TOKEN", "auth");
  auto c = make_default_chain(AwsConfig{}, transport_)->get();
  EXPECT_EQ(proxy_.requests().size(), 0u);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ASIAECS");
  EXPECT_EQ(ecs.requests().size(), 1u);
}

TEST_F(MetadataProxyTest, OtherRequestsStillUseTheProxy) {
  // The proxy from the environment keeps applying to everything else (STS here).
  HttpRequest req;
  req.method = "GET";
  req.url = "http://127.0.0.1:1/elsewhere";
  auto r = transport_->send(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 502);
  EXPECT_EQ(proxy_.requests().size(), 1u);
}

}  // namespace
}  // namespace kcl::aws::credentials_internal
