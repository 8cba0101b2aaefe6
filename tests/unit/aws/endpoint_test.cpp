// resolve_endpoint with environment variables set and unset (restored afterwards) and
// temporary shared config files; AwsConfig::validate.
#include <gtest/gtest.h>

#include "aws/aws_json_client.h"
#include "aws_test_util.h"

namespace kcl::aws {
namespace {

using test::contains;
using test::ScopedEnv;
using test::TempDir;

class EndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // No shared files of the machine running the tests.
    env_.set("AWS_CONFIG_FILE", (dir_.path() / "no-such-config").string());
    env_.set("AWS_SHARED_CREDENTIALS_FILE", (dir_.path() / "no-such-credentials").string());
  }
  ScopedEnv env_;
  TempDir dir_;
};

TEST_F(EndpointTest, ConfiguredRegionGivesTheAwsEndpoint) {
  AwsConfig c;
  c.region = "eu-west-1";
  auto k = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->url, "https://kinesis.eu-west-1.amazonaws.com");
  EXPECT_EQ(k->region, "eu-west-1");
  auto d = resolve_endpoint(c, "dynamodb");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->url, "https://dynamodb.eu-west-1.amazonaws.com");
}

TEST_F(EndpointTest, ChinaRegionsUseTheCnDomain) {
  AwsConfig c;
  c.region = "cn-north-1";
  auto r = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->url, "https://kinesis.cn-north-1.amazonaws.com.cn");
}

TEST_F(EndpointTest, FipsEndpointsAreUsedWhereTheyAreKnownAndNamedElsewhere) {
  AwsConfig c;
  c.region = "us-east-2";
  env_.set("AWS_USE_FIPS_ENDPOINT", "true");
  for (const char* svc : {"kinesis", "dynamodb", "monitoring"}) {
    auto r = resolve_endpoint(c, svc);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->url, std::string("https://") + svc + "-fips.us-east-2.amazonaws.com");
    EXPECT_EQ(r->region, "us-east-2");
  }
  // Where kcl-cpp knows no FIPS endpoint it says so rather than use one that is not.
  c.region = "us-gov-west-1";
  auto gov = resolve_endpoint(c, "kinesis");
  ASSERT_FALSE(gov.ok());
  EXPECT_TRUE(contains(gov.status().message(), "AWS_ENDPOINT_URL_KINESIS")) << gov.status();
  // A named endpoint wins, FIPS or not.
  c.kinesis_endpoint_url = "https://kinesis.us-gov-west-1.amazonaws.com";
  auto named = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->url, "https://kinesis.us-gov-west-1.amazonaws.com");

  // The profile's use_fips_endpoint, when the variable is not set; a value that is neither
  // true nor false is named.
  env_.unset("AWS_USE_FIPS_ENDPOINT");
  dir_.write("config",
             "[default]\nuse_fips_endpoint = TRUE\n[profile odd]\nuse_fips_endpoint=yes\n");
  env_.set("AWS_CONFIG_FILE", (dir_.path() / "config").string());
  AwsConfig p;
  p.region = "us-west-2";
  auto f = resolve_endpoint(p, "dynamodb");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->url, "https://dynamodb-fips.us-west-2.amazonaws.com");
  p.profile = "odd";
  auto odd = resolve_endpoint(p, "dynamodb");
  ASSERT_FALSE(odd.ok());
  EXPECT_TRUE(contains(odd.status().message(), "use_fips_endpoint")) << odd.status();
  env_.set("AWS_USE_FIPS_ENDPOINT", "false");
  auto off = resolve_endpoint(p, "dynamodb");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->url, "https://dynamodb.us-west-2.amazonaws.com");
}

TEST_F(EndpointTest, RegionPrecedence) {
  dir_.write("config", "[default]\nregion = ap-south-1\n[profile other]\nregion=sa-east-1\n");
  env_.set("AWS_CONFIG_FILE", (dir_.path() / "config").string());
  AwsConfig c;
  auto r = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->region, "ap-south-1");  // the default profile's region

  env_.set("AWS_PROFILE", "other");
  r = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->region, "sa-east-1");  // AWS_PROFILE picks the profile

  c.profile = "default";
  r = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->region, "ap-south-1");  // the configured profile wins over AWS_PROFILE

  env_.set("AWS_DEFAULT_REGION", "us-west-1");
  r = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->region, "us-west-1");

  env_.set("AWS_REGION", "us-west-2");
  r = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->region, "us-west-2");

  c.region = "eu-central-1";
  r = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->region, "eu-central-1");
  EXPECT_EQ(r->url, "https://kinesis.eu-central-1.amazonaws.com");
}

TEST_F(EndpointTest, EmptyEnvironmentValuesCountAsUnset) {
  env_.set("AWS_REGION", "");
  env_.set("AWS_DEFAULT_REGION", "us-east-2");
  auto r = resolve_endpoint(AwsConfig{}, "kinesis");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->region, "us-east-2");
}

TEST_F(EndpointTest, NoRegionAnywhereIsInvalidArgument) {
  dir_.write("config", "[default]\noutput = json\n");
  env_.set("AWS_CONFIG_FILE", (dir_.path() / "config").string());
  auto r = resolve_endpoint(AwsConfig{}, "kinesis");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(r.status().message(), "no region")) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "AWS_REGION")) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "--region")) << r.status();
}

TEST_F(EndpointTest, BadRegionShapeIsUnknownRegion) {
  for (const char* bad : {"us east 1", "us-east-1/../x", "-us", "us_east_1", "x.amazonaws.com"}) {
    AwsConfig c;
    c.region = bad;
    auto r = resolve_endpoint(c, "kinesis");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(contains(r.status().message(), "unknown region")) << r.status();
  }
  env_.set("AWS_REGION", "bad region");
  auto r = resolve_endpoint(AwsConfig{}, "kinesis");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.status().message(), "AWS_REGION")) << r.status();
}

TEST_F(EndpointTest, EndpointPrecedence) {
  AwsConfig c;
  c.region = "us-east-1";
  env_.set("AWS_ENDPOINT_URL", "http://global-env:1");
  auto r = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->url, "http://global-env:1");

  c.endpoint_url = "http://global-config:2";
  r = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->url, "http://global-config:2");

  env_.set("AWS_ENDPOINT_URL_KINESIS", "http://kinesis-env:3/");
  r = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->url, "http://kinesis-env:3");  // trailing slash dropped
  auto d = resolve_endpoint(c, "dynamodb");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->url, "http://global-config:2");  // the kinesis variable is not dynamodb's

  c.kinesis_endpoint_url = "http://kinesis-config:4";
  r = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->url, "http://kinesis-config:4");

  env_.set("AWS_ENDPOINT_URL_DYNAMODB", "http://ddb-env:5");
  d = resolve_endpoint(c, "dynamodb");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->url, "http://ddb-env:5");
  c.dynamodb_endpoint_url = "https://ddb-config:6";
  d = resolve_endpoint(c, "dynamodb");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->url, "https://ddb-config:6");
}

TEST_F(EndpointTest, OverrideWithoutRegionSignsForUsEast1) {
  AwsConfig c;
  c.endpoint_url = "http://127.0.0.1:4567";
  auto r = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->region, "us-east-1");
  EXPECT_EQ(r->url, "http://127.0.0.1:4567");
}

TEST_F(EndpointTest, IPv6AndHttpsEndpoints) {
  AwsConfig c;
  c.endpoint_url = "http://[::1]:8000";
  auto r = resolve_endpoint(c, "dynamodb");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->url, "http://[::1]:8000");
  c.endpoint_url = "HTTPS://kinesis-fips.us-east-1.amazonaws.com";
  r = resolve_endpoint(c, "kinesis");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->url, "https://kinesis-fips.us-east-1.amazonaws.com");
}

TEST_F(EndpointTest, BadEndpointUrlsAreInvalidArgumentNamingTheSource) {
  for (const char* bad : {"localhost:4567", "ftp://host", "http://", "http://host:0",
                          "http://host:70000", "http://host:port", "http://ho st:1",
                          "http://user:pw@host", "http://host/?q=1", "http://[::1"}) {
    AwsConfig c;
    c.region = "us-east-1";
    c.kinesis_endpoint_url = bad;
    auto r = resolve_endpoint(c, "kinesis");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(contains(r.status().message(), "bad endpoint URL")) << r.status();
    EXPECT_TRUE(contains(r.status().message(), "configured kinesis endpoint")) << r.status();
    EXPECT_FALSE(contains(r.status().message(), "pw@")) << r.status();
  }
  env_.set("AWS_ENDPOINT_URL", "not a url");
  auto r = resolve_endpoint(AwsConfig{}, "kinesis");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.status().message(), "AWS_ENDPOINT_URL")) << r.status();
}

TEST(AwsConfigValidateTest, DefaultsAreValid) { EXPECT_TRUE(AwsConfig{}.validate().empty()); }

TEST(AwsConfigValidateTest, ReportsEveryProblem) {
  AwsConfig c;
  c.region = "us east";
  c.endpoint_url = "localhost:4567";
  c.credentials = StaticCredentials{"", "", ""};
  c.retry.max_attempts = 0;
  c.retry.base_delay = std::chrono::milliseconds(0);
  c.retry.max_backoff = std::chrono::milliseconds(120000);
  c.retry.call_deadline = std::chrono::milliseconds(10);
  c.http.connect_timeout = std::chrono::milliseconds(10);
  c.http.request_timeout = std::chrono::hours(1);
  c.http.max_response_bytes = 10;
  c.http.receive_buffer_bytes = 1024;
  auto problems = c.validate();
  EXPECT_EQ(problems.size(), 12u);
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  for (const char* word :
       {"region", "endpoint_url", "access key id", "secret access key", "retry.max_attempts",
        "retry.base_delay", "retry.max_backoff", "retry.call_deadline", "http.connect_timeout",
        "http.request_timeout", "http.max_response_bytes", "http.receive_buffer_bytes"}) {
    EXPECT_TRUE(contains(all, word)) << word << "\n" << all;
  }
}

TEST(AwsConfigValidateTest, NeverEchoesCredentials) {
  AwsConfig c;
  c.credentials = StaticCredentials{"", test::kSecretKey, test::kSessionToken};
  auto problems = c.validate();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_FALSE(contains(problems[0], test::kSecretKey));
  EXPECT_FALSE(contains(problems[0], test::kSessionToken));
}

}  // namespace
}  // namespace kcl::aws
