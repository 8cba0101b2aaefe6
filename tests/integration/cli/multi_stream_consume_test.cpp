// kcl consume reading three streams of four shards through one lease table, three workers,
// as users run it: records flow in every stream while one stream's shard is split, a fourth
// stream is added to the --streams-file (SIGHUP), and one worker is SIGKILLed and started
// again. Every record put is printed (with its stream), the lines of a stream name only
// records of that stream, and after a graceful stop of all, every lease of the four streams
// is free.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "leases/dynamodb_lease_store.h"
#include "support/kcl_process.h"

namespace kcl::cli {
namespace {

using nlohmann::json;

class MultiStreamConsumeTest : public CliTest {
 protected:
  void SetUp() override {
    make_kinesis();
    make_dynamodb();
    app_ = testing::unique_name("multi-app");
    file_ = ::testing::TempDir() + "/" + app_ + ".streams";
    for (int i = 0; i < 4; ++i) {
      names_.push_back(testing::unique_name("multi" + std::to_string(i)));
      ASSERT_TRUE(kinesis_->create_stream(names_.back(), 4).ok());
    }
    for (const auto& n : names_) ASSERT_TRUE(kinesis_->wait_for_active(n, 30s).ok());
  }
  void TearDown() override {
    for (const auto& n : names_) (void)kinesis_->delete_stream(n);
  }

  void write_file(int streams) {
    std::ofstream out(file_);
    out << "# the streams of " << app_ << "\n";
    for (int i = 0; i < streams; ++i) out << names_[i] << "\n";
  }

  // `n` records in stream `i`, keys spread over its shards; remembers "<stream> <sequence>".
  void put(int i, int n) {
    std::vector<kinesis::PutRecordsEntry> entries;
    for (int k = 0; k < n; ++k) {
      entries.push_back({"r" + std::to_string(put_count_ + k), "key-" + std::to_string(k), ""});
    }
    put_count_ += n;
    auto r = kinesis_->put_records(names_[i], entries);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->failed_record_count, 0);
    for (const auto& e : r->records) expected_.insert(names_[i] + " " + e.sequence_number);
  }

  KclProcess worker(const std::string& name) {
    return KclProcess(aws_,
                      {"consume", "--streams-file", file_, "--app", app_, "--from", "trim-horizon",
                       "--failover-ms", "3000", "--checkpoint-interval", "0", "--worker-id", name},
                      ::testing::TempDir() + "/" + app_ + "." + name + ".out");
  }

  // "<stream> <sequence>" of every line the processes printed, checking each line's stream.
  std::multiset<std::string> printed(const std::vector<const KclProcess*>& ps) {
    std::multiset<std::string> out;
    for (const KclProcess* p : ps) {
      for (const std::string& line : p->lines()) {
        const json j = json::parse(line);
        out.insert(j.at("streamName").get<std::string>() + " " +
                   j.at("sequenceNumber").get<std::string>());
      }
    }
    return out;
  }

  bool all_printed(const std::vector<const KclProcess*>& ps) {
    const auto got = printed(ps);
    for (const auto& e : expected_) {
      if (!got.count(e)) return false;
    }
    return true;
  }

  std::string app_, file_;
  std::vector<std::string> names_;
  std::set<std::string> expected_;
  int put_count_ = 0;
};

TEST_F(MultiStreamConsumeTest, ThreeWorkersFourStreamsASplitAnAddedStreamAndAKill) {
  write_file(3);
  for (int i = 0; i < 3; ++i) put(i, 40);
  KclProcess a = worker("a");
  KclProcess b = worker("b");
  KclProcess c = worker("c");
  ASSERT_TRUE(a.started() && b.started() && c.started());
  ASSERT_TRUE(eventually(
      [&] {
        return all_printed({&a, &b, &c});
      },
      120s))
      << printed({&a, &b, &c}).size() << " of " << expected_.size();

  // A split in stream 1 while the others flow.
  auto shards = kinesis_->list_shards(names_[1]);
  ASSERT_TRUE(shards.ok() && !shards->empty());
  const auto& s0 = shards->front();  // hash keys [0, 2^126): split at 2^125
  ASSERT_EQ(s0.hash_key_range.starting_hash_key, "0");
  Status split =
      kinesis_->split_shard(names_[1], s0.shard_id, "42535295865117307932921825928971026432");
  ASSERT_TRUE(split.ok()) << split;
  ASSERT_TRUE(kinesis_->wait_for_active(names_[1], 30s).ok());
  for (int i = 0; i < 3; ++i) put(i, 40);

  // A fourth stream, announced by SIGHUP; a worker killed and started again.
  write_file(4);
  put(3, 40);
  for (KclProcess* p : {&a, &b, &c}) p->signal(SIGHUP);
  c.kill_now();
  KclProcess c2 = worker("c2");
  ASSERT_TRUE(c2.started());
  for (int i = 0; i < 4; ++i) put(i, 20);
  ASSERT_TRUE(eventually(
      [&] {
        return all_printed({&a, &b, &c, &c2});
      },
      180s))
      << printed({&a, &b, &c, &c2}).size() << " of " << expected_.size();

  EXPECT_EQ(a.stop(), 0);
  EXPECT_EQ(b.stop(), 0);
  EXPECT_EQ(c2.stop(), 0);
  const auto got = printed({&a, &b, &c, &c2});
  std::set<std::string> distinct(got.begin(), got.end());
  for (const auto& line : distinct) {
    EXPECT_TRUE(expected_.count(line)) << "printed a record never put: " << line;
  }
  std::printf("multi-stream consume: %zu records put, %zu lines printed (%zu duplicates)\n",
              expected_.size(), got.size(), got.size() - distinct.size());

  LeaseConfig lc;
  lc.application_name = app_;
  leases::DynamoDbLeaseStore store(ddb_, lc);
  auto leases = store.list_leases();
  ASSERT_TRUE(leases.ok()) << leases.status();
  std::set<std::string> streams_with_leases;
  for (const Lease& l : *leases) {
    EXPECT_FALSE(l.lease_owner.has_value()) << l.lease_key << " still owned";
    streams_with_leases.insert(l.stream_identifier.value_or("?"));
  }
  EXPECT_EQ(streams_with_leases.size(), 4u);
}

}  // namespace
}  // namespace kcl::cli
