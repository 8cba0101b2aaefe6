// `kcl consume --cloudwatch-metrics emf:FILE --log-format json` against kinesalite and
// dynalite: the Embedded Metric Format lines name the Java KCL's metrics, and the records
// they count add up to the records printed; every line on stderr is a JSON log line.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/kcl_process.h"

namespace kcl::cli {
namespace {

using namespace std::chrono_literals;

class ConsumeMetricsTest : public CliTest {};

TEST_F(ConsumeMetricsTest, EmfLinesCountEveryRecordUnderJavaNames) {
  make_stream("cw", 2);
  for (int i = 0; i < 40; ++i) {
    kinesis::PutRecordsEntry e;
    e.partition_key = "k" + std::to_string(i);
    e.data = "r" + std::to_string(i);
    ASSERT_TRUE(kinesis_->put_record(stream_, e).ok());
  }
  const std::string app = testing::unique_name("cw-app");
  const std::string emf = ::testing::TempDir() + "/" + app + ".emf";
  KclProcess p(
      aws_,
      {"consume", "--stream", stream_, "--app", app, "--from", "trim-horizon", "--max", "40",
       "--cloudwatch-metrics", "emf:" + emf, "--metrics-level", "SUMMARY", "--log-format", "json"},
      ::testing::TempDir() + "/" + app + ".out", ::testing::TempDir() + "/" + app + ".err");
  ASSERT_TRUE(p.started());
  EXPECT_EQ(p.wait(), 0);  // stops by itself after 40 records, publishing what is left
  EXPECT_EQ(p.lines().size(), 40u);

  // --log-format json: the worker's log and the command's own messages, each line a JSON
  // object with time, level, component and message.
  std::ifstream err(::testing::TempDir() + "/" + app + ".err");
  std::vector<nlohmann::json> logged;
  for (std::string line; std::getline(err, line);) {
    auto doc = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << "not a JSON log line: " << line;
    for (const char* key : {"time", "level", "component", "message"}) {
      EXPECT_TRUE(doc.contains(key) && doc[key].is_string()) << key << " in " << line;
    }
    logged.push_back(std::move(doc));
  }
  bool started = false, stopped = false;
  for (const auto& doc : logged) {
    const std::string message = doc.value("message", "");
    started |= message.find("reading " + stream_ + " for application " + app) != std::string::npos;
    stopped |= message.find("stopped after 40 records") != std::string::npos;
  }
  EXPECT_TRUE(started && stopped) << "the command's own messages are JSON lines too ("
                                  << logged.size() << " lines)";

  std::ifstream in(emf);
  double records = 0;
  bool leases = false;
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    ++lines;
    auto doc = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << line;
    const auto& directive = doc["_aws"]["CloudWatchMetrics"][0];
    EXPECT_EQ(directive["Namespace"], app);
    for (const auto& m : directive["Metrics"]) {
      const std::string name = m["Name"];
      EXPECT_TRUE(doc[name].is_number()) << line;
      EXPECT_EQ(name.find('.') == std::string::npos || name.find(".Time") != std::string::npos,
                true)
          << "SUMMARY publishes only the Java KCL's names, not " << name;
    }
    if (doc.contains("RecordsProcessed")) {
      EXPECT_EQ(doc["Operation"], "ProcessTask");
      EXPECT_TRUE(doc.contains("ShardId"));
      records += doc["RecordsProcessed"].get<double>();
    }
    if (doc.contains("CurrentLeases")) leases = true;
  }
  EXPECT_GT(lines, 0);
  EXPECT_EQ(records, 40);
  EXPECT_TRUE(leases);
}

}  // namespace
}  // namespace kcl::cli
