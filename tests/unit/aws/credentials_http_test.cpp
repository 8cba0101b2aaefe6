// The HTTP providers (web identity through STS, the ECS/EKS container endpoint, IMDSv2)
// against small local servers standing in for the real endpoints, through the curl
// transport. The environment is a map; the process environment is untouched.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>

#include "aws/credentials_internal.h"
#include "aws_test_util.h"
#include "support/local_http_server.h"

namespace kcl::aws::credentials_internal {
namespace {

namespace fs = std::filesystem;
using kcl::testing::CannedResponse;
using kcl::testing::LocalHttpServer;
using kcl::testing::ServedRequest;
using test::FakeEnv;
using test::TempDir;

using test::kSecretKey;
using test::kSessionToken;
constexpr const char* kJwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.SIGNATUREjwt";
constexpr const char* kEcsAuth = "ecs-auth-TOKEN-value-42";

void expect_no_secrets(const Status& s) {
  const std::string text = s.to_string();
  for (const char* secret : {kSecretKey, kSessionToken, kJwt, kEcsAuth}) {
    EXPECT_EQ(text.find(secret), std::string::npos) << text;
  }
}

// A transport that records requests and answers from a function, for URLs no test may
// really contact (169.254.170.2, https hosts).
class RecordingTransport final : public HttpTransport {
 public:
  std::function<Result<HttpResponse>(const HttpRequest&)> answer = [](const HttpRequest&) {
    return Result<HttpResponse>(Status(StatusCode::kUnavailable, "connection refused"));
  };
  Result<HttpResponse> send(const HttpRequest& request) override {
    std::lock_guard<std::mutex> lock(mu_);
    sent.push_back(request);
    return answer(request);
  }
  std::vector<HttpRequest> sent;

 private:
  std::mutex mu_;
};

std::string iso(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string sts_ok(const std::string& key_id, std::chrono::system_clock::time_point expiration) {
  return "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
         "<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>" +
         key_id + "</AccessKeyId><SecretAccessKey>" + kSecretKey +
         "</SecretAccessKey><SessionToken>" + kSessionToken + "</SessionToken><Expiration>" +
         iso(expiration) +
         "</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
         "<ResponseMetadata><RequestId>req-1</RequestId></ResponseMetadata>"
         "</AssumeRoleWithWebIdentityResponse>";
}

std::string metadata_json(const std::string& key_id,
                          std::chrono::system_clock::time_point expiration) {
  return R"({"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": ")" + key_id +
         R"(", "SecretAccessKey": ")" + kSecretKey + R"(", "Token": ")" + kSessionToken +
         R"(", "Expiration": ")" + iso(expiration) + R"("})";
}

class CredentialsHttpTest : public ::testing::Test {
 protected:
  CredentialsHttpTest() { env_.vars["HOME"] = dir_.path().string(); }
  std::shared_ptr<HttpTransport> transport_ = make_curl_transport(HttpConfig{});
  TempDir dir_;
  FakeEnv env_;
  ManualClock clock_;
};

// ---- web identity ----

TEST_F(CredentialsHttpTest, WebIdentityNotConfigured) {
  auto r = make_web_identity_provider({}, env_.lookup(), transport_, clock_)->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  env_.vars["AWS_ROLE_ARN"] = "arn:aws:iam::123456789012:role/r";
  r = make_web_identity_provider({}, env_.lookup(), transport_, clock_)->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(CredentialsHttpTest, WebIdentityCallsStsWithTheToken) {
  const auto expiration = clock_.wall_now() + std::chrono::hours(1);
  LocalHttpServer sts([&](const ServedRequest&) {
    CannedResponse resp;
    resp.headers = {{"Content-Type", "text/xml"}};
    resp.body = sts_ok("ASIAWEB", expiration);
    return resp;
  });
  env_.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir_.write("token", std::string(kJwt) + "\n");
  env_.vars["AWS_ROLE_ARN"] = "arn:aws:iam::123456789012:role/my role";
  env_.vars["AWS_ROLE_SESSION_NAME"] = "sess@1";
  env_.vars["AWS_ENDPOINT_URL_STS"] = sts.url() + "/";

  auto c = make_web_identity_provider({}, env_.lookup(), transport_, clock_)->get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ASIAWEB");
  EXPECT_EQ(c->secret_access_key, kSecretKey);
  EXPECT_EQ(c->session_token, kSessionToken);
  ASSERT_TRUE(c->expiration.has_value());
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(*c->expiration - expiration).count(),
            0);

  auto reqs = sts.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].target, "/");
  EXPECT_NE(reqs[0].header("content-type").find("application/x-www-form-urlencoded"),
            std::string::npos);
  EXPECT_TRUE(reqs[0].header("authorization").empty());  // unsigned
  const std::string& body = reqs[0].body;
  EXPECT_NE(body.find("Action=AssumeRoleWithWebIdentity"), std::string::npos);
  EXPECT_NE(body.find("Version=2011-06-15"), std::string::npos);
  EXPECT_NE(body.find("RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fmy%20role"),
            std::string::npos);
  EXPECT_NE(body.find("RoleSessionName=sess%401"), std::string::npos);
  EXPECT_NE(body.find(std::string("WebIdentityToken=") + kJwt), std::string::npos);  // trimmed
}

TEST_F(CredentialsHttpTest, WebIdentityDefaultSessionName) {
  LocalHttpServer sts([&](const ServedRequest&) {
    return CannedResponse{200, {}, sts_ok("A", clock_.wall_now() + std::chrono::hours(1))};
  });
  env_.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir_.write("token", kJwt);
  env_.vars["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
  env_.vars["AWS_ENDPOINT_URL"] = sts.url();
  ASSERT_TRUE(make_web_identity_provider({}, env_.lookup(), transport_, clock_)->get().ok());
  auto reqs = sts.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_NE(reqs[0].body.find("RoleSessionName=kcl-cpp-"), std::string::npos);
}

TEST_F(CredentialsHttpTest, WebIdentityStsErrorIsClearAndHasNoSecrets) {
  LocalHttpServer sts([](const ServedRequest&) {
    return CannedResponse{
        400,
        {{"x-amzn-RequestId", "rid-9"}},
        "<ErrorResponse><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code>"
        "<Message>Incorrect token audience</Message></Error><RequestId>rid-9</RequestId>"
        "</ErrorResponse>"};
  });
  env_.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir_.write("token", kJwt);
  env_.vars["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
  env_.vars["AWS_ENDPOINT_URL_STS"] = sts.url();
  auto r = make_web_identity_provider({}, env_.lookup(), transport_, clock_)->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("InvalidIdentityToken"), std::string::npos);
  EXPECT_NE(r.status().message().find("Incorrect token audience"), std::string::npos);
  EXPECT_NE(r.status().message().find("arn:aws:iam::1:role/r"), std::string::npos);
  ASSERT_TRUE(r.status().aws().has_value());
  EXPECT_EQ(r.status().aws()->request_id, "rid-9");
  expect_no_secrets(r.status());
}

TEST_F(CredentialsHttpTest, WebIdentityTokenFileProblems) {
  env_.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = (dir_.path() / "missing").string();
  env_.vars["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
  env_.vars["AWS_ENDPOINT_URL_STS"] = "http://127.0.0.1:1";
  auto r = make_web_identity_provider({}, env_.lookup(), transport_, clock_)->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("cannot be read"), std::string::npos);
}

TEST_F(CredentialsHttpTest, WebIdentityStsUnreachableIsRetryable) {
  LocalHttpServer sts([](const ServedRequest&) {
    CannedResponse resp;
    resp.close_without_response = true;
    return resp;
  });
  env_.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir_.write("token", kJwt);
  env_.vars["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
  env_.vars["AWS_ENDPOINT_URL_STS"] = sts.url();
  auto r = make_web_identity_provider({}, env_.lookup(), transport_, clock_)->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  expect_no_secrets(r.status());
}

TEST_F(CredentialsHttpTest, WebIdentityFromProfile) {
  LocalHttpServer sts([&](const ServedRequest&) {
    return CannedResponse{200, {}, sts_ok("ASIAPROF", clock_.wall_now() + std::chrono::hours(1))};
  });
  std::string token = dir_.write("token", kJwt);
  dir_.write(".aws/config",
             "[profile wi]\nrole_arn = arn:aws:iam::1:role/prof\n"
             "web_identity_token_file = " +
                 token + "\nrole_session_name = from-profile\n");
  env_.vars["AWS_ENDPOINT_URL_STS"] = sts.url();
  AwsConfig config;
  config.profile = "wi";
  auto c = make_profile_provider(config, env_.lookup(), transport_, clock_)->get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ASIAPROF");
  auto reqs = sts.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_NE(reqs[0].body.find("RoleSessionName=from-profile"), std::string::npos);
  EXPECT_NE(reqs[0].body.find("role%2Fprof"), std::string::npos);
}

TEST_F(CredentialsHttpTest, StsEndpointResolution) {
  AwsConfig config;
  EXPECT_EQ(sts_endpoint(config, env_.lookup()), "https://sts.amazonaws.com");
  dir_.write(".aws/config", "[default]\nregion = ap-south-1\n");
  EXPECT_EQ(sts_endpoint(config, env_.lookup()), "https://sts.ap-south-1.amazonaws.com");
  env_.vars["AWS_DEFAULT_REGION"] = "eu-west-1";
  EXPECT_EQ(sts_endpoint(config, env_.lookup()), "https://sts.eu-west-1.amazonaws.com");
  env_.vars["AWS_REGION"] = "cn-north-1";
  EXPECT_EQ(sts_endpoint(config, env_.lookup()), "https://sts.cn-north-1.amazonaws.com.cn");
  config.region = "us-west-2";
  EXPECT_EQ(sts_endpoint(config, env_.lookup()), "https://sts.us-west-2.amazonaws.com");
  env_.vars["AWS_ENDPOINT_URL"] = "http://localhost:1234/";
  EXPECT_EQ(sts_endpoint(config, env_.lookup()), "http://localhost:1234");
  config.endpoint_url = "http://cfg:1";
  EXPECT_EQ(sts_endpoint(config, env_.lookup()), "http://cfg:1");
  env_.vars["AWS_ENDPOINT_URL_STS"] = "http://sts-only:2";
  EXPECT_EQ(sts_endpoint(config, env_.lookup()), "http://sts-only:2");
  env_.vars["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"] = "true";
  EXPECT_EQ(sts_endpoint(config, env_.lookup()), "https://sts.us-west-2.amazonaws.com");
}

// ---- container ----

TEST_F(CredentialsHttpTest, ContainerNotConfigured) {
  auto r = make_container_provider(env_.lookup(), transport_)->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST_F(CredentialsHttpTest, ContainerFullUriWithAuthorizationToken) {
  const auto expiration = clock_.wall_now() + std::chrono::hours(6);
  LocalHttpServer ecs([&](const ServedRequest& req) {
    if (req.header("authorization") != kEcsAuth) return CannedResponse{401, {}, "{}"};
    return CannedResponse{
        200, {{"Content-Type", "application/json"}}, metadata_json("ASIAECS", expiration)};
  });
  env_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url() + "/v1/credentials?x=1";
  env_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = kEcsAuth;
  auto c = make_container_provider(env_.lookup(), transport_)->get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ASIAECS");
  EXPECT_EQ(c->secret_access_key, kSecretKey);
  EXPECT_EQ(c->session_token, kSessionToken);
  ASSERT_TRUE(c->expiration.has_value());
  auto reqs = ecs.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "GET");
  EXPECT_EQ(reqs[0].target, "/v1/credentials?x=1");
  EXPECT_EQ(reqs[0].header("authorization"), kEcsAuth);
}

TEST_F(CredentialsHttpTest, ContainerTokenFileWinsAndIsReadEachTime) {
  LocalHttpServer ecs([&](const ServedRequest&) {
    return CannedResponse{
        200, {}, metadata_json("ASIAECS", clock_.wall_now() + std::chrono::hours(1))};
  });
  std::string file = dir_.write("ecs-token", std::string(kEcsAuth) + "\n");
  env_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url() + "/creds";
  env_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "from-env";
  env_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = file;
  auto p = make_container_provider(env_.lookup(), transport_);
  ASSERT_TRUE(p->get().ok());
  dir_.write("ecs-token", "rotated");
  ASSERT_TRUE(p->get().ok());
  auto reqs = ecs.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].header("authorization"), kEcsAuth);
  EXPECT_EQ(reqs[1].header("authorization"), "rotated");
}

TEST_F(CredentialsHttpTest, ContainerErrorsHaveNoSecrets) {
  std::atomic<int> status{403};
  LocalHttpServer ecs([&](const ServedRequest&) {
    return CannedResponse{status.load(), {}, R"({"code":"x","message":"denied"})"};
  });
  env_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url() + "/creds";
  env_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = kEcsAuth;
  auto p = make_container_provider(env_.lookup(), transport_);
  auto r = p->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("HTTP 403"), std::string::npos);
  expect_no_secrets(r.status());
  status = 500;
  r = p->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  expect_no_secrets(r.status());

  env_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = std::string(kEcsAuth) + "\r\nX-Evil: 1";
  r = p->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  expect_no_secrets(r.status());
}

TEST_F(CredentialsHttpTest, ContainerRelativeUriAndHostRules) {
  auto fake = std::make_shared<RecordingTransport>();
  fake->answer = [&](const HttpRequest&) {
    HttpResponse resp;
    resp.status = 200;
    resp.body = metadata_json("ASIAREL", clock_.wall_now() + std::chrono::hours(1));
    return Result<HttpResponse>(resp);
  };
  auto p = make_container_provider(env_.lookup(), fake);

  env_.vars["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"] = "/v2/credentials/abc";
  env_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://127.0.0.1:9/ignored";  // relative wins
  ASSERT_TRUE(p->get().ok());
  ASSERT_EQ(fake->sent.size(), 1u);
  EXPECT_EQ(fake->sent[0].url, "http://169.254.170.2/v2/credentials/abc");
  EXPECT_EQ(fake->sent[0].method, "GET");
  env_.vars.erase("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");

  for (const char* ok_url :
       {"https://creds.example.com/x", "http://169.254.170.2/x", "http://169.254.170.23/v1/x",
        "http://127.0.0.5:8080/x", "http://localhost/x", "http://[::1]:80/x",
        "http://[fd00:ec2::23]/x"}) {
    env_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ok_url;
    auto r = p->get();
    EXPECT_TRUE(r.ok()) << ok_url << ": " << r.status();
    EXPECT_EQ(fake->sent.back().url, ok_url);
  }
  const std::size_t sent = fake->sent.size();
  for (const char* bad_url : {"http://creds.example.com/x", "http://169.254.169.254/x",
                              "http://127.0.0.1.evil.com/x", "ftp://127.0.0.1/x", "not a url"}) {
    env_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = bad_url;
    auto r = p->get();
    ASSERT_FALSE(r.ok()) << bad_url;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad_url;
  }
  EXPECT_EQ(fake->sent.size(), sent);  // nothing was sent to a refused host
}

// ---- instance metadata ----

// An IMDSv2 stand-in: a token from PUT, required on the GETs.
class FakeImds {
 public:
  explicit FakeImds(const Clock& clock) : clock_(clock) {}
  CannedResponse handle(const ServedRequest& req) {
    std::lock_guard<std::mutex> lock(mu_);
    if (req.method == "PUT" && req.target == "/latest/api/token") {
      if (req.header("x-aws-ec2-metadata-token-ttl-seconds").empty()) return {400, {}, ""};
      return {200, {}, "IMDS-SESSION-TOKEN"};
    }
    if (req.header("x-aws-ec2-metadata-token") != "IMDS-SESSION-TOKEN") return {401, {}, ""};
    if (req.method == "GET" && req.target == "/latest/meta-data/iam/security-credentials/") {
      if (role.empty()) return {404, {}, ""};
      return {200, {}, role + "\n"};
    }
    if (req.method == "GET" && req.target == "/latest/meta-data/iam/security-credentials/" + role) {
      ++served;
      return {200,
              {},
              metadata_json("ASIAIMDS" + std::to_string(served), clock_.wall_now() + lifetime)};
    }
    return {404, {}, ""};
  }
  std::string role = "my-instance-role";
  std::chrono::minutes lifetime{60};
  int served = 0;

 private:
  const Clock& clock_;
  std::mutex mu_;
};

TEST_F(CredentialsHttpTest, ImdsV2TokenFirstThenRoleThenCredentials) {
  FakeImds imds(clock_);
  LocalHttpServer server([&](const ServedRequest& r) { return imds.handle(r); });
  env_.vars["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = server.url() + "/";
  auto c = make_imds_provider(env_.lookup(), transport_)->get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ASIAIMDS1");
  EXPECT_EQ(c->session_token, kSessionToken);
  ASSERT_TRUE(c->expiration.has_value());

  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].method, "PUT");
  EXPECT_EQ(reqs[0].target, "/latest/api/token");
  EXPECT_EQ(reqs[0].header("x-aws-ec2-metadata-token-ttl-seconds"), "21600");
  EXPECT_EQ(reqs[1].method, "GET");
  EXPECT_EQ(reqs[1].target, "/latest/meta-data/iam/security-credentials/");
  EXPECT_EQ(reqs[1].header("x-aws-ec2-metadata-token"), "IMDS-SESSION-TOKEN");
  EXPECT_EQ(reqs[2].target, "/latest/meta-data/iam/security-credentials/my-instance-role");
  EXPECT_EQ(reqs[2].header("x-aws-ec2-metadata-token"), "IMDS-SESSION-TOKEN");
}

TEST_F(CredentialsHttpTest, ImdsUsesShortTimeouts) {
  auto fake = std::make_shared<RecordingTransport>();
  auto r = make_imds_provider(env_.lookup(), fake)->get();
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(fake->sent.size(), 1u);
  EXPECT_EQ(fake->sent[0].url, "http://169.254.169.254/latest/api/token");
  EXPECT_EQ(fake->sent[0].method, "PUT");
  EXPECT_EQ(fake->sent[0].timeout, std::chrono::milliseconds(1000));

  env_.vars["AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"] = "IPv6";
  fake->answer = [](const HttpRequest& req) {
    HttpResponse resp;
    resp.status = req.method == "PUT" ? 200 : 404;
    resp.body = "t";
    return Result<HttpResponse>(resp);
  };
  r = make_imds_provider(env_.lookup(), fake)->get();
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(fake->sent.size(), 3u);
  EXPECT_EQ(fake->sent[1].url, "http://[fd00:ec2::254]/latest/api/token");
  EXPECT_EQ(fake->sent[2].timeout, std::chrono::milliseconds(2000));
}

TEST_F(CredentialsHttpTest, ImdsUnreachableIsNotFoundWithAnExplanation) {
  std::string dead_url;
  {
    LocalHttpServer gone([](const ServedRequest&) { return CannedResponse{}; });
    dead_url = gone.url();
  }
  env_.vars["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = dead_url;
  auto r = make_imds_provider(env_.lookup(), transport_)->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("no instance metadata service reachable at " + dead_url),
            std::string::npos)
      << r.status();
}

TEST_F(CredentialsHttpTest, ImdsFailureAfterSuccessIsRetryable) {
  FakeImds imds(clock_);
  std::atomic<bool> down{false};
  LocalHttpServer server([&](const ServedRequest& r) {
    if (down) {
      CannedResponse resp;
      resp.close_without_response = true;
      return resp;
    }
    return imds.handle(r);
  });
  env_.vars["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = server.url();
  auto p = make_imds_provider(env_.lookup(), transport_);
  ASSERT_TRUE(p->get().ok());
  down = true;
  auto r = p->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

TEST_F(CredentialsHttpTest, ImdsNoRoleAndDisabled) {
  FakeImds imds(clock_);
  imds.role.clear();
  LocalHttpServer server([&](const ServedRequest& r) { return imds.handle(r); });
  env_.vars["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = server.url();
  auto r = make_imds_provider(env_.lookup(), transport_)->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("no IAM role"), std::string::npos);

  const std::size_t before = server.requests().size();
  env_.vars["AWS_EC2_METADATA_DISABLED"] = "TRUE";
  r = make_imds_provider(env_.lookup(), transport_)->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(server.requests().size(), before);
}

TEST_F(CredentialsHttpTest, ImdsV1FallbackOnlyWhenAllowed) {
  LocalHttpServer server([&](const ServedRequest& req) {
    if (req.method == "PUT") return CannedResponse{405, {}, ""};
    if (req.target == "/latest/meta-data/iam/security-credentials/") {
      return CannedResponse{200, {}, "v1role"};
    }
    return CannedResponse{
        200, {}, metadata_json("ASIAV1", clock_.wall_now() + std::chrono::hours(1))};
  });
  env_.vars["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = server.url();
  auto c = make_imds_provider(env_.lookup(), transport_)->get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ASIAV1");
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_TRUE(reqs[1].header("x-aws-ec2-metadata-token").empty());

  env_.vars["AWS_EC2_METADATA_V1_DISABLED"] = "true";
  auto r = make_imds_provider(env_.lookup(), transport_)->get();
  ASSERT_FALSE(r.ok());
}

// A container one hop past the instance's hop limit: the token request's answer never comes
// back (a timeout), while IMDSv1 answers. Unless IMDSv1 is disabled, it is used; and when
// neither answers, there is no instance metadata service (the chain moves on).
TEST_F(CredentialsHttpTest, ImdsV1FallbackWhenTheTokenRequestTimesOut) {
  auto fake = std::make_shared<RecordingTransport>();
  bool v1_answers = true;
  fake->answer = [&](const HttpRequest& req) -> Result<HttpResponse> {
    if (req.method == "PUT") return Status(StatusCode::kUnavailable, "timed out").as_timeout();
    if (!v1_answers) return Status(StatusCode::kUnavailable, "timed out").as_timeout();
    HttpResponse resp;
    resp.status = 200;
    resp.body = req.url.ends_with("/security-credentials/")
                    ? std::string("v1role")
                    : metadata_json("ASIAV1", clock_.wall_now() + std::chrono::hours(1));
    return resp;
  };
  auto c = make_imds_provider(env_.lookup(), fake)->get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ASIAV1");
  ASSERT_EQ(fake->sent.size(), 3u);
  for (std::size_t i = 1; i < 3; ++i) {
    for (const auto& [name, value] : fake->sent[i].headers) {
      EXPECT_NE(name, "X-aws-ec2-metadata-token") << "IMDSv1: no token";
    }
  }

  v1_answers = false;
  auto none = make_imds_provider(env_.lookup(), fake)->get();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound) << none.status();
  EXPECT_NE(none.status().message().find("no instance metadata service reachable"),
            std::string::npos)
      << none.status();

  v1_answers = true;
  env_.vars["AWS_EC2_METADATA_V1_DISABLED"] = "true";
  auto v2_only = make_imds_provider(env_.lookup(), fake)->get();
  ASSERT_FALSE(v2_only.ok());
  EXPECT_EQ(v2_only.status().code(), StatusCode::kNotFound) << v2_only.status();
}

// The token request times out and the instance requires IMDSv2 (the request without a token
// is refused with 401): the error names the timed-out token request and the hop limit, and is
// retried. It read as an IAM problem ("answered the role request with HTTP 401"), final, so a
// slow answer at boot stopped the worker from starting.
TEST_F(CredentialsHttpTest, ATimedOutTokenOnAnInstanceThatRequiresImdsV2IsRetriedAndExplained) {
  auto fake = std::make_shared<RecordingTransport>();
  fake->answer = [&](const HttpRequest& req) -> Result<HttpResponse> {
    if (req.method == "PUT") return Status(StatusCode::kUnavailable, "timed out").as_timeout();
    HttpResponse resp;
    resp.status = 401;
    return resp;
  };
  auto c = make_imds_provider(env_.lookup(), fake)->get();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable) << c.status();
  EXPECT_NE(c.status().message().find("session token request (IMDSv2) got no answer"),
            std::string::npos)
      << c.status();
  EXPECT_NE(c.status().message().find("hop limit"), std::string::npos) << c.status();
}

TEST_F(CredentialsHttpTest, CachedImdsCredentialsRefreshNearExpiry) {
  FakeImds imds(clock_);
  LocalHttpServer server([&](const ServedRequest& r) { return imds.handle(r); });
  env_.vars["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = server.url();
  auto p = make_caching_provider(make_imds_provider(env_.lookup(), transport_), clock_);

  auto first = p->get();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->access_key_id, "ASIAIMDS1");
  EXPECT_EQ(server.requests().size(), 3u);

  clock_.advance(std::chrono::minutes(54));  // 6 minutes left: still cached
  EXPECT_EQ(p->get()->access_key_id, "ASIAIMDS1");
  EXPECT_EQ(server.requests().size(), 3u);

  clock_.advance(std::chrono::minutes(2));  // 4 minutes left: refresh
  auto second = p->get();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->access_key_id, "ASIAIMDS2");
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 6u);
  EXPECT_EQ(reqs[3].method, "PUT");  // a new session token first
  EXPECT_EQ(p->get()->access_key_id, "ASIAIMDS2");
  EXPECT_EQ(server.requests().size(), 6u);
}

}  // namespace
}  // namespace kcl::aws::credentials_internal
