// kcl consume's output and its processor: a shard whose records were not all printed (--max
// reached by another shard's thread that has not written them yet) is not checkpointed at
// SHARD_END; a closed pipe is told from a failing output, and found without a write; a
// checkpoint that keeps failing is logged once per series, not once per batch.
#include "consume_output.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace kcl::cli {
namespace {

Record record(int n, std::size_t bytes = 10) {
  Record r;
  r.set_shard_id("shardId-000000000001");
  r.set_sequence_number("4959033827149025660855969253836157109592157598913658" +
                        std::to_string(1000 + n));
  r.set_partition_key("k");
  r.set_data(std::string(bytes, 'd'));
  return r;
}

// Counts the checkpoints asked for, answering each with `answer`.
class CountingCheckpointer : public Checkpointer {
 public:
  Status answer;
  int at_shard_end = 0;
  int at_records = 0;
  Status checkpoint() override {
    ++at_shard_end;
    return answer;
  }
  Status checkpoint(const Record&) override { return Status::Ok(); }
  Status checkpoint(std::string_view, SubSequenceNumber) override {
    ++at_records;
    return answer;
  }
  Status prepare_checkpoint(std::string_view, SubSequenceNumber, std::string_view) override {
    return Status::Ok();
  }
  Status commit_prepared() override { return Status::Ok(); }
  ExtendedSequenceNumber last_checkpoint() const override {
    return ExtendedSequenceNumber::trim_horizon();
  }
};

struct Pipe {
  int read_end = -1;
  int write_end = -1;
  std::FILE* out = nullptr;
  Pipe() {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    read_end = fds[0];
    write_end = fds[1];
    out = ::fdopen(write_end, "w");
  }
  ~Pipe() {
    if (out != nullptr) std::fclose(out);
    if (read_end >= 0) ::close(read_end);
  }
  void close_reader() {
    ::close(read_end);
    read_end = -1;
  }
  // The bytes waiting in the pipe.
  int waiting() const {
    int n = 0;
    ::ioctl(read_end, FIONREAD, &n);
    return n;
  }
};

class ConsumeOutputTest : public ::testing::Test {
 protected:
  void SetUp() override { std::signal(SIGPIPE, SIG_IGN); }
};

TEST_F(ConsumeOutputTest, AShardCutByAnotherThreadsLastRecordsIsNotEndedThoughTheyAreUnwritten) {
  Pipe pipe;
  const int capacity = ::fcntl(pipe.write_end, F_GETPIPE_SZ);
  ASSERT_GT(capacity, 0);
  Output out(/*raw=*/true, /*max_records=*/2, pipe.out, pipe.write_end);
  // Shard B's thread takes the two records --max allows and blocks writing them (nobody
  // reads the pipe yet): they are granted, not written.
  std::vector<Record> big = {record(1, 4 * static_cast<std::size_t>(capacity)), record(2)};
  std::thread b([&] { EXPECT_EQ(out.write(big), 2); });
  while (pipe.waiting() < capacity) std::this_thread::yield();
  // Shard A's last batch gets nothing printed, then A ends.
  PrintingProcessor a(out, "shardId-A", std::chrono::milliseconds(0), false, {}, "");
  CountingCheckpointer checkpointer;
  InitializationInput init;
  a.initialize(init);
  std::vector<Record> batch = {record(3)};
  a.process_records(ProcessRecordsInput{batch, checkpointer});
  a.shard_ended(checkpointer);
  EXPECT_EQ(checkpointer.at_shard_end, 0) << "SHARD_END past a record never printed";
  EXPECT_FALSE(out.limit_reached()) << "the test needs B's records still unwritten here";
  // Let B finish.
  std::thread drain([&] {
    char buf[65536];
    while (::read(pipe.read_end, buf, sizeof buf) > 0) {
    }
  });
  b.join();
  std::fclose(pipe.out);
  pipe.out = nullptr;
  drain.join();
  EXPECT_TRUE(out.limit_reached());
}

TEST_F(ConsumeOutputTest, AShardPrintedWholeIsEndedWithShardEnd) {
  Pipe pipe;
  Output out(true, 0, pipe.out, pipe.write_end);
  PrintingProcessor p(out, "shardId-A", std::chrono::milliseconds(0), false, {}, "");
  CountingCheckpointer checkpointer;
  p.initialize(InitializationInput{});
  std::vector<Record> batch = {record(1), record(2)};
  p.process_records(ProcessRecordsInput{batch, checkpointer});
  p.shard_ended(checkpointer);
  EXPECT_EQ(checkpointer.at_shard_end, 1);
}

TEST_F(ConsumeOutputTest, AClosedPipeIsFoundWithoutAWriteAndIsNoFailure) {
  Pipe pipe;
  Output out(true, 0, pipe.out, pipe.write_end);
  EXPECT_FALSE(out.reader_gone());
  pipe.close_reader();
  EXPECT_TRUE(out.reader_gone());
  EXPECT_TRUE(out.closed());
  EXPECT_EQ(out.failure(), "");
  std::vector<Record> batch = {record(1)};
  EXPECT_EQ(out.write(batch), -1);
  EXPECT_EQ(out.failure(), "") << "a reader that left is not a failure";
}

TEST_F(ConsumeOutputTest, AFullDiskIsAFailureThatNamesItsCause) {
  std::FILE* full = std::fopen("/dev/full", "w");
  if (full == nullptr) GTEST_SKIP() << "no /dev/full";
  Output out(true, 0, full, ::fileno(full));
  std::vector<Record> batch = {record(1)};
  EXPECT_EQ(out.write(batch), -1);
  EXPECT_TRUE(out.closed());
  EXPECT_EQ(out.failure(), std::strerror(ENOSPC));
  std::fclose(full);
}

TEST_F(ConsumeOutputTest, ACheckpointThatKeepsFailingIsLoggedOncePerSeries) {
  Pipe pipe;
  std::thread drain([&] {
    char buf[4096];
    while (::read(pipe.read_end, buf, sizeof buf) > 0) {
    }
  });
  Output out(true, 0, pipe.out, pipe.write_end);
  PrintingProcessor p(out, "shardId-A", std::chrono::milliseconds(0), false, {}, "");
  CountingCheckpointer checkpointer;
  checkpointer.answer = Status(StatusCode::kUnavailable, "DynamoDB is throttling");
  p.initialize(InitializationInput{});
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 20; ++i) {
    std::vector<Record> batch = {record(i)};
    p.process_records(ProcessRecordsInput{batch, checkpointer});
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  std::size_t lines = 0;
  for (std::size_t at = err.find("checkpoint of shard shardId-A failed"); at != std::string::npos;
       at = err.find("checkpoint of shard shardId-A failed", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(checkpointer.at_records, 20);
  EXPECT_EQ(lines, 3u) << err;  // the 1st, 3rd and 10th
  std::fclose(pipe.out);
  pipe.out = nullptr;
  drain.join();
}

}  // namespace
}  // namespace kcl::cli
