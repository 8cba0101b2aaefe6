// `kcl multilang` as its users run it: a Java-style properties file and a record processor
// written with npm aws-kcl (record_writer.js), against kinesalite and dynalite. Every record
// reaches a child; a graceful stop checkpoints each shard at its last record. And a child
// that breaks the protocol (a Python script written for the test) is replaced without the
// daemon exiting.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "aws/aws_json_client.h"
#include "aws/base64.h"
#include "dynamodb/dynamodb_client.h"
#include "kinesis/kinesis_client.h"
#include "leases/dynamodb_lease_store.h"
#include "support/aws_clients.h"
#include "support/child_process.h"
#include "support/emulators.h"

namespace kcl::multilang {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::eventually;
using testing::finished_lines;

std::string node_modules() {
  const char* env = std::getenv("KCL_NODE_MODULES");
  return env ? env : KCL_SOURCE_DIR "/node_modules";
}

class MultiLangTest : public ::testing::Test {
 protected:
  void SetUp() override {
    aws_ = testing::shared_emulators().aws_config();
    kinesis_ = testing::kinesis_client(aws_);
    ddb_ = testing::dynamodb_client(aws_);
    ASSERT_TRUE(kinesis_ && ddb_);
    stream_ = testing::unique_name("ml");
    app_ = testing::unique_name("ml-app");
    base_ = ::testing::TempDir() + "/" + app_;
    ASSERT_TRUE(kinesis_->create_stream(stream_, 2).ok());
    ASSERT_TRUE(kinesis_->wait_for_active(stream_, 30s).ok());
  }

  std::map<std::string, std::string> put(int n, int first = 0) {
    std::map<std::string, std::string> last;  // shard -> last sequence number
    std::vector<kinesis::PutRecordsEntry> entries;
    for (int i = first; i < first + n; ++i) {
      kinesis::PutRecordsEntry e;
      e.partition_key = "k" + std::to_string(i);
      e.data = "r" + std::to_string(i);
      entries.push_back(std::move(e));
    }
    auto r = kinesis_->put_records(stream_, entries);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) {
      for (const auto& res : r->records) {
        if (!last.count(res.shard_id) || ExtendedSequenceNumber(res.sequence_number) >
                                             ExtendedSequenceNumber(last[res.shard_id])) {
          last[res.shard_id] = res.sequence_number;
        }
      }
    }
    return last;
  }

  // The properties file, as the Java MultiLangDaemon reads it; `streams`: the line naming
  // the streams (kcl-cpp's streamNames for several).
  std::string properties(const std::string& executable, const std::string& streams = "") {
    const std::string path = base_ + ".properties";
    std::ofstream(path) << "# a MultiLangDaemon properties file\n"
                        << "executableName = " << executable << "\n"
                        << (streams.empty() ? "streamName = " + stream_ : streams) << "\n"
                        << "applicationName = " << app_ << "\n"
                        << "AWSCredentialsProvider = DefaultAWSCredentialsProviderChain\n"
                        << "processingLanguage = nodejs/20\n"
                        << "initialPositionInStream = TRIM_HORIZON\n"
                        << "regionName = us-east-1\n"
                        << "failoverTimeMillis = 4000\n"
                        << "timeoutInSeconds = 5\n";
    return path;
  }

  // `log`: where the daemon's log (its children's stderr among it) goes; the test's own
  // stderr when empty.
  ChildProcess daemon(const std::string& props, const std::string& out, const std::string& log = "",
                      bool own_group = false) {
    std::vector<std::string> env = testing::emulator_environment(aws_);
    const char* path = std::getenv("PATH");
    env.back() = std::string("PATH=") + (path ? path : "/usr/bin:/bin");
    env.push_back("KCL_NODE_MODULES=" + node_modules());
    env.push_back("MULTILANG_OUT=" + out);
    return ChildProcess({KCL_CLI_PATH, "multilang", "--properties", props}, env,
                        base_ + ".daemon.out", log, /*pipe_stdin=*/false, own_group);
  }

  std::map<std::string, std::string> checkpoints() {
    LeaseConfig lc;
    lc.application_name = app_;
    leases::DynamoDbLeaseStore store(ddb_, lc);
    std::map<std::string, std::string> out;
    auto all = store.list_leases();
    if (all.ok()) {
      for (const Lease& l : *all) out[l.lease_key] = l.checkpoint.to_string();
    }
    return out;
  }

  AwsConfig aws_;
  std::shared_ptr<kinesis::KinesisClient> kinesis_;
  std::shared_ptr<dynamodb::DynamoDbClient> ddb_;
  std::string stream_, app_, base_;
};

TEST_F(MultiLangTest, AnAwsKclNodeProcessorGetsEveryRecordAndCheckpoints) {
  const auto last = put(60);
  const std::string out = base_ + ".records";
  const std::string log_path = base_ + ".daemon.log";
  ChildProcess d =
      daemon(properties("node " KCL_SOURCE_DIR "/tests/integration/multilang/record_writer.js"),
             out, log_path);
  ASSERT_TRUE(d.started());
  ASSERT_TRUE(eventually([&] { return finished_lines(out).size() >= 60; }, 120s))
      << finished_lines(out).size() << " records written by the children";
  std::set<std::string> data;
  for (const auto& l : finished_lines(out)) data.insert(l.substr(l.rfind(' ') + 1));
  EXPECT_EQ(data.size(), 60u);
  ASSERT_TRUE(eventually(
      [&] {
        auto cps = checkpoints();
        for (const auto& [shard, seq] : last) {
          if (cps[shard] != seq) return false;
        }
        return true;
      },
      60s))
      << "the children's checkpoints reached the lease table";
  EXPECT_EQ(d.stop(), 0);
  auto cps = checkpoints();
  for (const auto& [shard, seq] : last) EXPECT_EQ(cps[shard], seq) << shard;
  // As under the Java MultiLangDaemon, a graceful stop's shutdownRequested is followed by
  // leaseLost (the worker lets the lease go) before the child is ended.
  std::string log;
  for (const auto& l : finished_lines(log_path)) log += l + "\n";
  for (const auto& [shard, seq] : last) {
    const auto asked = log.find("shutdown requested " + shard);
    ASSERT_NE(asked, std::string::npos) << shard << "\n" << log;
    EXPECT_NE(log.find("lease lost " + shard, asked), std::string::npos)
        << shard << ": no leaseLost after its shutdownRequested\n"
        << log;
  }
}

// streamNames (kcl-cpp's own key): one daemon, two streams, one lease table; each child's
// initialize names its stream, and every record of both streams reaches a child of its own
// stream.
TEST_F(MultiLangTest, StreamNamesReadsSeveralStreamsAndTellsEachChildItsStream) {
  put(20);
  const std::string second = testing::unique_name("ml2");
  ASSERT_TRUE(kinesis_->create_stream(second, 1).ok());
  ASSERT_TRUE(kinesis_->wait_for_active(second, 30s).ok());
  std::vector<kinesis::PutRecordsEntry> entries;
  for (int i = 0; i < 10; ++i) entries.push_back({"second" + std::to_string(i), "k", ""});
  ASSERT_TRUE(kinesis_->put_records(second, entries).ok());
  const std::string out = base_ + ".records";
  ChildProcess d =
      daemon(properties("node " KCL_SOURCE_DIR "/tests/integration/multilang/record_writer.js",
                        "streamNames = " + stream_ + ", " + second),
             out);
  ASSERT_TRUE(d.started());
  ASSERT_TRUE(eventually([&] { return finished_lines(out).size() >= 30; }, 120s))
      << finished_lines(out).size() << " records written by the children";
  EXPECT_EQ(d.stop(), 0);
  std::map<std::string, int> per_stream;
  for (const auto& l : finished_lines(out)) {
    const std::string stream = l.substr(0, l.find('/'));
    const std::string data = l.substr(l.rfind(' ') + 1);
    ++per_stream[stream];
    EXPECT_EQ(data.rfind("second", 0) == 0, stream == second) << l;
  }
  EXPECT_EQ(per_stream[stream_], 20);
  EXPECT_EQ(per_stream[second], 10);
  (void)kinesis_->delete_stream(second);
}

TEST_F(MultiLangTest, TwoDaemonsShareTheShardsOneSurvivesTheOthersKillAndARestartResumes) {
  const std::string out = base_ + ".records";
  const std::string props =
      properties("node " KCL_SOURCE_DIR "/tests/integration/multilang/record_writer.js");
  auto distinct = [&] {
    std::set<std::string> data;
    for (const auto& l : finished_lines(out)) data.insert(l.substr(l.rfind(' ') + 1));
    return data;
  };
  put(60);
  ChildProcess a = daemon(props, out);
  ChildProcess b = daemon(props, out);
  ASSERT_TRUE(a.started() && b.started());
  ASSERT_TRUE(eventually([&] { return distinct().size() >= 60; }, 120s)) << distinct().size();
  a.kill_now();  // SIGKILL: its leases expire after failoverTimeMillis (4 s)
  auto last = put(40, 60);
  ASSERT_TRUE(eventually([&] { return distinct().size() >= 100; }, 120s))
      << "the survivor took the killed daemon's shards: " << distinct().size();
  ASSERT_TRUE(eventually(
      [&] {
        auto cps = checkpoints();
        for (const auto& [shard, seq] : last) {
          if (cps[shard] != seq) return false;
        }
        return true;
      },
      60s));
  EXPECT_EQ(b.stop(), 0);
  // A restarted daemon resumes after the checkpoints: only the new records reach it.
  const std::size_t before = finished_lines(out).size();
  put(20, 100);
  ChildProcess c = daemon(props, out);
  ASSERT_TRUE(eventually([&] { return distinct().size() >= 120; }, 120s)) << distinct().size();
  EXPECT_EQ(c.stop(), 0);
  EXPECT_EQ(finished_lines(out).size() - before, 20u) << "nothing before the checkpoints again";
}

TEST_F(MultiLangTest, AChildThatPrintsIsKeptOneThatExitsIsReplacedAndTheDaemonGoesOn) {
  put(10);
  // Every child prints a line that is not a message before each status (skipped, as the Java
  // daemon skips it: no batch would get through otherwise); the first one, at its first
  // processRecords, prints garbage and exits, and the next child (started by the daemon)
  // gets the batch.
  const std::string script = base_ + ".py";
  const std::string marker = base_ + ".broke";
  const std::string out = base_ + ".records";
  std::ofstream(script) << R"(import json, os, sys
marker = sys.argv[1]
out = sys.argv[2]
for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    m = json.loads(line)
    a = m["action"]
    if a == "processRecords" and not os.path.exists(marker):
        open(marker, "w").close()
        print("this is not json", flush=True)
        sys.exit(1)
    if a == "processRecords":
        with open(out, "a") as f:
            for r in m["records"]:
                f.write(r["sequenceNumber"] + "\n")
        print(json.dumps({"action": "checkpoint", "sequenceNumber": None}), flush=True)
        reply = json.loads(sys.stdin.readline())
        assert reply["action"] == "checkpoint" and reply["error"] is None, reply
    print("done with", a, flush=True)
    print(json.dumps({"action": "status", "responseFor": a}), flush=True)
)";
  ChildProcess d = daemon(properties("python3 " + script + " " + marker + " " + out), out);
  ASSERT_TRUE(d.started());
  ASSERT_TRUE(eventually([&] { return finished_lines(out).size() >= 10; }, 120s))
      << "the replacement children got every record: " << finished_lines(out).size();
  const std::vector<std::string> got = finished_lines(out);
  const std::set<std::string> seqs(got.begin(), got.end());
  EXPECT_EQ(seqs.size(), 10u);
  EXPECT_EQ(d.stop(), 0) << "the daemon did not exit because of one child";
}

// Without timeoutInSeconds (as the Java daemon, no limit) a child that never answers holds
// its shard; a graceful stop hands the leases back after shutdownGraceMillis and then kills
// such children, so the daemon ends instead of waiting for them for ever.
TEST_F(MultiLangTest, AStopEndsEvenWhenAChildNeverAnswersAndThereIsNoTimeout) {
  put(4);
  const std::string script = base_ + ".py";
  const std::string out = base_ + ".records";
  std::ofstream(script) << R"(import json, sys, time
out = sys.argv[1]
for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    a = json.loads(line)["action"]
    if a == "processRecords":
        with open(out, "a") as f:
            f.write("hung\n")
        time.sleep(3600)
    print(json.dumps({"action": "status", "responseFor": a}), flush=True)
)";
  const std::string props = properties("python3 " + script + " " + out);
  std::string text;
  {
    std::ifstream in(props);
    for (std::string l; std::getline(in, l);) {
      if (l.rfind("timeoutInSeconds", 0) != 0) text += l + "\n";
    }
  }
  std::ofstream(props) << text << "shutdownGraceMillis = 2000\n";
  ChildProcess d = daemon(props, out);
  ASSERT_TRUE(d.started());
  ASSERT_TRUE(eventually([&] { return !finished_lines(out).empty(); }, 120s))
      << "a child got its first batch";
  d.signal(SIGTERM);
  EXPECT_TRUE(eventually([&] { return d.exit_status().has_value(); }, 60s))
      << "the daemon still runs 60 s after SIGTERM";
  EXPECT_EQ(d.exit_status(), std::optional<int>(0));
}

// A Ctrl-C on the terminal signals the whole foreground process group: the daemon alone gets
// it (its children have groups of their own) and stops each child through the protocol, so
// every child hears shutdownRequested and checkpoints, instead of dying beside the daemon.
TEST_F(MultiLangTest, ACtrlCToTheDaemonsGroupStopsTheChildrenThroughTheProtocol) {
  put(4);
  const std::string script = base_ + ".py";
  const std::string out = base_ + ".records";
  std::ofstream(script) << R"(import json, sys
out = sys.argv[1]
for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    m = json.loads(line)
    a = m["action"]
    if a in ("processRecords", "shutdownRequested"):
        with open(out, "a") as f:
            f.write(a + "\n")
        print(json.dumps({"action": "checkpoint", "sequenceNumber": None}), flush=True)
        json.loads(sys.stdin.readline())
    print(json.dumps({"action": "status", "responseFor": a}), flush=True)
)";
  ChildProcess d = daemon(properties("python3 " + script + " " + out), out, "", true);
  ASSERT_TRUE(d.started());
  ASSERT_TRUE(eventually(
      [&] {
        const auto lines = finished_lines(out);
        return std::count(lines.begin(), lines.end(), "processRecords") >= 1;
      },
      120s))
      << "a child got its first batch";
  d.signal_group(SIGINT);
  ASSERT_TRUE(eventually([&] { return d.exit_status().has_value(); }, 60s))
      << "the daemon still runs 60 s after SIGINT";
  EXPECT_EQ(d.exit_status(), std::optional<int>(0));
  const auto lines = finished_lines(out);
  EXPECT_GE(std::count(lines.begin(), lines.end(), "shutdownRequested"), 1)
      << "no child heard shutdownRequested: " << ::testing::PrintToString(lines);
}

// deadLetterFile: a child that dies on one record's batch (every time) gets the batch's halves
// until the record is found; it goes to the file and the shard goes on past it.
TEST_F(MultiLangTest, AChildThatKeepsFailingOnARecordHasItDeadLettered) {
  put(40);
  const std::string script = base_ + ".py";
  const std::string out = base_ + ".records";
  const std::string dead = base_ + ".dead.jsonl";
  std::ofstream(script) << R"(import base64, json, sys
out = sys.argv[1]
for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    m = json.loads(line)
    a = m["action"]
    if a == "processRecords":
        data = [base64.b64decode(r["data"]).decode() for r in m["records"]]
        if "r4" in data:
            sys.stderr.write("cannot handle r4\n")
            sys.exit(3)
        with open(out, "a") as f:
            for r in m["records"]:
                f.write(r["sequenceNumber"] + " " + base64.b64decode(r["data"]).decode() + "\n")
        print(json.dumps({"action": "checkpoint", "sequenceNumber": None}), flush=True)
        reply = json.loads(sys.stdin.readline())
        assert reply["action"] == "checkpoint" and reply["error"] is None, reply
    if a == "shutdownRequested":
        print(json.dumps({"action": "checkpoint", "sequenceNumber": None}), flush=True)
        sys.stdin.readline()
    print(json.dumps({"action": "status", "responseFor": a}), flush=True)
)";
  const std::string props = properties("python3 " + script + " " + out);
  std::ofstream(props, std::ios::app) << "deadLetterFile = " << dead << "\n"
                                      << "maxAttemptsBeforeDeadLetter = 2\n";
  ChildProcess d = daemon(props, out);
  ASSERT_TRUE(d.started());
  ASSERT_TRUE(eventually(
      [&] { return finished_lines(dead).size() == 1 && finished_lines(out).size() >= 39; }, 120s))
      << "dead letters " << finished_lines(dead).size() << ", records "
      << finished_lines(out).size();
  auto letter = nlohmann::json::parse(finished_lines(dead).at(0));
  auto data = aws::base64_decode(letter["data"].get<std::string>());
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, "r4");
  EXPECT_EQ(letter["partition_key"], "k4");
  EXPECT_NE(letter["error"].get<std::string>().find("process_records threw"), std::string::npos)
      << letter["error"];
  std::set<std::string> got;
  for (const std::string& l : finished_lines(out)) got.insert(l.substr(l.find(' ') + 1));
  EXPECT_EQ(got.size(), 39u);
  EXPECT_EQ(got.count("r4"), 0u);
  const std::string shard = letter["shard_id"];
  const ExtendedSequenceNumber bad(letter["sequence_number"].get<std::string>());
  EXPECT_TRUE(eventually(
      [&] {
        auto cps = checkpoints();
        return cps.count(shard) && cps[shard] != "TRIM_HORIZON" &&
               ExtendedSequenceNumber(cps[shard]) > bad;
      },
      30s))
      << "the checkpoint of " << shard << " did not pass the dead-lettered record";
  std::printf(
      "[ figures  ] multilang: 40 records, r4 dead-lettered after %d failed deliveries "
      "(a child exit each); 39 others processed\n",
      letter["attempts"].get<int>());
  EXPECT_EQ(d.stop(), 0);
}

}  // namespace
}  // namespace kcl::multilang
