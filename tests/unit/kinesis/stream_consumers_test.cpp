// Finding or registering the fan-out consumer (kinesis/stream_consumers.h) against a scripted
// AwsJsonClient: a consumer that exists is reused, a lost registration race (ResourceInUse)
// describes and reuses the winner's consumer and never registers twice, the wait for ACTIVE,
// and JSON null for optional members of the consumer calls' answers read as absent.
#include "kinesis/stream_consumers.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "support/fake_json_client.h"
#include "support/stepping_clock.h"

namespace kcl::kinesis {
namespace {

using namespace std::chrono_literals;
using fake::Call;
using fake::FakeJsonClient;
using fake::SteppingClock;

constexpr const char* kStreamArn = "arn:aws:kinesis:us-east-1:123456789012:stream/orders";
constexpr const char* kConsumerArn =
    "arn:aws:kinesis:us-east-1:123456789012:stream/orders/consumer/audit:1700000000";

std::string consumer(const char* member, const std::string& status, const std::string& extra = "") {
  return std::string("{\"") + member + R"(":{"ConsumerName":"audit","ConsumerARN":")" +
         kConsumerArn + R"(","ConsumerStatus":")" + status + "\"" + extra + "}}";
}

// ResourceInUse as the real client classifies it.
Status resource_in_use() {
  return fake::aws_error(aws::classify_aws_error(400, "ResourceInUseException"),
                         "ResourceInUseException", "RegisterStreamConsumer");
}

Status not_found() {
  return fake::aws_error(aws::classify_aws_error(400, "ResourceNotFoundException"),
                         "ResourceNotFoundException", "DescribeStreamConsumer");
}

class StreamConsumersTest : public ::testing::Test {
 protected:
  Result<StreamConsumer> ensure(std::chrono::milliseconds deadline = 60s) {
    return ensure_stream_consumer(client, kStreamArn, "audit", clock, deadline);
  }
  int registrations() const {
    int n = 0;
    for (const Call& c : fake->calls) n += c.operation == "RegisterStreamConsumer";
    return n;
  }

  std::shared_ptr<FakeJsonClient> fake = std::make_shared<FakeJsonClient>();
  KinesisClient client{fake};
  SteppingClock clock;
};

TEST_F(StreamConsumersTest, AnActiveConsumerIsReusedWithoutRegistering) {
  fake->responses.push_back(consumer("ConsumerDescription", "ACTIVE"));
  auto c = ensure();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->consumer_arn, kConsumerArn);
  EXPECT_EQ(fake->operations(), std::vector<std::string>{"DescribeStreamConsumer"});
  EXPECT_EQ(fake->calls[0].body["StreamARN"], kStreamArn);
  EXPECT_EQ(fake->calls[0].body["ConsumerName"], "audit");
}

TEST_F(StreamConsumersTest, AMissingConsumerIsRegisteredOnceAndWaitedForUntilActive) {
  fake->responses.push_back(not_found());
  fake->responses.push_back(consumer("Consumer", "CREATING"));
  fake->responses.push_back(not_found());  // registered, not visible yet
  fake->responses.push_back(consumer("ConsumerDescription", "CREATING"));
  fake->responses.push_back(consumer("ConsumerDescription", "ACTIVE"));
  auto c = ensure();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->consumer_status, "ACTIVE");
  EXPECT_EQ(fake->operations(),
            (std::vector<std::string>{"DescribeStreamConsumer", "RegisterStreamConsumer",
                                      "DescribeStreamConsumer", "DescribeStreamConsumer",
                                      "DescribeStreamConsumer"}));
  EXPECT_EQ(registrations(), 1);
  EXPECT_EQ(clock.waits, 3) << "one wait between two looks";
}

// Two workers of one application start together: both find no consumer, the other one's
// RegisterStreamConsumer wins, this one's answers ResourceInUse. It describes the existing
// consumer and uses it, waiting for ACTIVE, and never registers again.
TEST_F(StreamConsumersTest, ResourceInUseOnRegisterDescribesAndReusesTheExistingConsumer) {
  ASSERT_EQ(resource_in_use().code(), StatusCode::kAlreadyExists);
  fake->responses.push_back(not_found());
  fake->responses.push_back(resource_in_use());
  fake->responses.push_back(consumer("ConsumerDescription", "CREATING"));
  fake->responses.push_back(consumer("ConsumerDescription", "CREATING"));
  fake->responses.push_back(consumer("ConsumerDescription", "ACTIVE"));
  auto c = ensure();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->consumer_arn, kConsumerArn);
  EXPECT_EQ(c->consumer_status, "ACTIVE");
  EXPECT_EQ(fake->operations(),
            (std::vector<std::string>{"DescribeStreamConsumer", "RegisterStreamConsumer",
                                      "DescribeStreamConsumer", "DescribeStreamConsumer",
                                      "DescribeStreamConsumer"}));
  EXPECT_EQ(registrations(), 1) << "never registered twice";
}

TEST_F(StreamConsumersTest, ResourceInUseThenTheConsumerIsNotVisibleYetIsLookedForAgain) {
  fake->responses.push_back(not_found());
  fake->responses.push_back(resource_in_use());
  fake->responses.push_back(not_found());  // the winner's registration is not visible yet
  fake->responses.push_back(consumer("ConsumerDescription", "ACTIVE"));
  auto c = ensure();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(registrations(), 1);
  EXPECT_EQ(fake->calls.size(), 4u);
}

TEST_F(StreamConsumersTest, ADeletingConsumerAndADeadlineAreClearErrors) {
  fake->responses.push_back(consumer("ConsumerDescription", "DELETING"));
  auto deleting = ensure();
  ASSERT_FALSE(deleting.ok());
  EXPECT_EQ(deleting.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(deleting.status().message().find("audit is being deregistered"), std::string::npos)
      << deleting.status();
  EXPECT_EQ(registrations(), 0);

  fake->responses.clear();
  fake->handler = [](const Call&) -> Result<std::string> {
    return consumer("ConsumerDescription", "CREATING");
  };
  auto late = ensure(5s);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(late.status().message().find("did not become ACTIVE within 5000 ms (status CREATING)"),
            std::string::npos)
      << late.status();
  EXPECT_EQ(registrations(), 0);
}

TEST_F(StreamConsumersTest, AnotherRegistrationErrorNamesTheConsumer) {
  fake->responses.push_back(not_found());
  fake->responses.push_back(fake::aws_error(aws::classify_aws_error(400, "LimitExceededException"),
                                            "LimitExceededException", "RegisterStreamConsumer"));
  auto c = ensure();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("registering stream consumer audit"), std::string::npos)
      << c.status();
  EXPECT_EQ(registrations(), 1);
}

// AWS SDKs read a member whose value is null as absent, and so does the client.
TEST_F(StreamConsumersTest, NullOptionalMembersReadAsAbsent) {
  fake->responses.push_back(
      consumer("Consumer", "CREATING", R"(,"ConsumerCreationTimestamp":null,"StreamARN":null)"));
  auto registered = client.register_stream_consumer(kStreamArn, "audit");
  ASSERT_TRUE(registered.ok()) << registered.status();
  EXPECT_EQ(registered->consumer_arn, kConsumerArn);
  EXPECT_EQ(registered->creation_timestamp, std::chrono::system_clock::time_point{});

  fake->responses.push_back(consumer("ConsumerDescription", "ACTIVE",
                                     R"(,"ConsumerCreationTimestamp":null,"StreamARN":null)"));
  auto described = client.describe_stream_consumer(kStreamArn, "audit");
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->consumer_status, "ACTIVE");
  EXPECT_EQ(described->creation_timestamp, std::chrono::system_clock::time_point{});

  fake->responses.push_back(std::string(
      R"({"Consumers":[{"ConsumerName":"audit","ConsumerARN":"arn:1","ConsumerStatus":"ACTIVE",)"
      R"("ConsumerCreationTimestamp":null}],"NextToken":null})"));
  fake->responses.push_back(std::string(R"({"Consumers":null,"NextToken":null})"));
  const std::size_t before = fake->calls.size();
  auto listed = client.list_stream_consumers(kStreamArn);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].consumer_arn, "arn:1");
  EXPECT_EQ(fake->calls.size(), before + 1) << "a null NextToken is the last page";
  auto none = client.list_stream_consumers(kStreamArn);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty()) << "null Consumers: no consumers";

  // A required member that is null is a malformed answer naming the member.
  fake->responses.push_back(std::string(
      R"({"ConsumerDescription":{"ConsumerName":"audit","ConsumerARN":null,"ConsumerStatus":"ACTIVE"}})"));
  auto missing = client.describe_stream_consumer(kStreamArn, "audit");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("ConsumerDescription.ConsumerARN: missing"),
            std::string::npos)
      << missing.status();
}

}  // namespace
}  // namespace kcl::kinesis
