// `kcl consume` as a user runs it, against kinesalite and dynalite: checkpoints follow
// --checkpoint-interval (not one per batch) and are written when the stream goes idle too, so
// a crash prints nothing again after an idle interval; a graceful stop checkpoints the last
// record printed; --max prints exactly that many and the next run the rest; every record is
// printed once. --dead-letter-file with --reject-matching sets a record aside and prints the
// rest once, the checkpoint passing it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dynamodb/dynamodb_client.h"
#include "kinesis/kinesis_client.h"
#include "leases/dynamodb_lease_store.h"
#include "support/emulators.h"
#include "support/fifo_reader.h"
#include "support/kcl_process.h"

namespace kcl::cli {
namespace {

using namespace std::chrono_literals;

class ConsumeCheckpointTest : public CliTest {
 protected:
  void SetUp() override {
    make_stream("cli", 1);
    make_dynamodb();
    app_ = testing::unique_name("cli-app");
    out_path_ = ::testing::TempDir() + "/" + app_ + ".out";
  }

  void closed_output_stops_it(bool a_record_follows);

  std::vector<std::string> put(int from, int count) {
    std::vector<std::string> seqs;
    for (int i = from; i < from + count; ++i) {
      kinesis::PutRecordsEntry e;
      e.partition_key = "k";
      e.data = "r" + std::to_string(i);
      auto r = kinesis_->put_record(stream_, e);
      EXPECT_TRUE(r.ok()) << r.status();
      if (r.ok()) seqs.push_back(r->sequence_number);
    }
    return seqs;
  }

  // The stored checkpoint of the stream's only shard ("" before the lease exists).
  std::string checkpoint() {
    LeaseConfig lc;
    lc.application_name = app_;
    leases::DynamoDbLeaseStore store(ddb_, lc);
    auto all = store.list_leases();
    if (!all.ok() || all->empty()) return "";
    return all->front().checkpoint.sequence_number();
  }

  KclProcess consume(long long interval_ms, std::vector<std::string> more = {},
                     const std::string& out_path = "") {
    std::vector<std::string> args = {"consume",
                                     "--stream",
                                     stream_,
                                     "--app",
                                     app_,
                                     "--from",
                                     "trim-horizon",
                                     "--failover-ms",
                                     "3000",
                                     "--checkpoint-interval",
                                     std::to_string(interval_ms)};
    args.insert(args.end(), more.begin(), more.end());
    return KclProcess(aws_, args, out_path.empty() ? out_path_ : out_path);
  }

  std::string app_, out_path_;
};

TEST_F(ConsumeCheckpointTest, LongIntervalWritesNoCheckpointUntilTheGracefulStop) {
  const auto seqs = put(0, 5);
  ASSERT_EQ(seqs.size(), 5u);
  KclProcess p = consume(3600000);
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(eventually([&] { return p.lines().size() >= 5; }, 60s));
  const auto more = put(5, 5);
  ASSERT_TRUE(eventually([&] { return p.lines().size() >= 10; }, 60s));
  // Everything printed, nothing checkpointed yet: the interval has not passed.
  EXPECT_EQ(checkpoint(), "TRIM_HORIZON");
  EXPECT_EQ(p.stop(), 0);
  EXPECT_EQ(checkpoint(), more.back());  // the stop checkpoints the last record printed
  EXPECT_EQ(p.lines().size(), 10u);
}

// --option sets any worker option (kcl/worker_options.h), over the flags: here the lease
// table's name and the worker's id, as the lease table itself shows them.
TEST_F(ConsumeCheckpointTest, OptionSetsAnyWorkerOptionOverTheFlags) {
  ASSERT_EQ(put(0, 2).size(), 2u);
  const std::string table = app_ + "-opt";
  KclProcess p = consume(0, {"--worker-id", "from-flag", "--option", "worker_id=from-option",
                             "--option", "table_name=" + table});
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(eventually([&] { return p.lines().size() >= 2; }, 60s));
  LeaseConfig lc;
  lc.application_name = app_;
  lc.table_name = table;
  leases::DynamoDbLeaseStore store(ddb_, lc);
  auto all = store.list_leases();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(all->front().lease_owner.value_or(""), "from-option");
  EXPECT_EQ(checkpoint(), "") << "no lease table named after the application";
  EXPECT_EQ(p.stop(), 0);
}

TEST_F(ConsumeCheckpointTest, ZeroIntervalCheckpointsEveryBatch) {
  const auto seqs = put(0, 3);
  ASSERT_EQ(seqs.size(), 3u);
  KclProcess p = consume(0);
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(eventually([&] { return checkpoint() == seqs.back(); }, 60s)) << checkpoint();
  const auto more = put(3, 2);
  ASSERT_TRUE(eventually([&] { return checkpoint() == more.back(); }, 60s)) << checkpoint();
  EXPECT_EQ(p.stop(), 0);
  EXPECT_EQ(p.lines().size(), 5u);
}

TEST_F(ConsumeCheckpointTest, AnIdleShardIsCheckpointedSoACrashAfterAnIntervalPrintsNothingAgain) {
  const auto seqs = put(0, 20);
  ASSERT_EQ(seqs.size(), 20u);
  {
    KclProcess p = consume(1000);
    ASSERT_TRUE(p.started());
    ASSERT_TRUE(eventually([&] { return p.lines().size() >= 20; }, 60s));
    // Nothing more comes; the interval passes and the last record printed is checkpointed.
    ASSERT_TRUE(eventually([&] { return checkpoint() == seqs.back(); }, 30s)) << checkpoint();
    p.kill_now();  // SIGKILL: no final checkpoint
  }
  const std::string again = ::testing::TempDir() + "/" + app_ + ".again.out";
  KclProcess restarted = consume(1000, {}, again);
  ASSERT_TRUE(restarted.started());
  const auto marker = put(20, 1);
  ASSERT_TRUE(eventually([&] { return restarted.lines().size() >= 1; }, 60s));
  EXPECT_EQ(restarted.stop(), 0);
  const auto lines = restarted.lines();
  ASSERT_EQ(lines.size(), 1u) << "records printed again after the crash";
  ASSERT_EQ(marker.size(), 1u);
  EXPECT_NE(lines[0].find(marker[0]), std::string::npos) << "not the new record: " << lines[0];
}

// `kcl consume | head`: once the reader of its output is gone it stops gracefully (exit 0),
// checkpointed at the last record it did print: at the next record it cannot print (it
// delivered the same batch again for ever before, logging "cannot write to standard output"),
// and on a stream that goes quiet too, found without a record to write (it kept its leases
// and read on until the next record came before).
void ConsumeCheckpointTest::closed_output_stops_it(bool a_record_follows) {
  const auto first = put(0, 3);
  ASSERT_EQ(first.size(), 3u);
  testing::FifoReader out(::testing::TempDir() + "/" + app_ + ".fifo");
  ASSERT_TRUE(out.ok());
  KclProcess p = consume(3600000, {"--raw"}, out.path());
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(out.read_lines(3, 60s)) << "read: " << out.text();
  EXPECT_EQ(out.text(), "r0\nr1\nr2\n");
  out.close();  // as `head -3` exits
  if (a_record_follows) put(3, 3);
  std::optional<int> exited;
  ASSERT_TRUE(testing::eventually([&] { return (exited = p.exit_status()).has_value(); }, 60s))
      << "the command still runs after its output was closed";
  EXPECT_EQ(*exited, 0);
  EXPECT_EQ(checkpoint(), first.back()) << "checkpointed at the last record printed";
}

TEST_F(ConsumeCheckpointTest, AClosedOutputStopsItAtTheLastRecordPrinted) {
  closed_output_stops_it(/*a_record_follows=*/true);
}

TEST_F(ConsumeCheckpointTest, AClosedOutputStopsItThoughNoRecordFollows) {
  closed_output_stops_it(/*a_record_follows=*/false);
}

TEST_F(ConsumeCheckpointTest, MaxPrintsExactlyThatManyAndTheNextRunPrintsTheRest) {
  const auto seqs = put(0, 30);
  ASSERT_EQ(seqs.size(), 30u);
  {
    KclProcess p = consume(3600000, {"--max", "7"});
    ASSERT_TRUE(p.started());
    EXPECT_EQ(p.wait(), 0);
    EXPECT_EQ(p.lines().size(), 7u);
    EXPECT_EQ(checkpoint(), seqs[6]) << "checkpointed at the 7th record printed";
  }
  const std::string rest = ::testing::TempDir() + "/" + app_ + ".rest.out";
  KclProcess p = consume(3600000, {"--max", "23"}, rest);
  ASSERT_TRUE(p.started());
  EXPECT_EQ(p.wait(), 0);
  EXPECT_EQ(p.lines().size(), 23u);
  EXPECT_EQ(checkpoint(), seqs.back());
}

TEST_F(ConsumeCheckpointTest, DeadLetterFileTakesARejectedRecordAndTheRestIsPrintedOnce) {
  const auto seqs = put(0, 30);
  ASSERT_EQ(seqs.size(), 30u);
  const std::string dead = ::testing::TempDir() + "/" + app_ + ".dead.jsonl";
  KclProcess p =
      consume(0, {"--dead-letter-file", dead, "--max-attempts", "2", "--reject-matching", "^r17$"});
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(eventually([&] { return checkpoint() == seqs.back(); }, 60s)) << checkpoint();
  EXPECT_EQ(p.stop(), 0);
  const auto printed = p.lines();
  EXPECT_EQ(printed.size(), 29u) << "every other record printed exactly once";
  for (const std::string& line : printed) {
    EXPECT_EQ(line.find(seqs[17]), std::string::npos) << "the rejected record was printed";
  }
  std::ifstream in(dead);
  std::vector<std::string> letters;
  for (std::string l; std::getline(in, l);) letters.push_back(l);
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_NE(letters[0].find("\"sequence_number\":\"" + seqs[17] + "\""), std::string::npos)
      << letters[0];
  EXPECT_NE(letters[0].find("matches --reject-matching"), std::string::npos) << letters[0];
}

}  // namespace
}  // namespace kcl::cli
