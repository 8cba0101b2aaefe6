// WorkerConfig::validate() and enhanced fan-out: several streams read with fan-out are valid
// (a consumer per stream); only a consumer name Kinesis would refuse is a problem, named with
// the setting that fixes it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kcl/worker.h"

namespace kcl {
namespace {

WorkerConfig fan_out_on(std::vector<std::string> streams) {
  WorkerConfig c;
  c.leases.application_name = "audit";
  for (std::string& s : streams) c.streams.push_back(StreamConfig{std::move(s), {}});
  c.retrieval.mode = RetrievalMode::kFanOut;
  return c;
}

std::string joined(const std::vector<std::string>& problems) {
  std::string out;
  for (const std::string& p : problems) out += p + "\n";
  return out;
}

TEST(WorkerConfigFanOut, SeveralStreamsWithFanOutAreValid) {
  EXPECT_EQ(joined(fan_out_on({"orders", "payments"}).validate()), "");
  WorkerConfig tracked = fan_out_on({});
  tracked.stream_tracker = [] { return std::vector<StreamConfig>{{"orders", {}}}; };
  EXPECT_EQ(joined(tracked.validate()), "");
}

TEST(WorkerConfigFanOut, AnApplicationNameThatIsNoConsumerNameNeedsAConsumerName) {
  WorkerConfig c = fan_out_on({"orders", "payments"});
  c.leases.application_name = "audit:eu/1";
  c.leases.table_name = "audit-eu-1";  // the table is named on its own
  const std::string problems = joined(c.validate());
  EXPECT_NE(problems.find("application_name 'audit:eu/1'"), std::string::npos) << problems;
  EXPECT_NE(problems.find("set retrieval.consumer_name"), std::string::npos) << problems;
  c.retrieval.consumer_name = "audit-eu-1";
  EXPECT_EQ(joined(c.validate()), "");
  // Polling registers no consumer: any application name the lease table takes will do.
  c.retrieval.consumer_name.clear();
  c.retrieval.mode = RetrievalMode::kPolling;
  EXPECT_EQ(joined(c.validate()), "");
}

TEST(WorkerConfigFanOut, OneStreamIsCheckedTheSameWay) {
  WorkerConfig c;
  c.stream_name = "orders";
  c.leases.application_name = std::string(129, 'a');
  c.retrieval.mode = RetrievalMode::kFanOut;
  const std::string problems = joined(c.validate());
  EXPECT_NE(problems.find("set retrieval.consumer_name"), std::string::npos) << problems;
}

// A stream's own initial position AFTER_CHECKPOINT (a resume point) would make every root
// lease's checkpoint that sequence number: refused, naming the stream, as the worker's own is.
TEST(WorkerConfigStreams, AStreamsInitialPositionAfterCheckpointIsRefused) {
  WorkerConfig c;
  c.leases.application_name = "audit";
  c.streams = {{"orders", StartPosition::after_checkpoint(
                              "49590338271490256608559692538361571095921575989136588898")},
               {"payments", InitialPosition::trim_horizon()}};
  const std::string problems = joined(c.validate());
  EXPECT_NE(problems.find("streams[0].initial_position (stream orders) is AFTER_CHECKPOINT"),
            std::string::npos)
      << problems;
  EXPECT_EQ(problems.find("payments"), std::string::npos) << problems;
  c.streams[0].initial_position = InitialPosition::at_timestamp({});
  EXPECT_NE(joined(c.validate())
                .find("streams[0].initial_position (stream orders) is invalid: "
                      "AT_TIMESTAMP needs a timestamp"),
            std::string::npos)
      << joined(c.validate());
  c.streams[0].initial_position = InitialPosition::latest();
  EXPECT_EQ(joined(c.validate()), "");
}

}  // namespace
}  // namespace kcl
