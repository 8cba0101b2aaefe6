// One worker, one lease table, several streams (WorkerConfig::stream_tracker) on kinesalite
// and dynalite: every stream's records delivered, each processor told its stream; the leases
// in the Java KCL's multi-stream format; a stream added at run time is read from its initial
// position; a stream removed from the list has its leases deleted after the deferral; a
// stream deleted in Kinesis has its leases deleted at once while the others go on.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "leases/stream_identifier.h"
#include "support/worker_test_support.h"

namespace kcl::worker_test {
namespace {

class MultiStreamTest : public WorkerTest {
 protected:
  void TearDown() override {
    for (const auto& [key, name] : streams_) (void)kinesis_->delete_stream(name);
  }

  // A stream of `shards` shards known to the test as `key`.
  void make(const std::string& key, int shards) {
    const std::string name = kcl::testing::unique_name("ms-" + key);
    ASSERT_TRUE(kinesis_->create_stream(name, shards).ok());
    ASSERT_TRUE(kinesis_->wait_for_active(name, 30s).ok());
    streams_[key] = name;
  }

  // `n` records "<key>-<i>" put in stream `key`.
  std::vector<std::string> put_in(const std::string& key, int from, int n) {
    std::vector<kinesis::PutRecordsEntry> entries;
    std::vector<std::string> data;
    for (int i = from; i < from + n; ++i) {
      data.push_back(key + "-" + std::to_string(i));
      entries.push_back({data.back(), "pk-" + std::to_string(i), ""});
    }
    auto r = kinesis_->put_records(streams_.at(key), entries);
    EXPECT_TRUE(r.ok()) << r.status();
    return data;
  }

  void list(const std::vector<std::string>& keys) {
    std::lock_guard<std::mutex> lock(mu_);
    listed_.clear();
    for (const auto& k : keys) listed_.push_back(StreamConfig{streams_.at(k), {}});
  }

  WorkerConfig multi_config(const std::string& worker_id) {
    WorkerConfig c = config(worker_id);
    c.stream_name.clear();
    c.stream_tracker = [this] {
      std::lock_guard<std::mutex> lock(mu_);
      return listed_;
    };
    c.stream_poll_interval = 1000ms;
    c.former_stream_deletion_delay = 2000ms;
    return c;
  }

  // The lease keys of stream `key` in the table.
  std::vector<Lease> leases_of(const std::string& key) {
    std::vector<Lease> out;
    for (const Lease& l : leases()) {
      if (leases::lease_stream_name(l) == streams_.at(key)) out.push_back(l);
    }
    return out;
  }

  std::map<std::string, std::string> streams_;  // test key -> stream name
  std::mutex mu_;
  std::vector<StreamConfig> listed_;
};

TEST_F(MultiStreamTest, StreamsComeAndGoThroughOneTable) {
  for (const char* key : {"a", "b", "c", "d"}) make(key, 2);
  list({"a", "b", "c"});
  Worker w(multi_config("w1"), factory("w1"));
  ASSERT_TRUE(w.start().ok());

  std::vector<std::string> all;
  for (const char* key : {"a", "b", "c"}) {
    auto d = put_in(key, 0, 10);
    all.insert(all.end(), d.begin(), d.end());
  }
  ASSERT_TRUE(wait_all_delivered(all, 60s));
  // Each record came to a processor of its own stream, once the shard's processor knew it.
  for (const Delivered& r : EventLog::records(log_->events())) {
    const std::string key = r.data.substr(0, r.data.find('-'));
    EXPECT_EQ(r.stream, streams_.at(key)) << r.data;
  }
  // The Java KCL's multi-stream leases: "<account>:<stream>:<epoch>:<shard>", with streamName
  // and shardId.
  for (const char* key : {"a", "b", "c"}) {
    const auto ls = leases_of(key);
    ASSERT_EQ(ls.size(), 2u) << key;
    for (const Lease& l : ls) {
      ASSERT_TRUE(l.stream_identifier.has_value()) << l.lease_key;
      auto id = leases::StreamIdentifier::parse(*l.stream_identifier);
      ASSERT_TRUE(id.has_value()) << *l.stream_identifier;
      EXPECT_EQ(id->stream_name, streams_.at(key));
      EXPECT_EQ(l.lease_key, *l.stream_identifier + ":" + l.shard_id.value_or("?"));
    }
  }

  // Added at run time: read from its initial position (TRIM_HORIZON: the records put before).
  const auto early_d = put_in("d", 0, 5);
  list({"a", "b", "c", "d"});
  ASSERT_TRUE(wait_all_delivered(early_d, 60s));

  // Removed: its leases go after the deferral; the others are kept.
  list({"b", "c", "d"});
  ASSERT_TRUE(eventually([&] { return leases_of("a").empty(); }, 30s))
      << "stream a's leases stayed";
  EXPECT_EQ(leases_of("b").size(), 2u);

  // Deleted in Kinesis: its leases go at once; the worker and the other streams go on.
  ASSERT_TRUE(kinesis_->delete_stream(streams_.at("b")).ok());
  ASSERT_TRUE(eventually([&] { return leases_of("b").empty(); }, 30s))
      << "stream b's leases stayed";
  EXPECT_FALSE(w.wait_for(0ms).has_value()) << "the worker stopped";
  const auto late = put_in("c", 10, 5);
  ASSERT_TRUE(wait_all_delivered(late, 60s));
  EXPECT_TRUE(stop(w).ok());
}

TEST_F(MultiStreamTest, AOneStreamTableIsRefusedUntouched) {
  make("a", 1);
  WorkerConfig one = config("w1");
  one.stream_name = streams_.at("a");
  {
    Worker w(one, factory("w1"));
    ASSERT_TRUE(w.start().ok());
    EXPECT_TRUE(stop(w).ok());
  }
  const auto before = leases();
  ASSERT_EQ(before.size(), 1u);
  list({"a"});
  Worker multi(multi_config("w2"), factory("w2"));
  Status s = multi.start();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("one-stream lease"), std::string::npos) << s;
  EXPECT_EQ(leases(), before);
}

}  // namespace
}  // namespace kcl::worker_test
