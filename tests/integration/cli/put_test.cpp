// `kcl put` as a user runs it, against kinesalite: lines from --file through the producer
// (aggregated), read back in order by `kcl tail`; records that fail are listed, make the exit
// status 1 and are written to --failures-out as their input lines.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "support/emulators.h"
#include "support/kcl_process.h"

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

}  // namespace
}  // namespace kcl::cli
