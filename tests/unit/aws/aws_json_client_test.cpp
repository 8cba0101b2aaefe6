// AwsJsonClient: request shape and signing, the retry loop (deterministic: a scripted
// transport, a ManualClock and a sleep hook that advances it), and bad input end to end
// through the real curl transport against LocalHttpServer.
#include "aws/aws_json_client.h"

#include <gtest/gtest.h>

#include "aws/json_util.h"
#include "aws/retry.h"
#include "aws/sigv4.h"
#include "aws_test_util.h"
#include "support/local_http_server.h"

namespace kcl::aws {
namespace {

using kcl::testing::CannedResponse;
using kcl::testing::LocalHttpServer;
using kcl::testing::ServedRequest;
using std::chrono::milliseconds;
using test::contains;
using test::FixedCredentials;
using test::ScriptedTransport;

std::string header_of(const Headers& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      return v;
    }
  }
  return {};
}

std::string signature_of(const std::string& authorization) {
  auto pos = authorization.find("Signature=");
  return pos == std::string::npos ? std::string() : authorization.substr(pos + 10);
}

// The secret key, the session token and every signature sent must not appear in `text`.
void expect_no_secrets(const std::string& text, const std::vector<std::string>& signatures) {
  EXPECT_FALSE(contains(text, test::kSecretKey)) << text;
  EXPECT_FALSE(contains(text, test::kSessionToken)) << text;
  for (const auto& sig : signatures) {
    ASSERT_EQ(sig.size(), 64u);
    EXPECT_FALSE(contains(text, sig)) << text;
  }
}

// No 12 characters in a row of `secret` appear in `text` (a cut copy would show them).
void expect_no_piece_of(const std::string& text, const std::string& secret) {
  for (std::size_t at = 0; at + 12 <= secret.size(); ++at) {
    ASSERT_EQ(text.find(secret.substr(at, 12)), std::string::npos)
        << "a piece of a secret in: " << text;
  }
}

std::vector<std::string> signatures(const std::vector<HttpRequest>& sent) {
  std::vector<std::string> out;
  for (const auto& r : sent) out.push_back(signature_of(header_of(r.headers, "Authorization")));
  return out;
}

std::vector<std::string> signatures(const std::vector<ServedRequest>& served) {
  std::vector<std::string> out;
  for (const auto& r : served) out.push_back(signature_of(r.header("authorization")));
  return out;
}

// ---------------------------------------------------------------------------------------
// Deterministic retry-loop tests.

class ScriptedClientTest : public ::testing::Test {
 protected:
  ScriptedClientTest() {
    config_.region = "us-east-1";
    config_.kinesis_endpoint_url = "https://kinesis.example.test";
    config_.retry.max_attempts = 5;
    config_.retry.base_delay = milliseconds(50);
    config_.retry.max_backoff = milliseconds(5000);
    config_.retry.call_deadline = milliseconds(60000);
    config_.http.request_timeout = milliseconds(30000);
  }

  std::unique_ptr<AwsJsonClient> client() {
    RetryHooks hooks;
    hooks.sleep = [this](milliseconds d) {
      sleeps_.push_back(d);
      clock_.advance(d);
    };
    hooks.jitter_seed = 1234;
    return make_aws_json_client(kinesis_service(), config_, transport_, creds_, clock_,
                                std::move(hooks));
  }

  static std::string error_body(const std::string& type, const std::string& message) {
    return R"({"__type":"com.amazonaws.kinesis.v20131202#)" + type + R"(","message":")" + message +
           R"("})";
  }

  AwsConfig config_;
  ManualClock clock_;
  std::shared_ptr<ScriptedTransport> transport_ = std::make_shared<ScriptedTransport>();
  std::shared_ptr<FixedCredentials> creds_ = std::make_shared<FixedCredentials>();
  std::vector<milliseconds> sleeps_;
};

TEST_F(ScriptedClientTest, BuildsASignedJsonRequestAndReturnsTheRawBody) {
  transport_->push_response(200, R"({"Shards":[]})");
  auto c = client();
  EXPECT_EQ(c->endpoint(), "https://kinesis.example.test");
  EXPECT_EQ(c->region(), "us-east-1");
  auto r = c->call("ListShards", R"({"StreamName":"s"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, R"({"Shards":[]})");

  auto sent = transport_->sent();
  ASSERT_EQ(sent.size(), 1u);
  const HttpRequest& req = sent[0];
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.url, "https://kinesis.example.test/");
  EXPECT_EQ(req.body, R"({"StreamName":"s"})");
  EXPECT_EQ(req.timeout, milliseconds(30000));
  EXPECT_EQ(header_of(req.headers, "Content-Type"), "application/x-amz-json-1.1");
  EXPECT_EQ(header_of(req.headers, "X-Amz-Target"), "Kinesis_20131202.ListShards");
  EXPECT_EQ(header_of(req.headers, "Host"), "kinesis.example.test");
  EXPECT_EQ(header_of(req.headers, "X-Amz-Security-Token"), test::kSessionToken);
  const std::string date = header_of(req.headers, "X-Amz-Date");
  EXPECT_EQ(date, format_amz_date(clock_.wall_now()));
  const std::string auth = header_of(req.headers, "Authorization");
  EXPECT_EQ(auth.rfind(std::string("AWS4-HMAC-SHA256 Credential=") + test::kAccessKey + "/" +
                           date.substr(0, 8) + "/us-east-1/kinesis/aws4_request, " +
                           "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;"
                           "x-amz-target, Signature=",
                       0),
            0u)
      << auth;

  // The signature is what an independent signing of the same request gives.
  SigningInput in;
  in.path = "/";
  in.headers = {{"Host", "kinesis.example.test"},
                {"Content-Type", "application/x-amz-json-1.1"},
                {"X-Amz-Target", "Kinesis_20131202.ListShards"}};
  in.payload = req.body;
  in.region = "us-east-1";
  in.service = "kinesis";
  in.credentials.access_key_id = test::kAccessKey;
  in.credentials.secret_access_key = test::kSecretKey;
  in.credentials.session_token = test::kSessionToken;
  in.time = clock_.wall_now();
  EXPECT_EQ(signature_of(auth), sign(in).signature);
}

TEST_F(ScriptedClientTest, DynamoDbUsesJson10AndItsTarget) {
  config_.dynamodb_endpoint_url = "http://localhost:8000";
  transport_->push_response(200, "{}");
  auto c = make_aws_json_client(dynamodb_service(), config_, transport_, creds_, clock_);
  ASSERT_TRUE(c->call("GetItem", "{}").ok());
  auto sent = transport_->sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].url, "http://localhost:8000/");
  EXPECT_EQ(header_of(sent[0].headers, "Host"), "localhost:8000");
  EXPECT_EQ(header_of(sent[0].headers, "Content-Type"), "application/x-amz-json-1.0");
  EXPECT_EQ(header_of(sent[0].headers, "X-Amz-Target"), "DynamoDB_20120810.GetItem");
  EXPECT_TRUE(contains(header_of(sent[0].headers, "Authorization"), "/dynamodb/aws4_request"));
}

TEST_F(ScriptedClientTest, RetriesServerErrorsThenSucceeds) {
  transport_->push_response(500, error_body("InternalFailure", "oops"));
  transport_->push_response(503, "");
  transport_->push_response(200, "{\"ok\":1}");
  auto r = client()->call("GetRecords", "{}");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "{\"ok\":1}");
  EXPECT_EQ(transport_->sent().size(), 3u);
  ASSERT_EQ(sleeps_.size(), 2u);
  EXPECT_LE(sleeps_[0], milliseconds(50));
  EXPECT_LE(sleeps_[1], milliseconds(100));
  // A fresh date and signature on every attempt (the clock moved).
  EXPECT_EQ(creds_->calls(), 3);
}

TEST_F(ScriptedClientTest, RetriesThrottlingAndTransportFailures) {
  transport_->push_response(400, error_body("ProvisionedThroughputExceededException", "slow"));
  transport_->push_response(400, R"({"__type":"LimitExceededException"})");
  transport_->push_error(Status(StatusCode::kUnavailable, "POST https://x/: timed out"));
  transport_->push_response(429, "");
  transport_->push_response(200, "{}");
  auto r = client()->call("GetRecords", "{}");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(transport_->sent().size(), 5u);
  ASSERT_EQ(sleeps_.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_LE(sleeps_[i], backoff_ceiling(config_.retry, i));
}

TEST_F(ScriptedClientTest, GivesUpAfterMaxAttemptsWithAttemptsCounted) {
  for (int i = 0; i < 5; ++i) {
    transport_->push_response(503, error_body("ServiceUnavailable", "down"),
                              {{"x-amzn-requestid", "rid-" + std::to_string(i)}});
  }
  auto r = client()->call("PutRecord", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(r.status().aws());
  EXPECT_EQ(r.status().aws()->attempts, 5);
  EXPECT_EQ(r.status().aws()->http_status, 503);
  EXPECT_EQ(r.status().aws()->error_type, "ServiceUnavailable");
  EXPECT_EQ(r.status().aws()->request_id, "rid-4");
  EXPECT_EQ(r.status().aws()->operation, "Kinesis.PutRecord");
  EXPECT_TRUE(contains(r.status().message(), "gave up after 5 attempts")) << r.status();
  EXPECT_EQ(transport_->sent().size(), 5u);
  EXPECT_EQ(sleeps_.size(), 4u);
  expect_no_secrets(r.status().to_string(), signatures(transport_->sent()));
}

TEST_F(ScriptedClientTest, DoesNotRetryClientErrors) {
  const std::pair<const char*, StatusCode> cases[] = {
      {"ValidationException", StatusCode::kInvalidArgument},
      {"ConditionalCheckFailedException", StatusCode::kConditionFailed},
      {"ResourceNotFoundException", StatusCode::kNotFound},
      {"ExpiredIteratorException", StatusCode::kExpiredIterator},
      {"InvalidSignatureException", StatusCode::kPermissionDenied},
  };
  for (const auto& [type, code] : cases) {
    auto t = std::make_shared<ScriptedTransport>();
    t->push_response(400, error_body(type, "nope"));
    RetryHooks hooks;
    hooks.sleep = [this](milliseconds d) { sleeps_.push_back(d); };
    auto c = make_aws_json_client(kinesis_service(), config_, t, creds_, clock_, hooks);
    auto r = c->call("GetRecords", "{}");
    ASSERT_FALSE(r.ok()) << type;
    EXPECT_EQ(r.status().code(), code) << r.status();
    EXPECT_EQ(r.status().aws()->attempts, 1);
    EXPECT_EQ(t->sent().size(), 1u) << type;
  }
  EXPECT_TRUE(sleeps_.empty());
}

TEST_F(ScriptedClientTest, DoesNotRetryTlsOrBadUrlTransportErrors) {
  transport_->push_error(Status(StatusCode::kPermissionDenied, "POST https://x/: TLS problem"));
  auto r = client()->call("GetRecords", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(contains(r.status().message(), "Kinesis.GetRecords: POST https://x/: TLS"))
      << r.status();
  EXPECT_EQ(transport_->sent().size(), 1u);
}

TEST_F(ScriptedClientTest, CallDeadlineBoundsTheWholeCall) {
  config_.retry.call_deadline = milliseconds(1000);
  config_.retry.max_attempts = 20;
  config_.retry.base_delay = milliseconds(1);
  config_.retry.max_backoff = milliseconds(1);
  std::vector<milliseconds> timeouts;
  for (int i = 0; i < 20; ++i) {
    transport_->push([&](const HttpRequest& req) -> Result<HttpResponse> {
      timeouts.push_back(req.timeout);
      clock_.advance(milliseconds(300));  // each attempt takes 300 ms
      HttpResponse resp;
      resp.status = 500;
      return resp;
    });
  }
  auto r = client()->call("GetRecords", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "call deadline of 1000 ms")) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "HTTP 500")) << r.status();
  ASSERT_TRUE(r.status().aws());
  EXPECT_EQ(r.status().aws()->http_status, 500);
  const int attempts = r.status().aws()->attempts;
  EXPECT_EQ(attempts, static_cast<int>(transport_->sent().size()));
  EXPECT_GE(attempts, 3);
  EXPECT_LE(attempts, 4);
  // Each attempt's timeout is at most what was left of the deadline.
  ASSERT_EQ(timeouts.size(), static_cast<std::size_t>(attempts));
  EXPECT_EQ(timeouts[0], milliseconds(1000));
  for (std::size_t i = 1; i < timeouts.size(); ++i) {
    EXPECT_LE(timeouts[i], milliseconds(1000) - milliseconds(300) * static_cast<int>(i));
    EXPECT_GT(timeouts[i], milliseconds(0));
  }
}

TEST_F(ScriptedClientTest, CallOptionsOverrideTimeoutAndAttempts) {
  transport_->push_response(500, "");
  auto r = client()->call("GetShardIterator", "{}", CallOptions{milliseconds(123), 1});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  auto sent = transport_->sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].timeout, milliseconds(123));
  EXPECT_TRUE(contains(r.status().message(), "gave up after 1 attempt)")) << r.status();
}

TEST_F(ScriptedClientTest, CallOptionsDeadlineOverridesTheConfiguredOne) {
  for (int i = 0; i < 5; ++i) transport_->push_response(503, "");
  CallOptions options;
  options.deadline = milliseconds(60);  // room for about one backoff of up to 50 ms
  auto r = client()->call("DescribeStreamSummary", "{}", options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "call deadline of 60 ms")) << r.status();
  EXPECT_LT(transport_->sent().size(), 5u);
}

// The retry quota of the standard mode: a client whose calls keep failing stops retrying
// (each call then costs the service one attempt), and successes refill it.
TEST_F(ScriptedClientTest, RetryQuotaStopsRetriesInAStormAndRefillsOnSuccess) {
  auto c = client();
  RetryPolicy* policy = c->retry_policy();
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(policy->quota().available(), RetryQuota::kCapacity);
  // Every call fails 5 times (4 retries = 20 tokens): 25 calls spend the 500 tokens.
  int calls = 0;
  while (policy->quota().available() >= RetryQuota::kRetryCost && calls < 200) {
    for (int i = 0; i < 5; ++i) transport_->push_response(503, "");
    ASSERT_FALSE(c->call("GetRecords", "{}").ok());
    ++calls;
  }
  EXPECT_EQ(calls, RetryQuota::kCapacity / (4 * RetryQuota::kRetryCost));
  const std::size_t sent_before = transport_->sent().size();
  transport_->push_response(503, "");
  auto r = c->call("GetRecords", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(transport_->sent().size(), sent_before + 1);  // no retry
  EXPECT_TRUE(contains(r.status().message(), "retry quota")) << r.status();
  // Successes put tokens back, one each when they needed no retry.
  for (int i = 0; i < 10; ++i) {
    transport_->push_response(200, "{}");
    ASSERT_TRUE(c->call("GetRecords", "{}").ok());
  }
  EXPECT_EQ(policy->quota().available(), 10);
  transport_->push_response(503, "");
  transport_->push_response(200, "{}");
  ASSERT_TRUE(c->call("GetRecords", "{}").ok());  // one retry again, paid for and refunded
  EXPECT_EQ(policy->quota().available(), 10);
}

TEST(RetryPolicyTest, OnlyRetryableFailuresGetADelayWithinTheCeiling) {
  RetryConfig config;
  RetryPolicy policy(config, 7);
  int taken = 0;
  EXPECT_FALSE(policy.next_delay(Status(StatusCode::kInvalidArgument, "bad"), 0, &taken));
  EXPECT_EQ(taken, 0);
  for (int retry = 0; retry < 8; ++retry) {
    auto d = policy.next_delay(Status(StatusCode::kUnavailable, "throttled"), retry, &taken);
    ASSERT_TRUE(d);
    EXPECT_LE(*d, backoff_ceiling(config, retry));
  }
  EXPECT_EQ(taken, 8 * RetryQuota::kRetryCost);
  policy.on_success(taken);
  EXPECT_EQ(policy.quota().available(), RetryQuota::kCapacity);
}

TEST_F(ScriptedClientTest, CredentialFailuresCarryOperationContext) {
  creds_->fail_with(Status(StatusCode::kNotFound, "no credentials in the chain"));
  auto r = client()->call("ListShards", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(contains(r.status().message(), "Kinesis.ListShards")) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "no credentials in the chain")) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "fixed-test")) << r.status();
  EXPECT_TRUE(transport_->sent().empty());

  // A transient credentials failure (the metadata service is down) is retried.
  creds_->fail_with(Status(StatusCode::kUnavailable, "IMDS timed out"));
  auto r2 = client()->call("ListShards", "{}");
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r2.status().aws()->attempts, 5);
}

TEST_F(ScriptedClientTest, CorrectsClockSkewOnceFromTheDateHeader) {
  // The server's clock is two hours ahead of ours.
  const auto server_now = clock_.wall_now() + std::chrono::hours(2);
  std::time_t t = std::chrono::system_clock::to_time_t(server_now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char date[64];
  std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  transport_->push_response(400,
                            error_body("InvalidSignatureException",
                                       "Signature expired: 20200101T000000Z is now "
                                       "earlier than ..."),
                            {{"date", date}});
  transport_->push_response(200, "{}");
  auto r = client()->call("ListShards", "{}");
  ASSERT_TRUE(r.ok()) << r.status();
  auto sent = transport_->sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_TRUE(sleeps_.empty());  // retried at once
  EXPECT_EQ(header_of(sent[1].headers, "X-Amz-Date"), format_amz_date(server_now));
}

// "Sun, 06 Nov 1994 08:49:37 GMT" for `t`.
std::string http_date(Clock::WallTime t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char date[64];
  std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return date;
}

TEST_F(ScriptedClientTest, AClockSetRightAfterASkewWasCorrectedIsSignedRightAgain) {
  // Our clock is two hours behind: corrected from the Date header.
  transport_->push_response(
      400, error_body("InvalidSignatureException", "Signature expired: ... is now earlier"),
      {{"date", http_date(clock_.wall_now() + std::chrono::hours(2))}});
  transport_->push_response(200, "{}");
  auto c = client();
  ASSERT_TRUE(c->call("ListShards", "{}").ok());
  // Then the host's clock is set right (NTP steps it): requests signed two hours ahead are
  // refused as not yet current, and the correction is measured again.
  clock_.skew_wall(std::chrono::hours(2));
  transport_->push_response(
      400, error_body("InvalidSignatureException", "Signature not yet current: ... is still later"),
      {{"date", http_date(clock_.wall_now())}});
  transport_->push_response(200, "{}");
  auto r = c->call("ListShards", "{}");
  ASSERT_TRUE(r.ok()) << r.status();
  auto sent = transport_->sent();
  ASSERT_EQ(sent.size(), 4u);
  EXPECT_EQ(header_of(sent[3].headers, "X-Amz-Date"), format_amz_date(clock_.wall_now()));
}

TEST_F(ScriptedClientTest, ACallOfOneAttemptMeasuresTheSkewForTheNextCall) {
  const auto server_now = clock_.wall_now() + std::chrono::hours(2);
  transport_->push_response(
      400, error_body("InvalidSignatureException", "Signature expired: ... is now earlier"),
      {{"date", http_date(server_now)}});
  transport_->push_response(200, "{}");
  auto c = client();
  CallOptions once;
  once.max_attempts = 1;
  auto first = c->call("GetRecords", "{}", once);
  ASSERT_FALSE(first.ok()) << "no attempt left to retry";
  // Not an access error that would end a shard's reading: the caller's next call is signed
  // right.
  EXPECT_EQ(first.status().code(), StatusCode::kUnavailable) << first.status();
  EXPECT_NE(first.status().message().find("clock skew measured"), std::string::npos)
      << first.status();
  ASSERT_TRUE(c->call("GetRecords", "{}", once).ok());
  auto sent = transport_->sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(header_of(sent[1].headers, "X-Amz-Date"), format_amz_date(server_now));
}

// Calls in flight together when the clock steps: the first rejection to come back measures the
// skew; the others, signed with the old correction, were judged against the new one, found
// "within minutes" and failed as access errors (a shard's reading ended). Now a rejection of
// a request signed before the correction changed is mended too.
TEST_F(ScriptedClientTest, ARejectionOfACallSignedBeforeAnotherMeasuredTheSkewIsMendedToo) {
  const auto server_now = clock_.wall_now() + std::chrono::hours(2);
  auto c = client();
  CallOptions once;
  once.max_attempts = 1;
  Result<std::string> inner = Status(StatusCode::kInternal, "not run");
  transport_->push([&](const HttpRequest&) -> Result<HttpResponse> {
    // While this call is in flight, another one signed with the same correction is refused
    // first and measures the skew.
    transport_->push_response(
        400, error_body("InvalidSignatureException", "Signature expired: ... is now earlier"),
        {{"date", http_date(server_now)}});
    inner = c->call("GetRecords", "{}", once);
    HttpResponse refused;
    refused.status = 400;
    refused.body = error_body("InvalidSignatureException", "Signature expired: ... is now earlier");
    refused.headers = {{"date", http_date(server_now)}};
    return refused;
  });
  auto outer = c->call("GetRecords", "{}", once);
  ASSERT_FALSE(inner.ok());
  EXPECT_EQ(inner.status().code(), StatusCode::kUnavailable) << inner.status();
  ASSERT_FALSE(outer.ok());
  EXPECT_EQ(outer.status().code(), StatusCode::kUnavailable)
      << "an access error would end the shard's reading: " << outer.status();
  EXPECT_NE(outer.status().message().find("clock skew measured"), std::string::npos)
      << outer.status();
  transport_->push_response(200, "{}");
  ASSERT_TRUE(c->call("GetRecords", "{}", once).ok());
  EXPECT_EQ(header_of(transport_->sent().back().headers, "X-Amz-Date"),
            format_amz_date(server_now));
}

TEST_F(ScriptedClientTest, CredentialsRefusedAsExpiredAreFetchedAnewAndTriedAtOnce) {
  transport_->push_response(400, error_body("ExpiredTokenException",
                                            "The security token included in the request is "
                                            "expired"));
  transport_->push_response(200, "{}");
  auto r = client()->call("ListShards", "{}");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(transport_->sent().size(), 2u);
  EXPECT_TRUE(sleeps_.empty()) << "tried again at once";
  EXPECT_EQ(creds_->rejected(), 1) << "the provider was told to drop them";
  EXPECT_EQ(creds_->calls(), 2) << "and asked again";
}

TEST_F(ScriptedClientTest, CredentialsRefusedAsExpiredInACallOfOneAttemptFailItForNow) {
  transport_->push_response(400, error_body("ExpiredTokenException",
                                            "The security token included in the request is "
                                            "expired"));
  transport_->push_response(200, "{}");
  auto c = client();
  CallOptions once;
  once.max_attempts = 1;
  auto first = c->call("GetRecords", "{}", once);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), StatusCode::kUnavailable) << first.status();
  EXPECT_EQ(creds_->rejected(), 1);
  ASSERT_TRUE(c->call("GetRecords", "{}", once).ok());
  EXPECT_EQ(creds_->calls(), 2) << "the next call asked for credentials anew";
}

TEST_F(ScriptedClientTest, ServerTextEchoingSecretsIsRedacted) {
  transport_->push([](const HttpRequest& req) -> Result<HttpResponse> {
    HttpResponse resp;
    resp.status = 403;
    std::string auth = header_of(req.headers, "Authorization");
    resp.body = R"({"__type":"IncompleteSignature","message":"bad: )" + auth + " " +
                test::kSecretKey + " " + test::kSessionToken + R"("})";
    return resp;
  });
  auto r = client()->call("ListShards", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(contains(r.status().message(), "[redacted]")) << r.status();
  expect_no_secrets(r.status().to_string(), signatures(transport_->sent()));
}

// A secret echoed where the message or the snippet is cut: it was redacted only after the
// cut, when the cut copy no longer matched, so its first part reached the message.
TEST_F(ScriptedClientTest, ASecretEchoedAcrossTheCutOfTheServersTextIsRedactedToo) {
  const std::string token = test::kSessionToken;
  // Where the cut falls inside the token: the snippet of a body that is not JSON (200
  // characters) and the message of one that is (500).
  const std::string html =
      "<html>" + std::string(200 - 6 - token.size() / 2, 'p') + token + "</html>";
  const std::string json_message = std::string(500 - token.size() / 2, 'm') + token;
  transport_->push_response(502, html);
  transport_->push_response(400, error_body("ValidationException", json_message));
  config_.retry.max_attempts = 1;
  auto c = client();
  for (int i = 0; i < 2; ++i) {
    auto r = c->call("ListShards", "{}");
    ASSERT_FALSE(r.ok());
    expect_no_piece_of(r.status().to_string(), token);
  }
}

// What a streaming call (SubscribeToShard) keeps out of the messages about its answer: the
// session token and the signature its signed request carries.
TEST_F(ScriptedClientTest, ASignedRequestsSecretsAreFoundAndKeptOutOfItsErrorsText) {
  auto request = client()->signed_request("SubscribeToShard", "{}");
  ASSERT_TRUE(request.ok()) << request.status();
  const std::vector<std::string> secrets = request_secrets(*request);
  ASSERT_EQ(secrets.size(), 2u);
  EXPECT_EQ(secrets[0].size() + secrets[1].size(),
            std::string(test::kSessionToken).size() + signatures({*request}).front().size());
  HttpResponse echo;
  echo.status = 403;
  echo.body = std::string("<html>token ") + test::kSessionToken +
              " signature=" + signatures({*request}).front() + std::string(300, 'x');
  const std::vector<std::string_view> views(secrets.begin(), secrets.end());
  const AwsErrorBody e = parse_aws_error(echo, views);
  EXPECT_NE(e.snippet.find("[redacted]"), std::string::npos) << e.snippet;
  expect_no_piece_of(e.snippet, signatures({*request}).front());
  expect_no_piece_of(e.snippet, test::kSessionToken);
}

TEST_F(ScriptedClientTest, ConfigurationErrorsAreReportedByEveryCall) {
  config_.kinesis_endpoint_url = "kinesis.example.test";  // no scheme
  auto c = client();
  auto r = c->call("ListShards", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(r.status().to_string(), "Kinesis.ListShards")) << r.status();
  EXPECT_TRUE(contains(r.status().to_string(), "bad endpoint URL")) << r.status();
  EXPECT_TRUE(transport_->sent().empty());
}

// ---------------------------------------------------------------------------------------
// End to end through libcurl against LocalHttpServer: bad input from the network.

class LocalServerClientTest : public ::testing::Test {
 protected:
  std::unique_ptr<AwsJsonClient> client_for(const std::string& endpoint,
                                            HttpConfig http = HttpConfig{}) {
    AwsConfig config;
    config.region = "us-east-1";
    config.kinesis_endpoint_url = endpoint;
    config.retry.max_attempts = 3;
    config.retry.base_delay = milliseconds(1);
    config.retry.max_backoff = milliseconds(5);
    http.connect_timeout = milliseconds(2000);
    http.request_timeout = milliseconds(10000);
    config.http = http;
    RetryHooks hooks;
    hooks.sleep = [](milliseconds) {};  // no waiting between attempts in these tests
    return make_aws_json_client(kinesis_service(), config, make_curl_transport(config.http),
                                std::make_shared<FixedCredentials>(), SystemClock::instance(),
                                hooks);
  }

  // Operation, endpoint and (when given) the AWS error type are named; no secret leaks.
  static void expect_clear_error(const Status& s, const std::string& endpoint,
                                 const std::string& type,
                                 const std::vector<ServedRequest>& served) {
    const std::string text = s.to_string();
    EXPECT_TRUE(contains(text, "Kinesis.GetRecords")) << text;
    EXPECT_TRUE(contains(text, endpoint)) << text;
    if (!type.empty()) {
      EXPECT_TRUE(contains(text, type)) << text;
      ASSERT_TRUE(s.aws());
      EXPECT_EQ(s.aws()->error_type, type);
    }
    ASSERT_TRUE(s.aws());
    EXPECT_EQ(s.aws()->operation, "Kinesis.GetRecords");
    EXPECT_EQ(s.aws()->endpoint, endpoint);
    expect_no_secrets(text, signatures(served));
  }
};

TEST_F(LocalServerClientTest, SuccessReturnsTheRawBodyAndSendsSignedHeaders) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.body = R"({"Records":[],"NextShardIterator":"it"})";
    return resp;
  });
  auto c = client_for(server.url());
  auto r = c->call("GetRecords", R"({"ShardIterator":"x"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, R"({"Records":[],"NextShardIterator":"it"})");
  auto served = server.requests();
  ASSERT_EQ(served.size(), 1u);
  EXPECT_EQ(served[0].target, "/");
  EXPECT_EQ(served[0].header("host"), "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(served[0].header("x-amz-target"), "Kinesis_20131202.GetRecords");
  EXPECT_EQ(served[0].header("content-type"), "application/x-amz-json-1.1");
  EXPECT_EQ(served[0].header("x-amz-security-token"), test::kSessionToken);
  EXPECT_FALSE(served[0].header("x-amz-date").empty());
  EXPECT_EQ(signatures(served)[0].size(), 64u);
  EXPECT_EQ(served[0].body, R"({"ShardIterator":"x"})");
}

TEST_F(LocalServerClientTest, TruncatedJsonErrorBody) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.status = 400;
    resp.headers = {{"x-amzn-RequestId", "req-trunc"}};
    resp.body = R"({"__type":"com.amazonaws.kinesis.v20131202#ExpiredIteratorException","mess)";
    return resp;
  });
  auto r = client_for(server.url())->call("GetRecords", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kExpiredIterator) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "HTTP 400")) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "not JSON")) << r.status();
  EXPECT_EQ(r.status().aws()->request_id, "req-trunc");
  expect_clear_error(r.status(), server.url(), "ExpiredIteratorException", server.requests());
}

// A call in CBOR: its Content-Type is sent (and signed), and a CBOR error answer is read as
// CBOR ({"__type": "...", "message": "..."}).
TEST_F(LocalServerClientTest, CborCallAndCborErrorBody) {
  std::string error_body = "\xa2\x66__type";
  const std::string type = "com.amazonaws.kinesis#ResourceNotFoundException";
  error_body += static_cast<char>(0x78);
  error_body += static_cast<char>(type.size());
  error_body += type + "\x67message\x72Stream s not found";
  LocalHttpServer server([&](const ServedRequest&) {
    CannedResponse resp;
    resp.status = 400;
    resp.headers = {{"Content-Type", "application/x-amz-cbor-1.1"}};
    resp.body = error_body;
    return resp;
  });
  CallOptions options;
  options.content_type = "application/x-amz-cbor-1.1";
  auto r = client_for(server.url())->call("GetRecords", std::string("\xa0", 1), options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "Stream s not found")) << r.status();
  EXPECT_EQ(r.status().aws()->error_type, "ResourceNotFoundException");
  const auto served = server.requests();
  ASSERT_EQ(served.size(), 1u);
  EXPECT_EQ(served[0].header("content-type"), "application/x-amz-cbor-1.1");
  EXPECT_TRUE(contains(served[0].header("authorization"), "content-type")) << "signed";

  // A CBOR error body cut short: named, not read as JSON.
  error_body.resize(20);
  r = client_for(server.url())->call("GetRecords", std::string("\xa0", 1), options);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.status().message(), "CBOR error body unreadable")) << r.status();
}

TEST_F(LocalServerClientTest, MalformedJsonErrorBody) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.status = 400;
    resp.body = R"({"__type": ValidationException, message: 'x'})";
    return resp;
  });
  auto r = client_for(server.url())->call("GetRecords", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "HTTP 400")) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "not JSON")) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "ValidationException, message")) << r.status();
  EXPECT_EQ(server.requests().size(), 1u);  // a 4xx is not retried
  expect_clear_error(r.status(), server.url(), "", server.requests());
}

TEST_F(LocalServerClientTest, HtmlErrorPageIsRetriedThenNamedClearly) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.status = 502;
    resp.headers = {{"Content-Type", "text/html"}};
    resp.body = "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>" +
                std::string(5000, '.') + "</body></html>";
    return resp;
  });
  auto r = client_for(server.url())->call("GetRecords", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();
  const std::string& msg = r.status().message();
  EXPECT_TRUE(contains(msg, "HTTP 502")) << msg;
  EXPECT_TRUE(contains(msg, "not JSON")) << msg;
  EXPECT_TRUE(contains(msg, "text/html")) << msg;
  EXPECT_TRUE(contains(msg, "<title>502 Bad Gateway</title>")) << msg;
  EXPECT_LT(msg.size(), 600u) << msg;
  EXPECT_EQ(r.status().aws()->attempts, 3);
  EXPECT_EQ(server.requests().size(), 3u);
  expect_clear_error(r.status(), server.url(), "", server.requests());
}

TEST_F(LocalServerClientTest, ServerErrorsRetriedThenFailingCountAttempts) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.status = 500;
    resp.body = R"({"__type":"InternalFailure","message":"try later"})";
    return resp;
  });
  auto r = client_for(server.url())->call("GetRecords", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().aws()->attempts, 3);
  EXPECT_EQ(r.status().aws()->http_status, 500);
  EXPECT_TRUE(contains(r.status().to_string(), "attempts=3")) << r.status();
  EXPECT_EQ(server.requests().size(), 3u);
  expect_clear_error(r.status(), server.url(), "InternalFailure", server.requests());
}

TEST_F(LocalServerClientTest, ServerErrorThenSuccess) {
  std::atomic<int> calls{0};
  LocalHttpServer server([&](const ServedRequest&) {
    CannedResponse resp;
    if (calls++ < 2) {
      resp.status = 503;
      resp.body = R"({"__type":"ServiceUnavailable"})";
    } else {
      resp.body = R"({"Records":[]})";
    }
    return resp;
  });
  auto r = client_for(server.url())->call("GetRecords", "{}");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, R"({"Records":[]})");
  auto served = server.requests();
  ASSERT_EQ(served.size(), 3u);
  // Each attempt is signed afresh (and all carry the same body).
  for (const auto& s : served) EXPECT_EQ(s.body, "{}");
}

TEST_F(LocalServerClientTest, ConnectionRefused) {
  std::string url;
  {
    LocalHttpServer server([](const ServedRequest&) { return CannedResponse{}; });
    url = server.url();
  }
  auto r = client_for(url)->call("GetRecords", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "connection failed")) << r.status();
  EXPECT_EQ(r.status().aws()->attempts, 3);
  EXPECT_EQ(r.status().aws()->http_status, 0);
  expect_clear_error(r.status(), url, "", {});
}

TEST_F(LocalServerClientTest, TlsToAPlainHttpServerFailsClearlyWithoutHanging) {
  LocalHttpServer server([](const ServedRequest&) { return CannedResponse{}; });
  const std::string url = "https://127.0.0.1:" + std::to_string(server.port());
  auto r = client_for(url)->call("GetRecords", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "TLS")) << r.status();
  EXPECT_EQ(r.status().aws()->attempts, 1);
  expect_clear_error(r.status(), url, "", {});
}

TEST_F(LocalServerClientTest, InvalidSignatureIsPermissionDenied) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.status = 403;
    resp.headers = {{"x-amzn-RequestId", "sig-1"}};
    resp.body = R"({"__type":"InvalidSignatureException","message":"The request signature we )"
                R"(calculated does not match the signature you provided."})";
    return resp;
  });
  auto r = client_for(server.url())->call("GetRecords", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "does not match")) << r.status();
  EXPECT_TRUE(contains(r.status().to_string(), "request-id=sig-1")) << r.status();
  EXPECT_EQ(server.requests().size(), 1u);
  expect_clear_error(r.status(), server.url(), "InvalidSignatureException", server.requests());
}

TEST_F(LocalServerClientTest, ResourceNotFoundIsNotFound) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.status = 400;
    resp.body = R"({"__type":"com.amazonaws.kinesis.v20131202#ResourceNotFoundException",)"
                R"("message":"Stream missing under account 000000000000 not found."})";
    return resp;
  });
  auto r = client_for(server.url())->call("GetRecords", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "Stream missing under account")) << r.status();
  EXPECT_EQ(r.status().aws()->http_status, 400);
  expect_clear_error(r.status(), server.url(), "ResourceNotFoundException", server.requests());
}

TEST_F(LocalServerClientTest, ResponseBiggerThanTheCap) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.body = "{\"Records\":\"" + std::string(2u << 20, 'a') + "\"}";
    return resp;
  });
  HttpConfig http;
  http.max_response_bytes = 1u << 20;
  auto r = client_for(server.url(), http)->call("GetRecords", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "1048576")) << r.status();
  EXPECT_EQ(server.requests().size(), 1u);  // not retried
  expect_clear_error(r.status(), server.url(), "", server.requests());
}

TEST_F(LocalServerClientTest, UnknownRegionAndBadEndpointUrl) {
  {
    AwsConfig config;
    config.region = "moon base 1";
    auto c = make_aws_json_client(kinesis_service(), config, make_curl_transport(config.http),
                                  std::make_shared<FixedCredentials>());
    auto r = c->call("GetRecords", "{}");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(contains(r.status().to_string(), "unknown region")) << r.status();
    EXPECT_TRUE(contains(r.status().to_string(), "Kinesis.GetRecords")) << r.status();
  }
  {
    AwsConfig config;
    config.region = "us-east-1";
    config.kinesis_endpoint_url = "htp:/127.0.0.1:4567";
    auto c = make_aws_json_client(kinesis_service(), config, make_curl_transport(config.http),
                                  std::make_shared<FixedCredentials>());
    auto r = c->call("GetRecords", "{}");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(contains(r.status().to_string(), "bad endpoint URL 'htp:/127.0.0.1:4567'"))
        << r.status();
    EXPECT_TRUE(contains(r.status().to_string(), "Kinesis.GetRecords")) << r.status();
  }
  {
    // The convenience factory reports configuration errors before building anything.
    AwsConfig config;
    config.region = "us-east-1";
    config.kinesis_endpoint_url = "http://host:notaport";
    auto r = make_aws_json_client(kinesis_service(), config);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(contains(r.status().message(), "port")) << r.status();
  }
}

TEST_F(LocalServerClientTest, ConcurrentCallsShareOneClient) {
  LocalHttpServer server([](const ServedRequest& req) {
    CannedResponse resp;
    resp.body = req.body;
    return resp;
  });
  auto c = client_for(server.url());
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 15; ++i) {
        std::string body = "{\"n\":" + std::to_string(t * 100 + i) + "}";
        auto r = c->call("GetRecords", body);
        if (r.ok() && *r == body) ++good;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 90);
}

TEST(MakeAwsJsonClientTest, ClientsMadeWithSharedPartsShareTransportAndCredentials) {
  test::ScopedEnv env;  // no AWS_* variable steers the endpoint
  AwsConfig config;
  config.region = "eu-west-1";
  AwsClientParts parts;
  auto kinesis = make_aws_json_client(kinesis_service(), config, &parts);
  ASSERT_TRUE(kinesis.ok()) << kinesis.status();
  const auto transport = parts.transport;
  const auto credentials = parts.credentials;
  ASSERT_TRUE(transport && credentials) << "made on first use";
  auto dynamodb = make_aws_json_client(dynamodb_service(), config, &parts);
  ASSERT_TRUE(dynamodb.ok()) << dynamodb.status();
  EXPECT_EQ(parts.transport, transport) << "one connection pool";
  EXPECT_EQ(parts.credentials, credentials) << "one credentials chain";
  // Without shared parts each client gets its own, and `parts` is untouched.
  auto alone = make_aws_json_client(kinesis_service(), config);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(parts.transport, transport);
}

}  // namespace
}  // namespace kcl::aws
