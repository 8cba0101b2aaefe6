// kcl multilang's parts: the properties file, the child's command line, and the protocol
// with scripted children (small Python programs): checkpoints answered with the Java error
// names, a child that never answers, and one that exits.
#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "multilang/multilang_processor.h"
#include "multilang/properties.h"

namespace kcl::multilang {
namespace {

using namespace std::chrono_literals;

TEST(PropertiesTest, ReadsJavaStylePropertiesFiles) {
  auto p = parse_properties(
      "# comment\n! another\nexecutableName = python3 sample.py\nstreamName: orders\n"
      "applicationName=audit\nlong = a \\\n   b\n\n",
      "app.properties");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->at("executableName"), "python3 sample.py");
  EXPECT_EQ(p->at("streamName"), "orders");
  EXPECT_EQ(p->at("applicationName"), "audit");
  EXPECT_EQ(p->at("long"), "a b");
  auto escaped = parse_properties("path = C\\:\\\\tmp\nname = caf\\u00e9\\tbar\n", "e.properties");
  ASSERT_TRUE(escaped.ok()) << escaped.status();
  EXPECT_EQ(escaped->at("path"), "C:\\tmp");
  EXPECT_EQ(escaped->at("name"), "caf\xc3\xa9\tbar");
  auto bad = parse_properties("ok = 1\nno separator here\n", "x.properties");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("x.properties line 2"), std::string::npos) << bad.status();
}

TEST(PropertiesTest, BuildsTheWorkerAndNamesEveryProblem) {
  auto ok = settings_from_properties({{"executableName", "node 'my app.js' --fast"},
                                      {"streamName", "orders"},
                                      {"applicationName", "audit"},
                                      {"initialPositionInStream", "TRIM_HORIZON"},
                                      {"failoverTimeMillis", "4000"},
                                      {"maxRecords", "500"},
                                      {"timeoutInSeconds", "7"},
                                      {"retrievalMode", "FANOUT"},
                                      {"metricsLevel", "NONE"}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->child.command, (std::vector<std::string>{"node", "my app.js", "--fast"}));
  EXPECT_EQ(ok->worker.stream_name, "orders");
  EXPECT_EQ(ok->worker.leases.application_name, "audit");
  EXPECT_EQ(ok->worker.initial_position.kind, StartPosition::Kind::kTrimHorizon);
  EXPECT_EQ(ok->worker.leases.failover_time, 4000ms);
  EXPECT_EQ(ok->worker.retrieval.max_records_per_call, 500);
  EXPECT_EQ(ok->child.response_timeout, 7s);
  EXPECT_EQ(ok->worker.retrieval.mode, RetrievalMode::kFanOut);
  EXPECT_EQ(ok->ignored_keys, (std::vector<std::string>{"metricsLevel"}));
  auto by_arn = settings_from_properties(
      {{"executableName", "python3 p.py"},
       {"streamArn", "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"},
       {"applicationName", "audit"},
       {"tableName", "audit-leases"},
       {"AWSCredentialsProvider", "DefaultAWSCredentialsProviderChain"}});
  ASSERT_TRUE(by_arn.ok()) << by_arn.status();
  EXPECT_EQ(by_arn->worker.stream_name, "orders");
  EXPECT_EQ(by_arn->worker.aws.region, "eu-west-1");
  EXPECT_EQ(by_arn->worker.leases.table_name, "audit-leases");
  EXPECT_TRUE(by_arn->ignored_keys.empty()) << "the credentials provider key is understood";
  auto bad = settings_from_properties(
      {{"streamName", "orders"}, {"maxRecords", "lots"}, {"initialPositionInStream", "SOON"}});
  ASSERT_FALSE(bad.ok());
  for (const char* what : {"executableName is required", "applicationName is required",
                           "maxRecords = 'lots'", "initialPositionInStream = 'SOON'"}) {
    EXPECT_NE(bad.status().message().find(what), std::string::npos) << bad.status();
  }
}

// Records what the processor asks of the checkpointer; answers with `result`.
class FakeCheckpointer final : public Checkpointer {
 public:
  Status result;
  std::vector<std::string> calls;
  Status checkpoint() override {
    calls.push_back("last");
    return result;
  }
  Status checkpoint(const Record& r) override { return checkpoint(r.sequence_number, 0); }
  Status checkpoint(std::string_view seq, SubSequenceNumber sub) override {
    calls.push_back(std::string(seq) + "#" + std::to_string(sub));
    return result;
  }
  Status prepare_checkpoint(std::string_view, SubSequenceNumber, std::string_view) override {
    return Status::Ok();
  }
  Status commit_prepared() override { return Status::Ok(); }
  ExtendedSequenceNumber last_checkpoint() const override {
    return ExtendedSequenceNumber::trim_horizon();
  }
};

class ScriptedChildTest : public ::testing::Test {
 protected:
  // A child running `body` (Python) for each message `m` (action `a`); `reply(obj)` writes a
  // line.
  ChildOptions child(const std::string& body) {
    const std::string path = ::testing::TempDir() + "/child-" + std::to_string(::getpid()) + "-" +
                             std::to_string(++counter_) + ".py";
    std::ofstream(path) << "import json, sys, time\n"
                           "def reply(o):\n"
                           "    print(json.dumps(o), flush=True)\n"
                           "for line in sys.stdin:\n"
                           "    if not line.strip():\n"
                           "        continue\n"
                           "    m = json.loads(line)\n"
                           "    a = m['action']\n"
                        << body;
    ChildOptions o;
    o.command = {"python3", path};
    o.response_timeout = 2s;
    return o;
  }
  void init(MultiLangProcessor& p) {
    InitializationInput in;
    in.shard_id = "shardId-000000000001";
    p.initialize(in);
  }
  std::vector<Record> records() {
    Record r;
    r.sequence_number = "49590338271490256608559692538361571095921575989136588898";
    r.data = "hello";
    return {r};
  }
  static inline int counter_ = 0;
};

TEST_F(ScriptedChildTest, CheckpointsAreAnsweredWithTheJavaErrorNames) {
  const std::string seen = ::testing::TempDir() + "/errors-" + std::to_string(::getpid());
  MultiLangProcessor p(child("    if a == 'processRecords':\n"
                             "        reply({'action': 'checkpoint', 'sequenceNumber': None})\n"
                             "        r = json.loads(sys.stdin.readline())\n"
                             "        open('" +
                             seen +
                             "', 'a').write(str(r['error']) + '\\n')\n"
                             "    reply({'action': 'status', 'responseFor': a})\n"),
                       nullptr);
  init(p);
  FakeCheckpointer cp;
  auto recs = records();
  for (Status result : {Status::Ok(), Status(StatusCode::kLeaseLost, "gone"),
                        Status(StatusCode::kInvalidArgument, "before the checkpoint")}) {
    cp.result = result;
    p.process_records(ProcessRecordsInput{recs, cp, 0});
  }
  std::ifstream in(seen);
  std::vector<std::string> errors;
  for (std::string l; std::getline(in, l);) errors.push_back(l);
  EXPECT_EQ(errors,
            (std::vector<std::string>{"None", "ShutdownException", "IllegalArgumentException"}));
  EXPECT_EQ(cp.calls.size(), 3u);
  EXPECT_EQ(p.children_started(), 1);
}

TEST_F(ScriptedChildTest, AChildThatNeverAnswersIsStoppedAndReplaced) {
  MultiLangProcessor p(child("    if a == 'processRecords':\n"
                             "        time.sleep(60)\n"
                             "    reply({'action': 'status', 'responseFor': a})\n"),
                       nullptr);
  init(p);
  FakeCheckpointer cp;
  auto recs = records();
  const auto start = std::chrono::steady_clock::now();
  try {
    p.process_records(ProcessRecordsInput{recs, cp, 0});
    FAIL() << "a child that never answers must fail the call";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("did not answer in time"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "bounded by the response timeout";
  // The next delivery starts a new child (which hangs again: the count shows the restart).
  EXPECT_THROW(p.process_records(ProcessRecordsInput{recs, cp, 0}), std::runtime_error);
  EXPECT_EQ(p.children_started(), 2);
}

TEST_F(ScriptedChildTest, AChildThatExitsIsReportedWithItsExitStatus) {
  MultiLangProcessor p(child("    if a == 'processRecords':\n"
                             "        sys.exit(3)\n"
                             "    reply({'action': 'status', 'responseFor': a})\n"),
                       nullptr);
  init(p);
  FakeCheckpointer cp;
  auto recs = records();
  try {
    p.process_records(ProcessRecordsInput{recs, cp, 0});
    FAIL() << "a child that exits must fail the call";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("exit status 3"), std::string::npos) << e.what();
  }
}

TEST_F(ScriptedChildTest, ACheckpointDuringInitializeIsRefused) {
  const std::string seen = ::testing::TempDir() + "/init-" + std::to_string(::getpid());
  MultiLangProcessor p(child("    if a == 'initialize':\n"
                             "        reply({'action': 'checkpoint', 'sequenceNumber': None})\n"
                             "        r = json.loads(sys.stdin.readline())\n"
                             "        open('" +
                             seen +
                             "', 'w').write(str(r['error']))\n"
                             "    reply({'action': 'status', 'responseFor': a})\n"),
                       nullptr);
  init(p);
  std::ifstream in(seen);
  std::string error;
  std::getline(in, error);
  EXPECT_EQ(error, "InvalidStateException");
}

TEST_F(ScriptedChildTest, ShardEndedCheckpointsShardEndAndLeaseLostRefusesCheckpoints) {
  const std::string seen = ::testing::TempDir() + "/ends-" + std::to_string(::getpid());
  const std::string script =
      "    if a in ('shardEnded', 'leaseLost'):\n"
      "        reply({'action': 'checkpoint', 'sequenceNumber': None})\n"
      "        r = json.loads(sys.stdin.readline())\n"
      "        open('" +
      seen +
      "', 'a').write(a + ' ' + str(r['error']) + '\\n')\n"
      "    reply({'action': 'status', 'responseFor': a})\n";
  FakeCheckpointer cp;
  {
    MultiLangProcessor p(child(script), nullptr);
    init(p);
    p.shard_ended(cp);  // null sequence number inside shardEnded: SHARD_END
  }
  {
    MultiLangProcessor p(child(script), nullptr);
    init(p);
    p.lease_lost();
  }
  std::ifstream in(seen);
  std::vector<std::string> got;
  for (std::string l; std::getline(in, l);) got.push_back(l);
  EXPECT_EQ(got, (std::vector<std::string>{"shardEnded None", "leaseLost InvalidStateException"}));
  EXPECT_EQ(cp.calls, (std::vector<std::string>{"last"})) << "one checkpoint: the shard's end";
}

TEST_F(ScriptedChildTest, AStatusForAnotherActionIsAProtocolError) {
  MultiLangProcessor p(child("    if a == 'processRecords':\n"
                             "        reply({'action': 'status', 'responseFor': 'initialize'})\n"
                             "        continue\n"
                             "    reply({'action': 'status', 'responseFor': a})\n"),
                       nullptr);
  init(p);
  FakeCheckpointer cp;
  auto recs = records();
  try {
    p.process_records(ProcessRecordsInput{recs, cp, 0});
    FAIL() << "a wrong responseFor must fail the call";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("with a status for initialize"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kcl::multilang
