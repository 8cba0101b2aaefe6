// A worker reading with enhanced fan-out whose every SubscribeToShard fails (the scripted
// HTTP/2 server, fanout_server.js, answering 500 InternalFailure) flags its shard stalled
// with cause fanout_failing, naming the error, within stall_threshold + 5 s of taking the
// lease. Shards are listed on kinesalite and leased on dynalite, as always.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "aws/aws_json_client.h"
#include "aws/streaming_transport.h"
#include "retrieval/fanout_source.h"
#include "support/child_process.h"
#include "support/stall_test_support.h"
#include "support/worker_test_support.h"
#include "worker/worker_access.h"

namespace kcl::worker_test {
namespace {

using nlohmann::json;
using stall_test::TimedLog;

constexpr auto kThreshold = 2s;

class FanOutStallTest : public WorkerTest {};

TEST_F(FanOutStallTest, SubscriptionsFailingInARowAreFlaggedWithTheError) {
  create_stream(1);
  const std::string shard = shards().front().shard_id;
  const std::string base = ::testing::TempDir() + "/" + kcl::testing::unique_name("fanstall");
  const json script = {
      {"subscriptions",
       json::array({json::array({{{"httpError",
                                   {{"status", 500},
                                    {"type", "InternalFailure"},
                                    {"message", "scripted subscription failure"}}}}})})}};
  std::ofstream(base + ".json") << script.dump();
  auto server = kcl::testing::start_node_server(
      KCL_SOURCE_DIR "/tests/integration/fanout/fanout_server.js",
      {"--script", base + ".json", "--log", base + ".log"}, base + ".out");
  ASSERT_TRUE(server.ok()) << server.status();

  AwsConfig fan_aws = aws_;
  fan_aws.kinesis_endpoint_url = server->url();  // h2c: HTTP/2 with prior knowledge
  auto raw = aws::make_aws_json_client(aws::kinesis_service(), fan_aws);
  ASSERT_TRUE(raw.ok()) << raw.status();
  retrieval::FanOutContext fan;
  fan.kinesis = std::make_shared<kinesis::KinesisClient>(
      std::shared_ptr<aws::AwsJsonClient>(std::move(raw).value()));
  fan.transport = std::make_shared<aws::StreamingTransport>(fan_aws.http);
  fan.consumer_arn =
      "arn:aws:kinesis:us-east-1:000000000000:stream/" + stream_ + "/consumer/stall:1";

  WorkerConfig c = config("w1");
  c.retrieval.mode = RetrievalMode::kFanOut;
  c.processing.stall_threshold = kThreshold;
  worker::WorkerInternals internals;
  internals.records_source_factory = [fan, retrieval = c.retrieval](const std::string&,
                                                                    const std::string& id,
                                                                    const StartPosition& start) {
    return std::make_shared<retrieval::FanOutSource>(fan, id, start, retrieval,
                                                     SystemClock::instance());
  };
  auto tlog = std::make_shared<TimedLog>();
  Dependencies deps;
  deps.logger = tlog;
  auto w = worker::make_worker(c, factory("w1"), deps, std::move(internals));
  ASSERT_TRUE(w->start().ok());

  auto taken = tlog->wait_for({"lease " + shard + " taken"}, 60s);
  ASSERT_TRUE(taken.has_value()) << tlog->dump();
  auto line = tlog->wait_for({"shard " + shard + " stalled (fanout_failing)"}, 60s);
  ASSERT_TRUE(line.has_value()) << tlog->dump();
  const auto after = line->at - taken->at;
  std::printf("[ note ] %s flagged fanout_failing after %.1f s (threshold 2 s): %s\n",
              shard.c_str(), std::chrono::duration<double>(after).count(), line->text.c_str());
  EXPECT_LE(after, kThreshold + 5s);
  EXPECT_NE(line->text.find("SubscribeToShard failed"), std::string::npos) << line->text;
  EXPECT_NE(line->text.find("InternalFailure"), std::string::npos) << line->text;
  EXPECT_TRUE(stop(*w).ok());
}

}  // namespace
}  // namespace kcl::worker_test
