// A rolling deploy of pull consumers, as an operator does it: four processes of the
// pull_workers example (8 threads each, every record taking a random 0..200 ms, so records are
// acknowledged out of order and some are always in flight) share an 8-shard stream on
// kinesalite and dynalite with leader-based assignment while records keep arriving. Each
// process is replaced in turn: its successor starts, the leader hands it its share (graceful
// handoffs: the old owners stop offering those shards, wait for the records taken, checkpoint
// and let go), then the old process gets SIGTERM (its shards are checkpointed the same way and
// handed back). No record may be completed twice, and none may be missed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/pull/pull_fixture.h"
#include "support/child_process.h"

namespace kcl::pull {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::eventually;

constexpr int kShards = 8;

// One pull_workers process and where its output goes.
struct PullProcess {
  std::string name;
  std::string err_path;
  std::unique_ptr<ChildProcess> process;

  // Its worker id, from the line it prints on stderr once started; empty before.
  std::string worker_id() const {
    std::ifstream in(err_path);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string first, id;
      if (words >> first >> id && first == "worker") return id;
    }
    return {};
  }
  // Lines in its stderr containing `text`.
  int count_in_log(const std::string& text) const {
    std::ifstream in(err_path);
    int n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(text) != std::string::npos;
    return n;
  }
  // The acks it says were refused (its last line: "completed N records (M acks refused ...").
  int acks_refused() const {
    std::ifstream in(err_path);
    for (std::string line; std::getline(in, line);) {
      const std::size_t at = line.find(" acks refused");
      const std::size_t open = line.rfind('(', at);
      if (at != std::string::npos && open != std::string::npos) {
        return std::atoi(line.c_str() + open + 1);
      }
    }
    return 0;
  }
};

class PullRollingDeployTest : public PullFixture {
 protected:
  void SetUp() override {
    connect("pull-roll");
    if (HasFatalFailure()) return;
    ASSERT_TRUE(kinesis_->create_stream(stream_, kShards).ok());
    ASSERT_TRUE(kinesis_->wait_for_active(stream_, 30s).ok());
  }

  void TearDown() override { stop_producing(); }

  // Puts 20 records every 100 ms until stop_producing(), remembering each one.
  void start_producing() {
    producer_ = std::thread([this] {
      for (int batch = 0; !stop_.load(); ++batch) {
        std::vector<kinesis::PutRecordsEntry> entries;
        for (int j = 0; j < 20; ++j) {
          kinesis::PutRecordsEntry e;
          e.partition_key = "key-" + std::to_string(batch) + "-" + std::to_string(j);
          e.data = "record-" + e.partition_key;
          entries.push_back(std::move(e));
        }
        auto r = kinesis_->put_records(stream_, entries);
        if (r.ok()) {
          std::lock_guard<std::mutex> lock(mu_);
          for (const auto& res : r->records) {
            if (!res.error_code.empty()) continue;  // not written: nobody can read it
            expected_.insert(res.shard_id + " " + res.sequence_number);
            if (last_[res.shard_id].empty() || ExtendedSequenceNumber(res.sequence_number) >
                                                   ExtendedSequenceNumber(last_[res.shard_id])) {
              last_[res.shard_id] = res.sequence_number;
            }
          }
        }
        std::this_thread::sleep_for(100ms);
      }
    });
  }
  void stop_producing() {
    stop_.store(true);
    if (producer_.joinable()) producer_.join();
  }

  PullProcess start_worker(const std::string& name) {
    PullProcess p;
    p.name = name;
    p.err_path = ::testing::TempDir() + "/" + app_ + "-" + name + ".err";
    p.process = std::make_unique<ChildProcess>(
        std::vector<std::string>{KCL_PULL_EXAMPLE_PATH, stream_, app_, "--threads", "8",
                                 "--work-us", "200000", "--print"},
        testing::emulator_environment(aws_),
        ::testing::TempDir() + "/" + app_ + "-" + name + ".out", p.err_path);
    return p;
  }

  // Every lease read by one of `workers`, no handoff pending, and each of them holding at
  // least its share (leases / workers, rounded down).
  bool settled_on(const std::vector<std::string>& workers) {
    std::this_thread::sleep_for(200ms);  // a lease table read per poll is plenty
    const std::vector<Lease> all = leases();
    if (all.size() != static_cast<std::size_t>(kShards)) return false;
    std::map<std::string, int> held;
    for (const Lease& l : all) {
      if (l.checkpoint_owner || !l.lease_owner) return false;
      ++held[*l.lease_owner];
    }
    for (const std::string& w : workers) {
      if (w.empty() || held[w] < kShards / static_cast<int>(workers.size())) return false;
    }
    return held.size() == workers.size();
  }

  std::thread producer_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::set<std::string> expected_;           // guarded by mu_
  std::map<std::string, std::string> last_;  // shard -> its last sequence number; guarded
};

TEST_F(PullRollingDeployTest, ReplacingEachOfFourWorkersInTurnRedeliversNoRecord) {
  start_producing();
  std::vector<PullProcess> all;   // every process ever started, for the counts at the end
  std::vector<std::size_t> live;  // indexes into `all`
  for (int i = 0; i < 4; ++i) {
    all.push_back(start_worker("old" + std::to_string(i)));
    ASSERT_TRUE(all.back().process->started());
    live.push_back(all.size() - 1);
  }
  auto live_ids = [&] {
    std::vector<std::string> ids;
    for (std::size_t i : live) ids.push_back(all[i].worker_id());
    return ids;
  };
  ASSERT_TRUE(eventually([&] { return settled_on(live_ids()); }, 180s))
      << "the four workers did not settle on 2 leases each";

  for (int step = 0; step < 4; ++step) {
    // The successor starts and takes its share by graceful handoffs.
    all.push_back(start_worker("new" + std::to_string(step)));
    ASSERT_TRUE(all.back().process->started());
    live.push_back(all.size() - 1);
    ASSERT_TRUE(eventually([&] { return settled_on(live_ids()); }, 180s))
        << "step " << step << ": the successor did not get its share";
    // The old process stops gracefully; its leases go to the others.
    const std::size_t old = live.front();
    live.erase(live.begin());
    EXPECT_EQ(all[old].process->stop(), 0) << all[old].name << " did not stop cleanly";
    ASSERT_TRUE(eventually([&] { return settled_on(live_ids()); }, 180s))
        << "step " << step << ": the leases of " << all[old].name << " did not settle";
  }
  stop_producing();

  // Every record completed (the watermarks reach every shard's last record), then the last
  // four stop gracefully too.
  std::map<std::string, int> times;
  auto count_completed = [&] {
    times.clear();
    for (const PullProcess& p : all) {
      for (const std::string& line : p.process->lines()) {
        std::istringstream in(line);
        std::string shard, seq;
        if (in >> shard >> seq) ++times[shard + " " + seq];
      }
    }
  };
  std::set<std::string> expected;
  std::map<std::string, std::string> last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    expected = expected_;
    last = last_;
  }
  ASSERT_TRUE(eventually(
      [&] {
        std::this_thread::sleep_for(200ms);
        const std::vector<Lease> now = leases();
        for (const Lease& l : now) {
          if (last.count(l.lease_key) && l.checkpoint.to_string() != last[l.lease_key])
            return false;
        }
        return !now.empty();
      },
      180s))
      << "the watermarks did not reach every shard's last record";
  for (std::size_t i : live) EXPECT_EQ(all[i].process->stop(), 0) << all[i].name;

  count_completed();
  std::size_t lost = 0, redelivered = 0, lines = 0;
  for (const std::string& key : expected) lost += times.count(key) ? 0 : 1;
  for (const auto& [key, n] : times) {
    lines += static_cast<std::size_t>(n);
    redelivered += static_cast<std::size_t>(n - 1);
  }
  int handoffs = 0, unacked_warnings = 0, refused = 0;
  for (const PullProcess& p : all) {
    handoffs += p.count_in_log("handed off (checkpointed");
    unacked_warnings += p.count_in_log("records taken were not acknowledged");
    refused += p.acks_refused();
  }
  std::printf(
      "rolling deploy of 4 pull workers (8 shards): %zu records put, %zu completed (%zu "
      "lines), %zu redelivered, %zu lost; %d graceful handoffs; %d shard stops with records "
      "not acknowledged in time; %d acks refused\n",
      expected.size(), times.size(), lines, redelivered, lost, handoffs, unacked_warnings, refused);
  RecordProperty("records", static_cast<int>(expected.size()));
  RecordProperty("redelivered", static_cast<int>(redelivered));
  RecordProperty("lost", static_cast<int>(lost));
  RecordProperty("handoffs", handoffs);
  EXPECT_GT(expected.size(), 500u) << "too few records to test anything";
  EXPECT_GT(handoffs, 0) << "no graceful handoff happened";
  EXPECT_EQ(lost, 0u);
  EXPECT_EQ(redelivered, 0u);
  EXPECT_EQ(refused, 0) << "acks refused: their records are delivered again";
  int shown = 0;
  for (const auto& [key, n] : times) {
    if (n > 1 && shown++ < 5) ADD_FAILURE() << key << " completed " << n << " times";
  }
}

}  // namespace
}  // namespace kcl::pull
