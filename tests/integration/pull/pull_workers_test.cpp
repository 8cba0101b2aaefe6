// The pull consumer end to end, as its users run it: two processes of the pull_workers
// example (8 threads each, completing records in random order) share a 4-shard stream on
// kinesalite and dynalite. One is SIGKILLed mid-run and started again. Every record must be
// completed at least once; after a graceful stop of both, every shard's checkpoint is its
// last record.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "integration/pull/pull_fixture.h"
#include "kcl/pull_consumer.h"
#include "support/child_process.h"

namespace kcl::pull {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::eventually;

class PullWorkersTest : public PullFixture {
 protected:
  void SetUp() override {
    connect("pull");
    if (HasFatalFailure()) return;
    ASSERT_TRUE(kinesis_->create_stream(stream_, 4).ok());
    ASSERT_TRUE(kinesis_->wait_for_active(stream_, 30s).ok());
  }

  // Puts `n` records spread over the shards; remembers each one's shard and sequence number.
  void put(int n) {
    for (int i = 0; i < n; i += 250) {
      std::vector<kinesis::PutRecordsEntry> entries;
      for (int j = i; j < std::min(n, i + 250); ++j) {
        kinesis::PutRecordsEntry e;
        e.partition_key = "key-" + std::to_string(j);
        e.data = "record-" + std::to_string(j);
        entries.push_back(std::move(e));
      }
      auto r = kinesis_->put_records(stream_, entries);
      ASSERT_TRUE(r.ok()) << r.status();
      for (const auto& res : r->records) {
        ASSERT_TRUE(res.error_code.empty()) << res.error_code << " " << res.error_message;
        const std::string key = res.shard_id + " " + res.sequence_number;
        expected_.insert(key);
        if (last_[res.shard_id].empty() || ExtendedSequenceNumber(res.sequence_number) >
                                               ExtendedSequenceNumber(last_[res.shard_id])) {
          last_[res.shard_id] = res.sequence_number;
        }
      }
    }
  }

  ChildProcess worker(const std::string& name) {
    return ChildProcess(
        {KCL_PULL_EXAMPLE_PATH, stream_, app_, "--threads", "8", "--work-us", "2000", "--print"},
        testing::emulator_environment(aws_),
        ::testing::TempDir() + "/" + app_ + "-" + name + ".out");
  }

  // Every record completed by any process so far ("<shard> <sequence>").
  std::set<std::string> completed(const std::vector<const ChildProcess*>& processes) {
    std::set<std::string> out;
    for (const ChildProcess* p : processes) {
      for (const std::string& line : p->lines()) {
        std::istringstream in(line);
        std::string shard, seq;
        if (in >> shard >> seq) out.insert(shard + " " + seq);
      }
    }
    return out;
  }

  std::map<std::string, std::string> checkpoints() {
    std::map<std::string, std::string> out;
    for (const Lease& l : leases()) out[l.lease_key] = l.checkpoint.to_string();
    return out;
  }

  std::set<std::string> expected_;
  std::map<std::string, std::string> last_;  // shard -> its last sequence number
};

TEST_F(PullWorkersTest, EveryRecordIsCompletedThroughAKillAndCheckpointsEndAtTheLastRecord) {
  put(4000);
  ASSERT_EQ(expected_.size(), 4000u);
  ASSERT_EQ(last_.size(), 4u);
  ChildProcess a = worker("a");
  ChildProcess b = worker("b");
  ASSERT_TRUE(a.started() && b.started());
  // Mid-run: the first process has completed some records, not all.
  ASSERT_TRUE(eventually([&] { return a.lines().size() >= 300; }, 120s))
      << "a completed " << a.lines().size();
  a.kill_now();
  const std::size_t before_kill = completed({&a, &b}).size();
  EXPECT_LT(before_kill, expected_.size()) << "the kill came too late to test anything";
  ChildProcess a2 = worker("a2");
  ASSERT_TRUE(a2.started());

  // Every record completed by someone (the killed process's unacknowledged ones again by
  // whoever took its leases), and every shard's checkpoint at its last record.
  std::set<std::string> done;
  ASSERT_TRUE(eventually(
      [&] {
        done = completed({&a, &b, &a2});
        return done.size() >= expected_.size();
      },
      180s))
      << done.size() << " of " << expected_.size() << " records completed";
  for (const std::string& key : expected_)
    ASSERT_TRUE(done.count(key)) << key << " never completed";
  ASSERT_TRUE(eventually(
      [&] {
        auto cps = checkpoints();
        for (const auto& [shard, last] : last_) {
          if (cps[shard] != last) return false;
        }
        return true;
      },
      60s))
      << "the watermarks did not reach every shard's last record";

  EXPECT_EQ(b.stop(), 0);
  EXPECT_EQ(a2.stop(), 0);
  auto cps = checkpoints();
  for (const auto& [shard, last] : last_) {
    EXPECT_EQ(cps[shard], last) << shard << " after the graceful stop";
  }
}

// begin_shutdown() returns at once and its stop waits for the records taken but not yet
// acknowledged, which the same thread can still acknowledge meanwhile: the future is ready
// only after the last ack, and the checkpoint is then the shard's last record.
TEST_F(PullWorkersTest, BeginShutdownWaitsForAcksTheCallerStillMakes) {
  ASSERT_TRUE(kinesis_->create_stream(stream_ + "-one", 1).ok());
  ASSERT_TRUE(kinesis_->wait_for_active(stream_ + "-one", 30s).ok());
  stream_ += "-one";
  put(20);
  PullConsumerConfig config;
  config.worker.stream_name = stream_;
  config.worker.aws = aws_;
  config.worker.leases.application_name = app_;
  config.worker.initial_position = InitialPosition::trim_horizon();
  PullConsumer consumer(config);
  ASSERT_TRUE(consumer.start().ok());
  std::vector<PulledRecord> held;
  ASSERT_TRUE(eventually(
      [&] {
        for (auto& r : consumer.next_batch(20, 100ms)) held.push_back(std::move(r));
        return held.size() == 20;
      },
      60s))
      << held.size() << " of 20 records pulled";

  std::shared_future<Status> stopped = consumer.begin_shutdown();
  EXPECT_EQ(stopped.wait_for(300ms), std::future_status::timeout)
      << "the stop did not wait for the 20 records taken";
  // A thread watching for the worker to stop by itself is not held for the whole drain:
  // wait_for() comes back after its own timeout while the stop still waits for the acks.
  EXPECT_FALSE(consumer.wait_for(50ms).has_value());
  EXPECT_EQ(stopped.wait_for(0ms), std::future_status::timeout)
      << "wait_for() returned only once the stop was over";
  EXPECT_FALSE(consumer.worker_id().empty());
  for (PulledRecord& r : held) {
    ASSERT_TRUE(r.ack().ok());
    EXPECT_EQ(r.stream_name(), stream_) << "a record's stream, after its ack too";
    EXPECT_EQ(r.ack().code(), StatusCode::kFailedPrecondition) << "acknowledged twice";
  }
  ASSERT_EQ(stopped.wait_for(60s), std::future_status::ready);
  EXPECT_TRUE(stopped.get().ok()) << stopped.get();
  EXPECT_TRUE(consumer.shutdown().ok());  // the same result again
  auto cps = checkpoints();
  ASSERT_EQ(last_.size(), 1u);
  EXPECT_EQ(cps[last_.begin()->first], last_.begin()->second);
}

}  // namespace
}  // namespace kcl::pull
