// `kcl tail` as a user runs it, against kinesalite: every record of a stream that was split
// while being written is printed once, a parent's records before its children's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "kinesis/kinesis_client.h"
#include "support/emulators.h"
#include "support/eventually.h"
#include "support/fifo_reader.h"
#include "support/kcl_process.h"

namespace kcl::cli {
namespace {

class TailTest : public CliTest {
 protected:
  void SetUp() override { make_stream("tail", 1); }

  void put(const std::string& prefix, int n) {
    for (int i = 0; i < n; ++i) {
      kinesis::PutRecordsEntry e;
      e.partition_key = "k";
      e.data = prefix + std::to_string(i);
      ASSERT_TRUE(kinesis_->put_record(stream_, e).ok());
    }
  }
};

TEST_F(TailTest, PrintsEveryRecordOnceParentsBeforeChildren) {
  put("a", 5);
  auto shards = kinesis_->list_shards(stream_);
  ASSERT_TRUE(shards.ok() && shards->size() == 1u);
  ASSERT_TRUE(kinesis_
                  ->split_shard(stream_, shards->front().shard_id,
                                "170141183460469231731687303715884105728")
                  .ok());
  ASSERT_TRUE(kinesis_->wait_for_active(stream_, 30s).ok());
  put("b", 5);

  KclProcess p(aws_,
               {"tail", "--stream", stream_, "--from", "trim-horizon", "--stop-at-end", "--raw"},
               ::testing::TempDir() + "/" + stream_ + ".out");
  ASSERT_TRUE(p.started());
  EXPECT_EQ(p.wait(), 0);
  EXPECT_EQ(p.lines(),
            (std::vector<std::string>{"a0", "a1", "a2", "a3", "a4", "b0", "b1", "b2", "b3", "b4"}));
}

// Following a stream: each record reaches the output while the command runs (it sat in the
// stream buffer until exit before), and a stop signal sent twice at once (GNU timeout signals
// the command and then its process group) is one graceful stop that keeps what was read.
TEST_F(TailTest, ARecordIsPrintedWhileItRunsAndTwoSignalsAtOnceAreOneStop) {
  KclProcess p(aws_, {"tail", "--stream", stream_, "--from", "trim-horizon", "--raw"},
               ::testing::TempDir() + "/" + stream_ + "-follow.out");
  ASSERT_TRUE(p.started());
  put("f", 2);
  ASSERT_TRUE(testing::eventually([&] { return p.lines().size() == 2; }, 60s))
      << "printed " << p.lines().size() << " of 2 records while running";
  p.signal(SIGTERM);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 0);
  EXPECT_EQ(p.lines(), (std::vector<std::string>{"f0", "f1"}));
}

// `kcl tail | head -2` on a stream that goes quiet: the closed output is found without a
// record to write, and the command ends (it read every shard on until the next record came).
TEST_F(TailTest, AClosedOutputEndsItThoughNoRecordFollows) {
  put("q", 2);
  testing::FifoReader out(::testing::TempDir() + "/" + stream_ + ".fifo");
  ASSERT_TRUE(out.ok());
  KclProcess p(aws_, {"tail", "--stream", stream_, "--from", "trim-horizon", "--raw"}, out.path());
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(out.read_lines(2, 60s)) << "read: " << out.text();
  EXPECT_EQ(out.text(), "q0\nq1\n");
  out.close();
  std::optional<int> exited;
  ASSERT_TRUE(testing::eventually([&] { return (exited = p.exit_status()).has_value(); }, 60s))
      << "the command still runs after its output was closed";
  EXPECT_EQ(*exited, 0);
}

// An output that fails (a full disk) is an error with its cause, not a quiet exit 0 with what
// was printed cut short.
TEST_F(TailTest, AnOutputThatFailsIsAnErrorNamingItsCause) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  put("e", 3);
  const std::string err = ::testing::TempDir() + "/" + stream_ + "-full.err";
  KclProcess p(aws_, {"tail", "--stream", stream_, "--from", "trim-horizon", "--stop-at-end"},
               "/dev/full", err);
  ASSERT_TRUE(p.started());
  EXPECT_NE(p.wait(), 0);
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("cannot write standard output: No space left on device"), std::string::npos)
      << text;
}

TEST_F(TailTest, MaxStopsAfterThatManyRecordsAndAMissingStreamIsAnError) {
  put("r", 8);
  KclProcess p(aws_, {"tail", "--stream", stream_, "--from", "trim-horizon", "--max", "3", "--raw"},
               ::testing::TempDir() + "/" + stream_ + "-max.out");
  ASSERT_TRUE(p.started());
  EXPECT_EQ(p.wait(), 0);
  EXPECT_EQ(p.lines(), (std::vector<std::string>{"r0", "r1", "r2"}));

  KclProcess missing(aws_, {"tail", "--stream", stream_ + "-none", "--stop-at-end"},
                     ::testing::TempDir() + "/" + stream_ + "-none.out");
  ASSERT_TRUE(missing.started());
  EXPECT_NE(missing.wait(), 0);
}

TEST_F(TailTest, ReadsAtTheReadRateGivenAndRefusesOneBelowAKilobyte) {
  put("q", 3);
  KclProcess paced(aws_,
                   {"tail", "--stream", stream_, "--from", "trim-horizon", "--stop-at-end", "--raw",
                    "--read-rate", "1024"},
                   ::testing::TempDir() + "/" + stream_ + "-rate.out");
  ASSERT_TRUE(paced.started());
  EXPECT_EQ(paced.wait(), 0);
  EXPECT_EQ(paced.lines(), (std::vector<std::string>{"q0", "q1", "q2"}));

  KclProcess low(aws_, {"tail", "--stream", stream_, "--stop-at-end", "--read-rate", "100"},
                 ::testing::TempDir() + "/" + stream_ + "-low.out");
  ASSERT_TRUE(low.started());
  EXPECT_NE(low.wait(), 0) << "a read rate below 1024 bytes a second is refused";
}

}  // namespace
}  // namespace kcl::cli
