// The CBOR probe of KinesisWire::kAuto (decide_wire, judge_cbor_probe): what each answer
// means, and the probe itself sent through the real client (libcurl, SigV4) to a local HTTP
// server answering as kinesis-local and kinesalite answer it (their answers captured from
// kinesis-local 0.6.2 and kinesalite 3.3.3), and as servers that do not answer at all.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aws/aws_json_client.h"
#include "aws/cbor.h"
#include "aws/credentials.h"
#include "aws/http_transport.h"
#include "kinesis/kinesis_cbor.h"
#include "kinesis/kinesis_client.h"
#include "support/local_http_server.h"

namespace kcl::kinesis {
namespace {

using kcl::testing::CannedResponse;
using kcl::testing::LocalHttpServer;
using kcl::testing::ServedRequest;

constexpr const char* kCborType = "application/x-amz-cbor-1.1";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string cbor_body(const nlohmann::json& j) {
  const std::vector<std::uint8_t> bytes = nlohmann::json::to_cbor(j);
  return std::string(bytes.begin(), bytes.end());
}

// The probe's body as JSON, its one tag (1, before the timestamp) taken out first; and the
// timestamp's milliseconds, read after the tag (0xc1) and the 8-byte integer's head (0x1b).
nlohmann::json probe_fields(const std::string& body, std::int64_t& millis) {
  const std::string marker("Timestamp\xc1\x1b", 11);
  const std::size_t at = body.find(marker);
  EXPECT_NE(at, std::string::npos) << "no tagged 8-byte timestamp in the probe";
  if (at == std::string::npos) return {};
  millis = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    millis = (millis << 8) | static_cast<std::uint8_t>(body[at + marker.size() + i]);
  }
  std::string untagged = body;
  untagged.erase(at + 9, 1);
  return nlohmann::json::from_cbor(untagged);
}

Status aws_error(const std::string& type, const std::string& message, int http_status) {
  AwsErrorDetails d;
  d.operation = "Kinesis.GetShardIterator";
  d.endpoint = "http://127.0.0.1:4567";
  d.http_status = http_status;
  d.error_type = type;
  return Status(StatusCode::kInvalidArgument,
                "Kinesis.GetShardIterator: " + type + ": " + message + " (HTTP 400)", d);
}

TEST(CborProbeJudgeTest, ResourceNotFoundInCborMeansCbor) {
  std::string why;
  EXPECT_EQ(judge_cbor_probe(aws_error("ResourceNotFoundException", "Stream not found", 400),
                             kCborType, why),
            Wire::kCbor);
  EXPECT_TRUE(contains(why, "ResourceNotFoundException in CBOR")) << why;
  // Parameters and case of the media type do not matter.
  EXPECT_EQ(judge_cbor_probe(aws_error("ResourceNotFoundException", "x", 400),
                             "Application/X-Amz-Cbor-1.1; charset=binary", why),
            Wire::kCbor);
}

TEST(CborProbeJudgeTest, AnErrorAnsweredInJsonMeansJson) {
  std::string why;
  EXPECT_EQ(judge_cbor_probe(aws_error("ResourceNotFoundException", "x", 400),
                             "application/x-amz-json-1.1", why),
            Wire::kJson);
  EXPECT_TRUE(contains(why, "answered in application/x-amz-json-1.1, not CBOR")) << why;
}

TEST(CborProbeJudgeTest, KinesalitesSerializationExceptionMeansJson) {
  std::string why;
  EXPECT_EQ(judge_cbor_probe(aws_error("SerializationException",
                                       "Start of structure or map found where not expected.", 400),
                             kCborType, why),
            Wire::kJson);
  EXPECT_TRUE(contains(why, "Start of structure or map found where not expected.")) << why;
  EXPECT_TRUE(contains(why, "cannot give back record data put in CBOR")) << why;
}

TEST(CborProbeJudgeTest, OtherErrorsMeanJson) {
  std::string why;
  for (const char* type : {"ValidationException", "InvalidArgumentException",
                           "LimitExceededException", "InternalFailure", ""}) {
    EXPECT_EQ(judge_cbor_probe(aws_error(type, "no", 400), kCborType, why), Wire::kJson) << type;
    EXPECT_TRUE(contains(why, "the CBOR probe was refused")) << why;
  }
}

TEST(CborProbeJudgeTest, NoAnswerMeansJsonWithTheError) {
  std::string why;
  const Status refused(StatusCode::kUnavailable,
                       "Kinesis.GetShardIterator: connection refused (127.0.0.1:4567)");
  EXPECT_EQ(judge_cbor_probe(refused, "", why), Wire::kJson);
  EXPECT_TRUE(contains(why, "the CBOR probe got no answer")) << why;
  EXPECT_TRUE(contains(why, "connection refused")) << why;
}

TEST(CborProbeJudgeTest, ASuccessMustBeOneCborMap) {
  std::string why;
  const Result<std::string> iterator(cbor_body({{"ShardIterator", "AAAA"}}));
  EXPECT_EQ(judge_cbor_probe(iterator, kCborType, why), Wire::kCbor);
  EXPECT_TRUE(contains(why, "answered in CBOR")) << why;
  // The same answer in JSON, a CBOR array, trailing bytes, a truncated map: JSON.
  EXPECT_EQ(judge_cbor_probe(Result<std::string>(std::string(R"({"ShardIterator":"AAAA"})")),
                             "application/x-amz-json-1.1", why),
            Wire::kJson);
  EXPECT_EQ(judge_cbor_probe(Result<std::string>(cbor_body(nlohmann::json::array({1, 2}))),
                             kCborType, why),
            Wire::kJson);
  EXPECT_TRUE(contains(why, "not one CBOR map")) << why;
  EXPECT_EQ(judge_cbor_probe(Result<std::string>(*iterator + "x"), kCborType, why), Wire::kJson);
  EXPECT_EQ(judge_cbor_probe(Result<std::string>(iterator->substr(0, iterator->size() - 2)),
                             kCborType, why),
            Wire::kJson);
  EXPECT_TRUE(contains(why, "a string longer than the bytes left")) << why;
  EXPECT_EQ(judge_cbor_probe(Result<std::string>(std::string()), kCborType, why), Wire::kJson);
}

TEST(CborProbeRequestTest, IsGetShardIteratorAtATaggedTimestamp) {
  std::int64_t millis = 0;
  const nlohmann::json j = probe_fields(cbor_wire_probe_request(1764385200000), millis);
  EXPECT_EQ(j.at("StreamName"), std::string(kCborProbeStream));
  EXPECT_EQ(j.at("ShardId"), "shardId-000000000000");
  EXPECT_EQ(j.at("ShardIteratorType"), "AT_TIMESTAMP");
  EXPECT_EQ(j.at("Timestamp"), 1764385200000);
  EXPECT_EQ(millis, 1764385200000);
}

// The real client, against a local server answering the probe.
class WireProbeTest : public ::testing::Test {
 protected:
  static std::unique_ptr<KinesisClient> client_for(const std::string& endpoint) {
    AwsConfig config;
    config.region = "us-east-1";
    config.kinesis_endpoint_url = endpoint;
    config.retry.max_attempts = 5;  // the probe makes one attempt whatever the configuration
    config.http.connect_timeout = std::chrono::milliseconds(2000);
    auto raw = aws::make_aws_json_client(
        aws::kinesis_service(), config, aws::make_curl_transport(config.http),
        aws::make_static_provider(StaticCredentials{"AKIDPROBE", "probe-secret", ""}));
    return std::make_unique<KinesisClient>(std::shared_ptr<aws::AwsJsonClient>(std::move(raw)));
  }

  static CannedResponse cbor_answer(int status, const nlohmann::json& body) {
    CannedResponse r;
    r.status = status;
    r.headers = {{"Content-Type", kCborType}};
    r.body = cbor_body(body);
    return r;
  }
};

TEST_F(WireProbeTest, KinesisLocalsAnswerPicksCbor) {
  LocalHttpServer server([](const ServedRequest&) {
    return cbor_answer(400, {{"__type", "ResourceNotFoundException"},
                             {"message",
                              "Stream arn arn:aws:kinesis:us-east-1:000000000000:"
                              "stream/kcl-cpp-cbor-wire-probe-no-such-stream not found"}});
  });
  auto client = client_for(server.url());
  std::string why;
  EXPECT_EQ(decide_wire(*client, KinesisWire::kAuto, why), Wire::kCbor);
  EXPECT_TRUE(contains(why,
                       "auto: 127.0.0.1 is not an AWS endpoint; the server read the CBOR "
                       "probe"))
      << why;
  const std::vector<ServedRequest> served = server.requests();
  ASSERT_EQ(served.size(), 1u);
  EXPECT_EQ(served[0].header("content-type"), kCborType);
  EXPECT_EQ(served[0].header("x-amz-target"), "Kinesis_20131202.GetShardIterator");
  EXPECT_TRUE(contains(served[0].header("authorization"), "AWS4-HMAC-SHA256"));
  // An hour before now, in epoch milliseconds.
  std::int64_t sent = 0;
  const nlohmann::json j = probe_fields(served[0].body, sent);
  EXPECT_EQ(j.at("ShardIteratorType"), "AT_TIMESTAMP");
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  EXPECT_GT(sent, now_ms - 3'600'000 - 60'000);
  EXPECT_LE(sent, now_ms - 3'600'000);
}

TEST_F(WireProbeTest, KinesalitesAnswerPicksJson) {
  LocalHttpServer server([](const ServedRequest&) {
    // kinesalite writes "Message" in its SerializationException (the client reads either).
    return cbor_answer(400, {{"__type", "SerializationException"},
                             {"Message", "Start of structure or map found where not expected."}});
  });
  auto client = client_for(server.url());
  std::string why;
  EXPECT_EQ(decide_wire(*client, KinesisWire::kAuto, why), Wire::kJson);
  EXPECT_TRUE(contains(why, "SerializationException")) << why;
  EXPECT_TRUE(contains(why, "kinesalite answers so")) << why;
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(WireProbeTest, AServerErrorIsNotRetriedAndPicksJson) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse r;
    r.status = 500;
    r.body = "oops";
    return r;
  });
  auto client = client_for(server.url());
  std::string why;
  EXPECT_EQ(decide_wire(*client, KinesisWire::kAuto, why), Wire::kJson);
  EXPECT_TRUE(contains(why, "answered in no stated encoding, not CBOR")) << why;
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(WireProbeTest, NoAnswerPicksJson) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse r;
    r.close_without_response = true;
    return r;
  });
  auto client = client_for(server.url());
  std::string why;
  EXPECT_EQ(decide_wire(*client, KinesisWire::kAuto, why), Wire::kJson);
  EXPECT_TRUE(contains(why, "the CBOR probe got no answer (Kinesis.GetShardIterator")) << why;
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(WireProbeTest, NothingListeningPicksJson) {
  std::string url;
  {
    LocalHttpServer gone([](const ServedRequest&) { return CannedResponse{}; });
    url = gone.url();
  }
  auto client = client_for(url);
  std::string why;
  EXPECT_EQ(decide_wire(*client, KinesisWire::kAuto, why), Wire::kJson);
  EXPECT_TRUE(contains(why, "the CBOR probe got no answer")) << why;
}

TEST_F(WireProbeTest, AConfiguredWireSendsNoProbe) {
  LocalHttpServer server([](const ServedRequest&) {
    return cbor_answer(400, {{"__type", "ResourceNotFoundException"}, {"message", "x"}});
  });
  auto client = client_for(server.url());
  std::string why;
  EXPECT_EQ(decide_wire(*client, KinesisWire::kJson, why), Wire::kJson);
  EXPECT_EQ(why, "configured");
  EXPECT_EQ(decide_wire(*client, KinesisWire::kCbor, why), Wire::kCbor);
  EXPECT_EQ(why, "configured");
  EXPECT_TRUE(server.requests().empty());
}

TEST_F(WireProbeTest, AnAwsEndpointSendsNoProbe) {
  // Never contacted: decide_wire answers from the host name.
  auto client = client_for("https://kinesis.us-east-1.amazonaws.com");
  std::string why;
  EXPECT_EQ(decide_wire(*client, KinesisWire::kAuto, why), Wire::kCbor);
  EXPECT_TRUE(contains(why, "is an AWS endpoint")) << why;
}

}  // namespace
}  // namespace kcl::kinesis
