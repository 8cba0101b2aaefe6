// classify_aws_error, and reading error bodies (JSON, truncated JSON, HTML, empty).
#include <gtest/gtest.h>

#include "aws/aws_json_client.h"
#include "aws/json_util.h"

namespace kcl::aws {
namespace {

TEST(ClassifyAwsErrorTest, MapsKnownTypes) {
  struct Case {
    int http;
    const char* type;
    StatusCode want;
  };
  const Case cases[] = {
      {400, "ConditionalCheckFailedException", StatusCode::kConditionFailed},
      {400, "ResourceNotFoundException", StatusCode::kNotFound},
      {400, "ResourceInUseException", StatusCode::kAlreadyExists},
      {400, "ExpiredIteratorException", StatusCode::kExpiredIterator},
      {400, "ProvisionedThroughputExceededException", StatusCode::kUnavailable},
      {400, "ThrottlingException", StatusCode::kUnavailable},
      {400, "LimitExceededException", StatusCode::kUnavailable},
      {400, "RequestLimitExceeded", StatusCode::kUnavailable},
      {400, "TransactionInProgressException", StatusCode::kUnavailable},
      {400, "UnrecognizedClientException", StatusCode::kPermissionDenied},
      {403, "InvalidSignatureException", StatusCode::kPermissionDenied},
      {400, "AccessDeniedException", StatusCode::kPermissionDenied},
      {403, "ExpiredTokenException", StatusCode::kPermissionDenied},
      {403, "MissingAuthenticationToken", StatusCode::kPermissionDenied},
      {403, "IncompleteSignature", StatusCode::kPermissionDenied},
      {400, "ValidationException", StatusCode::kInvalidArgument},
      {400, "InvalidArgumentException", StatusCode::kInvalidArgument},
      {400, "SerializationException", StatusCode::kInvalidArgument},
      {400, "KMSAccessDeniedException", StatusCode::kFailedPrecondition},
      {400, "KMSDisabledException", StatusCode::kFailedPrecondition},
      {400, "KMSThrottlingException", StatusCode::kUnavailable},
      {400, "SomethingNewException", StatusCode::kInvalidArgument},
      {500, "InternalFailure", StatusCode::kUnavailable},
      {503, "ServiceUnavailable", StatusCode::kUnavailable},
      {500, "", StatusCode::kUnavailable},
      {502, "", StatusCode::kUnavailable},
      {429, "", StatusCode::kUnavailable},
      {403, "", StatusCode::kPermissionDenied},
      {404, "", StatusCode::kInvalidArgument},
      {400, "", StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(classify_aws_error(c.http, c.type), c.want) << c.http << " " << c.type;
  }
}

TEST(NormalizeErrorTypeTest, StripsNamespaceAndSuffix) {
  EXPECT_EQ(normalize_error_type("com.amazonaws.kinesis.v20131202#ResourceNotFoundException"),
            "ResourceNotFoundException");
  EXPECT_EQ(normalize_error_type("com.amazon.coral.validate#ValidationException"),
            "ValidationException");
  EXPECT_EQ(normalize_error_type("ValidationException:http://internal.amazon.com/coral/x/"),
            "ValidationException");
  EXPECT_EQ(normalize_error_type("  ThrottlingException "), "ThrottlingException");
  EXPECT_EQ(normalize_error_type("Bad<script>"), "Bad?script?");
  EXPECT_EQ(normalize_error_type(""), "");
}

HttpResponse response(int status, std::string body, Headers headers = {}) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

TEST(ParseAwsErrorTest, JsonBodyWithTypeAndMessage) {
  auto e = parse_aws_error(
      response(400, R"({"__type":"com.amazonaws.kinesis.v20131202#ResourceNotFoundException",)"
                    R"("message":"Stream s under account 1 not found."})"));
  EXPECT_TRUE(e.body_is_json);
  EXPECT_EQ(e.type, "ResourceNotFoundException");
  EXPECT_EQ(e.message, "Stream s under account 1 not found.");
}

TEST(ParseAwsErrorTest, CapitalMessageAndHeaderTypeWins) {
  auto e = parse_aws_error(response(400, R"({"__type":"Other","Message":"m"})",
                                    {{"x-amzn-errortype", "ValidationException:http://x/"}}));
  EXPECT_EQ(e.type, "ValidationException");
  EXPECT_EQ(e.message, "m");
}

TEST(ParseAwsErrorTest, TruncatedJsonKeepsACompleteType) {
  auto e = parse_aws_error(response(
      400, R"({"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","mes)"));
  EXPECT_FALSE(e.body_is_json);
  EXPECT_EQ(e.type, "ConditionalCheckFailedException");
  EXPECT_FALSE(e.snippet.empty());
  auto cut = parse_aws_error(response(400, R"({"__type":"com.amazonaws.dyn)"));
  EXPECT_FALSE(cut.body_is_json);
  EXPECT_EQ(cut.type, "");
}

TEST(ParseAwsErrorTest, HtmlBodyGivesAShortSanitizedSnippet) {
  std::string html = "<html>\r\n<head><title>502 Bad Gateway</title></head>\n\t<body>" +
                     std::string(1000, 'x') + "\x01\x02</body></html>";
  auto e = parse_aws_error(response(502, html, {{"content-type", "text/html"}}));
  EXPECT_FALSE(e.body_is_json);
  EXPECT_EQ(e.content_type, "text/html");
  EXPECT_LE(e.snippet.size(), 203u);
  EXPECT_EQ(e.snippet.substr(0, 47), "<html> <head><title>502 Bad Gateway</title></he");
  EXPECT_EQ(e.snippet.find('\n'), std::string::npos);
  EXPECT_EQ(e.snippet.substr(e.snippet.size() - 3), "...");
}

TEST(ParseAwsErrorTest, JsonThatIsNotAnObjectIsNotAnErrorBody) {
  auto e = parse_aws_error(response(500, "[1,2]"));
  EXPECT_FALSE(e.body_is_json);
  EXPECT_EQ(e.snippet, "[1,2]");
}

TEST(ParseAwsErrorTest, EmptyBody) {
  auto e = parse_aws_error(response(503, "  "));
  EXPECT_TRUE(e.empty_body);
  EXPECT_EQ(e.type, "");
}

TEST(SanitizeSnippetTest, CollapsesAndReplaces) {
  EXPECT_EQ(sanitize_snippet("  a \n\n b\tc  "), "a b c");
  EXPECT_EQ(sanitize_snippet("caf\xc3\xa9"), "caf??");
  EXPECT_EQ(sanitize_snippet("abcdef", 3), "abc...");
  EXPECT_EQ(sanitize_snippet(""), "");
}

}  // namespace
}  // namespace kcl::aws
