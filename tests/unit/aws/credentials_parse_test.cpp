// The parsers behind the credentials providers: ISO 8601, the STS XML extractor, form
// encoding, the credential_process / container / IMDS JSON documents and the shared-file INI.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "aws/credentials_internal.h"
#include "aws/ini_file.h"

namespace kcl::aws::credentials_internal {
namespace {

using std::chrono::system_clock;

system_clock::time_point utc(int y, unsigned mo, unsigned d, int h, int mi, int s) {
  return std::chrono::sys_days{std::chrono::year{y} / std::chrono::month{mo} /
                               std::chrono::day{d}} +
         std::chrono::hours(h) + std::chrono::minutes(mi) + std::chrono::seconds(s);
}

TEST(CredentialsParseTest, Iso8601Forms) {
  EXPECT_EQ(parse_iso8601("2024-05-01T12:34:56Z"), utc(2024, 5, 1, 12, 34, 56));
  EXPECT_EQ(parse_iso8601(" 2024-05-01T12:34:56Z\n"), utc(2024, 5, 1, 12, 34, 56));
  EXPECT_EQ(parse_iso8601("2024-05-01T12:34:56"), utc(2024, 5, 1, 12, 34, 56));
  EXPECT_EQ(parse_iso8601("2024-05-01T12:34:56.250Z"),
            utc(2024, 5, 1, 12, 34, 56) + std::chrono::milliseconds(250));
  EXPECT_EQ(parse_iso8601("2024-05-01T14:34:56+02:00"), utc(2024, 5, 1, 12, 34, 56));
  EXPECT_EQ(parse_iso8601("2024-05-01T10:04:56-0230"), utc(2024, 5, 1, 12, 34, 56));
  EXPECT_EQ(parse_iso8601("2024-02-29t00:00:00z"), utc(2024, 2, 29, 0, 0, 0));
  EXPECT_EQ(parse_iso8601("1970-01-01T00:00:00Z"), system_clock::time_point{});
  // Beyond what system_clock holds (nanoseconds in 64 bits): clamped, not wrapped.
  EXPECT_EQ(parse_iso8601("2999-01-01T00:00:00Z"), system_clock::time_point::max());
  EXPECT_EQ(parse_iso8601("1000-01-01T00:00:00Z"), system_clock::time_point::min());
}

TEST(CredentialsParseTest, Iso8601Rejects) {
  for (const char* bad :
       {"", "2024", "2024-05-01", "2024-13-01T00:00:00Z", "2023-02-29T00:00:00Z",
        "2024-05-01T25:00:00Z", "2024-05-01T12:34:56Q", "2024-05-01T12:34:56.Z",
        "2024-05-01T12:34:56+2", "not a date at all!!", "2024-05-01T12:34:56Zx"}) {
    EXPECT_FALSE(parse_iso8601(bad).has_value()) << bad;
  }
}

TEST(CredentialsParseTest, XmlElementText) {
  const std::string xml = R"(<?xml version="1.0"?>
<Resp xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <Result>
    <Credentials>
      <AccessKeyId>AKID</AccessKeyId>
      <SecretAccessKey>a&amp;b&lt;c&#x41;&#66;</SecretAccessKey>
      <SessionToken><![CDATA[tok<en>]]></SessionToken>
      <Empty/>
    </Credentials>
    <sts:Prefixed attr="1">P</sts:Prefixed>
  </Result>
</Resp>)";
  EXPECT_EQ(xml_element_text(xml, "AccessKeyId"), "AKID");
  EXPECT_EQ(xml_element_text(xml, "SecretAccessKey"), "a&b<cAB");
  EXPECT_EQ(xml_element_text(xml, "SessionToken"), "tok<en>");
  EXPECT_EQ(xml_element_text(xml, "Empty"), "");
  EXPECT_EQ(xml_element_text(xml, "Prefixed"), "P");
  EXPECT_FALSE(xml_element_text(xml, "Missing").has_value());
  EXPECT_FALSE(xml_element_text(xml, "Access").has_value());  // no prefix matches
  auto block = xml_element_text(xml, "Credentials");
  ASSERT_TRUE(block.has_value());
  EXPECT_NE(block->find("AKID"), std::string::npos);
  EXPECT_FALSE(xml_element_text("<A>unterminated", "A").has_value());
}

TEST(CredentialsParseTest, FormEncode) {
  EXPECT_EQ(form_encode("arn:aws:iam::123:role/x"), "arn%3Aaws%3Aiam%3A%3A123%3Arole%2Fx");
  EXPECT_EQ(form_encode("a b+c=d&e~f.g_h-i"), "a%20b%2Bc%3Dd%26e~f.g_h-i");
  EXPECT_EQ(form_encode("\xC3\xA9"), "%C3%A9");
}

TEST(CredentialsParseTest, ProcessOutput) {
  auto c = parse_process_output(
      R"({"Version": 1, "AccessKeyId": "AKID", "SecretAccessKey": "S3CR3T",
          "SessionToken": "T0K3N", "Expiration": "2030-01-02T03:04:05Z"})",
      "credential_process of profile 'p'");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "AKID");
  EXPECT_EQ(c->secret_access_key, "S3CR3T");
  EXPECT_EQ(c->session_token, "T0K3N");
  EXPECT_EQ(c->expiration, utc(2030, 1, 2, 3, 4, 5));

  auto longterm = parse_process_output(
      R"({"Version": 1, "AccessKeyId": "AKID", "SecretAccessKey": "S3CR3T"})", "x");
  ASSERT_TRUE(longterm.ok());
  EXPECT_TRUE(longterm->session_token.empty());
  EXPECT_FALSE(longterm->expiration.has_value());
}

TEST(CredentialsParseTest, ProcessOutputErrorsNeverQuoteTheOutput) {
  const char* cases[] = {
      "S3CR3T-not-json",
      R"(["S3CR3T"])",
      R"({"AccessKeyId": "AKID", "SecretAccessKey": "S3CR3T"})",                // no Version
      R"({"Version": 2, "AccessKeyId": "AKID", "SecretAccessKey": "S3CR3T"})",  // bad Version
      R"({"Version": 1, "AccessKeyId": "AKID"})",
      R"({"Version": 1, "AccessKeyId": "AKID", "SecretAccessKey": 5})",
      R"({"Version": 1, "AccessKeyId": "AKID", "SecretAccessKey": "S3CR3T", "Expiration": "soon"})",
  };
  for (const char* out : cases) {
    auto c = parse_process_output(out, "credential_process of profile 'p'");
    ASSERT_FALSE(c.ok()) << out;
    EXPECT_EQ(c.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(c.status().message().find("profile 'p'"), std::string::npos);
    EXPECT_EQ(c.status().to_string().find("S3CR3T"), std::string::npos) << c.status();
    EXPECT_EQ(c.status().to_string().find("AKID"), std::string::npos) << c.status();
  }
}

TEST(CredentialsParseTest, MetadataCredentials) {
  auto c = parse_metadata_credentials(
      R"({"Code": "Success", "LastUpdated": "2024-01-01T00:00:00Z", "Type": "AWS-HMAC",
          "AccessKeyId": "ASIA", "SecretAccessKey": "S3CR3T", "Token": "T0K3N",
          "Expiration": "2024-01-01T06:00:00Z"})",
      "imds");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->session_token, "T0K3N");
  EXPECT_EQ(c->expiration, utc(2024, 1, 1, 6, 0, 0));

  auto failed = parse_metadata_credentials(
      R"({"Code": "AssumeRoleUnauthorizedAccess", "Message": "not allowed"})", "imds");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(failed.status().message().find("AssumeRoleUnauthorizedAccess"), std::string::npos);

  auto garbage = parse_metadata_credentials("S3CR3T", "imds");
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), StatusCode::kInternal);
  EXPECT_EQ(garbage.status().message().find("S3CR3T"), std::string::npos);
}

TEST(CredentialsParseTest, StsSuccessAndErrors) {
  HttpResponse ok;
  ok.status = 200;
  ok.body = R"(<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <AssumedRoleUser><Arn>arn:aws:sts::1:assumed-role/r/s</Arn><AssumedRoleId>X:s</AssumedRoleId></AssumedRoleUser>
    <Credentials>
      <SessionToken>T0K3N</SessionToken>
      <SecretAccessKey>S3CR3T</SecretAccessKey>
      <Expiration>2030-01-01T01:00:00Z</Expiration>
      <AccessKeyId>ASIAX</AccessKeyId>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>rid-1</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>)";
  auto c = parse_sts_response(ok, "AssumeRoleWithWebIdentity", "https://sts.example");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ASIAX");
  EXPECT_EQ(c->secret_access_key, "S3CR3T");
  EXPECT_EQ(c->session_token, "T0K3N");
  EXPECT_EQ(c->expiration, utc(2030, 1, 1, 1, 0, 0));

  HttpResponse denied;
  denied.status = 403;
  denied.body = R"(<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message></Error>
  <RequestId>rid-2</RequestId></ErrorResponse>)";
  auto e = parse_sts_response(denied, "AssumeRoleWithWebIdentity", "https://sts.example");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(e.status().message().find("AccessDenied"), std::string::npos);
  EXPECT_NE(e.status().message().find("Not authorized"), std::string::npos);
  ASSERT_TRUE(e.status().aws().has_value());
  EXPECT_EQ(e.status().aws()->error_type, "AccessDenied");
  EXPECT_EQ(e.status().aws()->request_id, "rid-2");
  EXPECT_EQ(e.status().aws()->http_status, 403);

  HttpResponse idp;
  idp.status = 400;
  idp.body = "<ErrorResponse><Error><Code>IDPCommunicationError</Code></Error></ErrorResponse>";
  EXPECT_EQ(parse_sts_response(idp, "Op", "e").status().code(), StatusCode::kUnavailable);

  HttpResponse unavailable;
  unavailable.status = 503;
  unavailable.body = "oops";
  EXPECT_EQ(parse_sts_response(unavailable, "Op", "e").status().code(), StatusCode::kUnavailable);

  HttpResponse truncated;
  truncated.status = 200;
  truncated.body = "<Credentials><AccessKeyId>A</AccessKeyId></Credentials>";
  EXPECT_EQ(parse_sts_response(truncated, "Op", "e").status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace kcl::aws::credentials_internal

namespace kcl::aws {
namespace {

TEST(IniFileTest, SectionsKeysCommentsAndSubProperties) {
  const auto ini = IniFile::parse(
      "# leading comment\n"
      "ignored = before any section\n"
      "[default]\n"
      "aws_access_key_id = AKID\n"
      "AWS_Secret_Access_Key=secret ; trailing comment\n"
      "region: eu-west-1   # another\n"
      "password = a#b;c\n"
      "s3 =\n"
      "  max_concurrent_requests = 10\n"
      "  addressing_style = path\n"
      "after = x\n"
      "\r\n"
      "[ profile dev ]   # comment on a section line\r\n"
      "credential_process = /bin/echo hi\r\n"
      "[broken\n"
      "lost = 1\n"
      "[default]\n"
      "aws_access_key_id = SECOND\n"
      "extra = merged\n");
  const IniSection* d = ini.section("default");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->at("aws_access_key_id"), "SECOND");  // the later occurrence wins (as the SDKs)
  EXPECT_EQ(d->at("aws_secret_access_key"), "secret");
  EXPECT_EQ(d->at("region"), "eu-west-1");
  EXPECT_EQ(d->at("password"), "a#b;c");  // no whitespace before # or ;: part of the value
  EXPECT_EQ(d->at("s3"), "");
  EXPECT_EQ(d->at("s3.max_concurrent_requests"), "10");
  EXPECT_EQ(d->at("s3.addressing_style"), "path");
  EXPECT_EQ(d->at("after"), "x");
  EXPECT_EQ(d->at("extra"), "merged");
  EXPECT_EQ(d->count("ignored"), 0u);
  EXPECT_EQ(d->count("lost"), 0u);
  const IniSection* dev = ini.section("profile dev");
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(dev->at("credential_process"), "/bin/echo hi");
  EXPECT_EQ(ini.section("broken"), nullptr);
}

TEST(IniFileTest, ALaterValueWins) {
  // Java SDK v2's ProfileFileReader (and the CLI) warn and take the later value, within a
  // section and across repeats of it.
  const auto ini = IniFile::parse(
      "[default]\n"
      "region = us-east-1\n"
      "region = eu-west-1\n"
      "aws_access_key_id = FIRST\n"
      "s3 =\n"
      "  addressing_style = path\n"
      "  addressing_style = virtual\n"
      "[other]\n"
      "x = 1\n"
      "[default]\n"
      "aws_access_key_id = SECOND\n");
  const IniSection* d = ini.section("default");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->at("region"), "eu-west-1");
  EXPECT_EQ(d->at("aws_access_key_id"), "SECOND");
  EXPECT_EQ(d->at("s3.addressing_style"), "virtual");
}

TEST(IniFileTest, ACommentRightAfterASectionHeader) {
  const auto ini = IniFile::parse(
      "[default]#comment\n"
      "region = us-east-1\n"
      "[profile dev];note\n"
      "region = eu-west-1\n");
  const IniSection* d = ini.section("default");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->at("region"), "us-east-1");
  const IniSection* dev = ini.section("profile dev");
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(dev->at("region"), "eu-west-1");
}

TEST(IniFileTest, ContinuationLinesAreAppendedWithALineBreak) {
  const auto ini = IniFile::parse(
      "[default]\n"
      "credential_process = /bin/tool\n"
      "  --flag value\n"
      "\t# kept: part of the value\n"
      "region = us-east-1\n"
      "s3 =\n"
      "  max_concurrent_requests = 10\n"
      "after = x\n");
  const IniSection* d = ini.section("default");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->at("credential_process"), "/bin/tool\n--flag value\n# kept: part of the value");
  EXPECT_EQ(d->at("region"), "us-east-1");
  EXPECT_EQ(d->at("s3"), "");
  EXPECT_EQ(d->at("s3.max_concurrent_requests"), "10");
  EXPECT_EQ(d->at("after"), "x");
}

TEST(IniFileTest, ProfileNameAndPaths) {
  std::map<std::string, std::string> vars{{"HOME", "/home/u"}};
  EnvLookup env = [&vars](std::string_view n) -> std::optional<std::string> {
    auto it = vars.find(std::string(n));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  EXPECT_EQ(shared_credentials_path(env), "/home/u/.aws/credentials");
  EXPECT_EQ(shared_config_path(env), "/home/u/.aws/config");
  std::string source;
  EXPECT_EQ(resolve_profile_name("", env, &source), "default");
  EXPECT_EQ(source, "default");
  vars["AWS_PROFILE"] = "envprof";
  vars["AWS_SHARED_CREDENTIALS_FILE"] = "~/creds";
  vars["AWS_CONFIG_FILE"] = "/etc/aws-config";
  EXPECT_EQ(resolve_profile_name("", env, &source), "envprof");
  EXPECT_EQ(source, "AWS_PROFILE");
  EXPECT_EQ(resolve_profile_name("cfg", env, &source), "cfg");
  EXPECT_EQ(source, "configuration");
  EXPECT_EQ(shared_credentials_path(env), "/home/u/creds");
  EXPECT_EQ(shared_config_path(env), "/etc/aws-config");
  vars["AWS_PROFILE"] = "";  // empty counts as unset
  EXPECT_EQ(resolve_profile_name("", env), "default");
}

}  // namespace
}  // namespace kcl::aws
