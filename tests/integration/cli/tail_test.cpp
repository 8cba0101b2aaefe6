// `kcl tail` as a user runs it, against kinesalite: every record of a stream that was split
// while being written is printed once, a parent's records before its children's.
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <vector>

#include "kinesis/kinesis_client.h"
#include "support/emulators.h"
#include "support/eventually.h"
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
