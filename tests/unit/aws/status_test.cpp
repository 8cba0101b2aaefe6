#include "kcl/status.h"

#include <gtest/gtest.h>

#include "base/status_macros.h"

namespace kcl {
namespace {

TEST(StatusTest, OkHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.to_string(), "OK");
}

TEST(StatusTest, ErrorNamesOperationEndpointAndType) {
  AwsErrorDetails d;
  d.operation = "Kinesis.GetRecords";
  d.endpoint = "http://127.0.0.1:4567";
  d.http_status = 400;
  d.error_type = "ResourceNotFoundException";
  d.request_id = "abc";
  Status s(StatusCode::kNotFound, "Stream x not found", d);
  std::string text = s.to_string();
  EXPECT_NE(text.find("NOT_FOUND"), std::string::npos);
  EXPECT_NE(text.find("Kinesis.GetRecords"), std::string::npos);
  EXPECT_NE(text.find("http://127.0.0.1:4567"), std::string::npos);
  EXPECT_NE(text.find("ResourceNotFoundException"), std::string::npos);
  EXPECT_NE(text.find("request-id=abc"), std::string::npos);
  EXPECT_FALSE(s.retryable());
}

Result<int> half(int x) {
  if (x % 2) return Status(StatusCode::kInvalidArgument, "odd");
  return x / 2;
}

Status quarter(int x, int* out) {
  KCL_ASSIGN_OR_RETURN(int h, half(x));
  KCL_ASSIGN_OR_RETURN(*out, half(h));
  return Status::Ok();
}

TEST(StatusTest, ResultPropagates) {
  int out = 0;
  EXPECT_TRUE(quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.with_context("quartering: ").message(), "quartering: odd");
}

}  // namespace
}  // namespace kcl
