// The global flags over a properties file's settings (kcl multilang): a flag given wins, and
// the file's other settings stay (its HTTP timeouts and TLS settings were replaced by the
// command line's defaults, and its regionName won over --region).
#include <gtest/gtest.h>

#include <chrono>

#include "cli_common.h"

namespace kcl::cli {
namespace {

using namespace std::chrono_literals;

AwsConfig from_file() {
  AwsConfig c;
  c.region = "us-east-1";
  c.endpoint_url = "http://127.0.0.1:4567";
  c.profile = "file-profile";
  c.http.request_timeout = 5s;
  c.http.connect_timeout = 2s;
  c.http.ca_bundle = "/etc/corp.pem";
  c.http.verify_tls = true;
  c.kinesis_wire = KinesisWire::kJson;
  return c;
}

TEST(GlobalOptionsTest, NoFlagGivenLeavesTheFilesSettings) {
  AwsConfig c = from_file();
  GlobalOptions().override_given(c);
  EXPECT_EQ(c.region, "us-east-1");
  EXPECT_EQ(c.endpoint_url, "http://127.0.0.1:4567");
  EXPECT_EQ(c.profile, "file-profile");
  EXPECT_EQ(c.http.request_timeout, 5s);
  EXPECT_EQ(c.http.connect_timeout, 2s);
  EXPECT_EQ(c.http.ca_bundle, "/etc/corp.pem");
  EXPECT_TRUE(c.http.verify_tls);
  EXPECT_EQ(c.kinesis_wire, KinesisWire::kJson);
}

TEST(GlobalOptionsTest, EachFlagGivenWinsAndTheRestStays) {
  AwsConfig c = from_file();
  GlobalOptions g;
  g.region = "eu-west-1";
  g.endpoint_url = "http://127.0.0.1:9999";
  g.profile = "prod";
  g.no_verify_tls = true;
  g.wire = "cbor";
  g.override_given(c);
  EXPECT_EQ(c.region, "eu-west-1");
  EXPECT_EQ(c.endpoint_url, "http://127.0.0.1:9999");
  EXPECT_EQ(c.profile, "prod");
  EXPECT_FALSE(c.http.verify_tls);
  EXPECT_EQ(c.kinesis_wire, KinesisWire::kCbor);
  EXPECT_EQ(c.http.request_timeout, 5s);
  EXPECT_EQ(c.http.ca_bundle, "/etc/corp.pem");
}

}  // namespace
}  // namespace kcl::cli
