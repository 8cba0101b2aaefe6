// `kcl put` as a user runs it, against kinesalite: lines from --file through the producer
// (aggregated), read back in order by `kcl tail`; records that fail are listed, make the exit
// status 1 and are written to --failures-out as their input lines. A stop signal ends the
// reading and sends what was read (within --stop-timeout-ms), with the summary.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "support/emulators.h"
#include "support/kcl_process.h"
#include "support/local_http_server.h"

namespace kcl::cli {
namespace {

class PutTest : public CliTest {
 protected:
  void SetUp() override { make_stream("put", 1); }

  std::vector<std::string> tail() {
    KclProcess p(aws_,
                 {"tail", "--stream", stream_, "--from", "trim-horizon", "--stop-at-end", "--raw"},
                 ::testing::TempDir() + "/" + stream_ + "-tail.out");
    EXPECT_TRUE(p.started());
    EXPECT_EQ(p.wait(), 0);
    return p.lines();
  }
};

TEST_F(PutTest, AggregatedLinesFromAFileAreReadBackInOrder) {
  const std::string in = ::testing::TempDir() + "/" + stream_ + ".in";
  std::vector<std::string> lines;
  {
    std::ofstream f(in);
    for (int i = 0; i < 2000; ++i) {
      lines.push_back("line " + std::to_string(i));
      f << lines.back() << "\n";
    }
  }
  KclProcess p(aws_,
               {"put", "--stream", stream_, "--file", in, "--aggregate", "--linger-ms", "20",
                "--partition-key", "one"},
               ::testing::TempDir() + "/" + stream_ + "-put.out");
  ASSERT_TRUE(p.started());
  EXPECT_EQ(p.wait(), 0);
  EXPECT_EQ(tail(), lines);
}

TEST_F(PutTest, FailedRecordsAreWrittenToFailuresOutAndTheExitStatusIsOne) {
  const std::string in = ::testing::TempDir() + "/" + stream_ + "-mixed.in";
  const std::string failures = ::testing::TempDir() + "/" + stream_ + "-failures.txt";
  std::vector<std::string> good, bad;
  {
    std::ofstream f(in);
    for (int i = 0; i < 30; ++i) {
      std::string line = i % 3 == 0 ? "{\"other\":" + std::to_string(i) + "}"
                                    : "{\"id\":\"k" + std::to_string(i) + "\"}";
      (i % 3 == 0 ? bad : good).push_back(line);
      f << line << "\n";
    }
  }
  KclProcess p(
      aws_,
      {"put", "--stream", stream_, "--file", in, "--key-field", "id", "--failures-out", failures},
      ::testing::TempDir() + "/" + stream_ + "-put2.out");
  ASSERT_TRUE(p.started());
  EXPECT_EQ(p.wait(), 1);
  std::ifstream f(failures);
  std::vector<std::string> written;
  for (std::string l; std::getline(f, l);) written.push_back(l);
  EXPECT_EQ(written, bad);
  EXPECT_EQ(tail(), good);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> file_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The summary's counts: records sent, failed, not sent (-1 each when there is no summary).
// (Read with sscanf, not std::regex: GCC 12 at -O1 with the sanitizers warns inside
// std::regex, tests/CMakeLists.txt.)
std::array<int, 3> summary_counts(const std::string& err) {
  const std::string lead = "kcl put: ";
  for (std::size_t at = err.find(lead); at != std::string::npos; at = err.find(lead, at + 1)) {
    std::array<int, 3> n{};
    if (std::sscanf(err.c_str() + at, "kcl put: %d records sent, %d failed, %d not sent", &n[0],
                    &n[1], &n[2]) == 3) {
      return n;
    }
  }
  return {-1, -1, -1};
}

// Many failures (25,000 lines without the key field): every line is in --failures-out, in
// order, though at most 10,000 are held at a time; stderr lists the first 100 and counts the
// rest, instead of a line each (an endless input against a stream that refuses every record
// grew without bound).
TEST_F(PutTest, ManyFailuresAreWrittenAsTheyComeAndListedOnceWithACount) {
  const std::string base = ::testing::TempDir() + "/" + stream_ + "-many";
  std::vector<std::string> lines;
  {
    std::ofstream f(base + ".in");
    for (int i = 0; i < 25000; ++i) {
      lines.push_back("{\"other\":" + std::to_string(i) + "}");
      f << lines.back() << "\n";
    }
  }
  KclProcess p(aws_,
               {"put", "--stream", stream_, "--file", base + ".in", "--key-field", "id",
                "--failures-out", base + ".failures"},
               base + ".out", base + ".err");
  ASSERT_TRUE(p.started());
  EXPECT_EQ(p.wait(), 1);
  EXPECT_EQ(file_lines(base + ".failures"), lines);
  const std::string err = read_file(base + ".err");
  std::size_t listed = 0;
  for (std::size_t at = err.find("kcl put: line "); at != std::string::npos;
       at = err.find("kcl put: line ", at + 1)) {
    ++listed;
  }
  EXPECT_EQ(listed, 100u) << err.substr(0, 2000);
  EXPECT_NE(err.find("... and 24900 more failed lines (all in --failures-out"), std::string::npos)
      << err.substr(err.size() > 2000 ? err.size() - 2000 : 0);
  EXPECT_NE(err.find("kcl put: 0 records sent, 25000 failed"), std::string::npos)
      << err.substr(err.size() > 2000 ? err.size() - 2000 : 0);
}

// A line longer than a record can hold (here 3 MiB, as from a file without its newlines) was
// read whole into memory, however long, and copied to --failures-out. Now it is let go as it
// is read and counted as failed with its length; the lines around it are written.
TEST_F(PutTest, ALineLongerThanARecordFailsWithItsLengthAndTheOthersAreWritten) {
  const std::string base = ::testing::TempDir() + "/" + stream_ + "-long";
  const std::size_t long_bytes = 3u << 20;
  {
    std::ofstream f(base + ".in");
    f << "first\n" << std::string(long_bytes, 'x') << "\nlast";
  }
  KclProcess p(
      aws_,
      {"put", "--stream", stream_, "--file", base + ".in", "--failures-out", base + ".failures"},
      base + ".out", base + ".err");
  ASSERT_TRUE(p.started());
  EXPECT_EQ(p.wait(), 1);
  const std::string err = read_file(base + ".err");
  EXPECT_NE(err.find("line 2: line is " + std::to_string(long_bytes) + " bytes"), std::string::npos)
      << err;
  EXPECT_NE(err.find("kcl put: 2 records sent, 1 failed"), std::string::npos) << err;
  EXPECT_EQ(read_file(base + ".failures").size(), 0u) << "the long line is not written out";
  EXPECT_EQ(tail(), (std::vector<std::string>{"first", "last"}));
}

// --failures-out naming the input: it was emptied and written while the input was read
// (once 10,000 lines had failed), so the input was cut short or its failed lines read back.
TEST_F(PutTest, FailuresOutThatIsTheInputIsRefusedAndTheInputKept) {
  const std::string in = ::testing::TempDir() + "/" + stream_ + "-same.in";
  {
    std::ofstream f(in);
    f << "one\ntwo\n";
  }
  KclProcess p(aws_, {"put", "--stream", stream_, "--file", in, "--failures-out", in}, in + ".out",
               in + ".err");
  ASSERT_TRUE(p.started());
  EXPECT_NE(p.wait(), 0);
  EXPECT_NE(read_file(in + ".err").find("is the input being read"), std::string::npos)
      << read_file(in + ".err");
  EXPECT_EQ(read_file(in), "one\ntwo\n");
  EXPECT_TRUE(tail().empty()) << "nothing put";
}

// SIGTERM while `kcl put` reads a pipe, with records read but not yet sent (a long linger):
// it was killed at once and they were lost without a word. Now the reading ends, what was
// read is sent, and the summary says so; every line read is in the stream or in
// --failures-out, and the exit status says the input was not read to its end.
TEST_F(PutTest, AStopSignalSendsTheRecordsReadAndPrintsTheSummary) {
  const std::string base = ::testing::TempDir() + "/" + stream_ + "-stop";
  const std::vector<std::string> lines = {"s0", "s1", "s2", "s3", "s4"};
  KclProcess p(aws_,
               {"put", "--stream", stream_, "--partition-key", "k", "--linger-ms", "60000",
                "--failures-out", base + ".failures"},
               base + ".out", base + ".err", /*pipe_stdin=*/true);
  ASSERT_TRUE(p.started());
  std::string input;
  for (const auto& l : lines) input += l + "\n";
  ASSERT_TRUE(p.write_stdin(input));
  ASSERT_TRUE(eventually([&] { return p.stdin_unread() == 0; }, 30s)) << "the input was not read";
  p.signal(SIGTERM);
  const int status = p.wait();
  const std::string err = read_file(base + ".err");
  const auto [sent, failed, not_sent] = summary_counts(err);
  ASSERT_GE(sent, 0) << "no summary; exit status " << status << "; stderr:\n" << err;
  EXPECT_EQ(failed, 0) << err;
  EXPECT_EQ(sent + not_sent, 5) << err;
  EXPECT_EQ(status, not_sent == 0 ? 130 : 1) << err;
  EXPECT_NE(err.find("stopped by a signal after line 5 of the input"), std::string::npos) << err;
  std::vector<std::string> written = tail();
  const std::vector<std::string> kept = file_lines(base + ".failures");
  EXPECT_EQ(written.size(), static_cast<std::size_t>(sent)) << err;
  written.insert(written.end(), kept.begin(), kept.end());
  EXPECT_EQ(std::multiset<std::string>(written.begin(), written.end()),
            std::multiset<std::string>(lines.begin(), lines.end()))
      << "every line read is in the stream or in --failures-out, once";
}

// SIGTERM while the only PutRecords call is never answered: the command ends within
// --stop-timeout-ms and a second's grace, counting the records of that call as not sent, and
// exits 1 (it was killed at once before, without a summary).
TEST(PutStopTest, AStopSignalEndsByTheDeadlineWhenACallIsNeverAnswered) {
  std::atomic<int> put_calls{0};
  testing::LocalHttpServer server([&](const testing::ServedRequest& r) {
    testing::CannedResponse resp;
    resp.headers = {{"Content-Type", "application/x-amz-json-1.1"}};
    if (r.header("x-amz-target").ends_with("ListShards")) {
      resp.body =
          R"({"Shards":[{"ShardId":"shardId-000000000000","HashKeyRange":{)"
          R"("StartingHashKey":"0","EndingHashKey":"340282366920938463463374607431768211455"},)"
          R"("SequenceNumberRange":{"StartingSequenceNumber":"1"}}]})";
      return resp;
    }
    ++put_calls;
    resp.delay = std::chrono::minutes(5);  // ends when the server stops
    resp.body = R"({"FailedRecordCount":0,"Records":[]})";
    return resp;
  });
  const std::string base = ::testing::TempDir() + "/put-stop-deadline";
  testing::ChildProcess p(
      {KCL_CLI_PATH, "--wire", "json", "put", "--stream", "scripted", "--linger-ms", "0",
       "--stop-timeout-ms", "200", "--failures-out", base + ".failures"},
      {"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=AKIDKCLTESTEXAMPLE",
       "AWS_SECRET_ACCESS_KEY=kcl-test-fake-secret-key", "AWS_ENDPOINT_URL_KINESIS=" + server.url(),
       "PATH=/usr/bin:/bin"},
      base + ".out", base + ".err", /*pipe_stdin=*/true);
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(p.write_stdin("a\nb\nc\n"));
  ASSERT_TRUE(eventually([&] { return put_calls.load() > 0; }, 30s)) << read_file(base + ".err");
  const auto signalled = std::chrono::steady_clock::now();
  p.signal(SIGTERM);
  ASSERT_TRUE(eventually([&] { return p.exit_status().has_value(); }, 20s))
      << "still running 20 s after the stop signal";
  const auto took = std::chrono::steady_clock::now() - signalled;
  const std::string err = read_file(base + ".err");
  EXPECT_EQ(p.exit_status(), 1) << err;
  EXPECT_LT(took, 5s) << "the stop deadline is 200 ms and a second's grace";
  EXPECT_EQ(summary_counts(err), (std::array<int, 3>{0, 0, 3})) << err;
  EXPECT_NE(err.find("not answered"), std::string::npos) << err;
}

}  // namespace
}  // namespace kcl::cli
