// StreamSet on a manual clock: a scripted Kinesis (DescribeStreamSummary and ListShards of the
// streams that exist, one open shard each), an in-memory lease table whose deletions can be
// made to fail (a throttle), and a stream list the test changes. Covers the leases of a
// former stream and of a deleted one, deleted again at a later turn after a failed deletion
// (the worker went on), a tracker's AFTER_CHECKPOINT position (refused for the worker's), and
// a stream that fails its sync at every turn, logged at the 1st, 3rd, 10th... failure with the
// count.
#include "worker/stream_set.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "leases/in_memory_lease_store.h"
#include "leases/stream_identifier.h"
#include "support/fake_json_client.h"
#include "support/lease_test_util.h"

namespace kcl::worker {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr std::int64_t kCreated = 1700000000;

// Kinesis with the streams in `existing`, each of one open shard; those in `refused` answer
// every call with an access error.
std::shared_ptr<kinesis::fake::FakeJsonClient> scripted_kinesis(
    const std::set<std::string>& existing, const std::set<std::string>& refused) {
  auto client = std::make_shared<kinesis::fake::FakeJsonClient>();
  client->handler = [&existing, &refused](const kinesis::fake::Call& c) -> Result<std::string> {
    const std::string stream = c.body.value("StreamName", "");
    if (!existing.count(stream)) {
      return kinesis::fake::aws_error(StatusCode::kNotFound, "ResourceNotFoundException",
                                      c.operation);
    }
    if (refused.count(stream)) {
      return kinesis::fake::aws_error(StatusCode::kPermissionDenied, "AccessDeniedException",
                                      c.operation);
    }
    if (c.operation == "DescribeStreamSummary") {
      return json{{"StreamDescriptionSummary",
                   {{"StreamName", stream},
                    {"StreamARN", "arn:aws:kinesis:us-east-1:123456789012:stream/" + stream},
                    {"StreamStatus", "ACTIVE"},
                    {"OpenShardCount", 1},
                    {"StreamCreationTimestamp", kCreated}}}}
          .dump();
    }
    if (c.operation == "ListShards") {
      return json{{"Shards",
                   {{{"ShardId", "shardId-000000000000"},
                     {"HashKeyRange",
                      {{"StartingHashKey", "0"},
                       {"EndingHashKey", "340282366920938463463374607431768211455"}}},
                     {"SequenceNumberRange", {{"StartingSequenceNumber", "1000"}}}}}}}
          .dump();
    }
    return Status(StatusCode::kInvalidArgument, "not scripted: " + c.operation);
  };
  return client;
}

class StreamSetTest : public ::testing::Test {
 protected:
  StreamSetTest() {
    clock_.advance(1h);  // no time is the zero of the clock
    config_.leases.application_name = "app";
    config_.processing.shard_sync_interval = 10s;
    config_.stream_poll_interval = 1s;
    config_.former_stream_deletion_delay = 30s;
    config_.initial_position = InitialPosition::trim_horizon();
    config_.stream_tracker = [this] {
      std::vector<StreamConfig> out;
      for (const std::string& s : listed_) out.push_back(StreamConfig{s, std::nullopt});
      return out;
    };
  }

  StreamSet& streams() {
    if (!set_) {
      set_ = std::make_unique<StreamSet>(
          config_, kinesis_, store_, NoopMetricsSink::instance(), clock_,
          [this](LogLevel, const std::string& message) { log_.push_back(message); });
    }
    return *set_;
  }

  // The keys of the leases of `stream` in the table.
  std::vector<std::string> leases_of(const std::string& stream) {
    std::vector<std::string> out;
    const std::vector<Lease> all = table_.list_leases().value();
    for (const Lease& l : all) {
      if (leases::lease_stream_name(l) == stream) out.push_back(l.lease_key);
    }
    return out;
  }

  // Moves the clock past a jittered shard sync interval (every stream's sync is due) and
  // takes a turn; the turn must not fail.
  StreamSet::Turn turn() {
    clock_.advance(13s);
    EXPECT_LE(streams().next_due(), clock_.now());
    auto r = streams().tick();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : StreamSet::Turn{};
  }

  std::size_t lines_with(const std::string& text) const {
    std::size_t n = 0;
    for (const std::string& line : log_) n += line.find(text) != std::string::npos;
    return n;
  }
  std::string log_text() const {
    std::string out;
    for (const std::string& line : log_) out += line + "\n";
    return out;
  }

  std::set<std::string> existing_{"orders", "payments"};
  std::set<std::string> refused_;
  std::vector<std::string> listed_{"orders", "payments"};
  WorkerConfig config_;
  ManualClock clock_;
  kinesis::KinesisClient kinesis_{scripted_kinesis(existing_, refused_)};
  leases::InMemoryLeaseStore table_;
  leases::testing::PartitionableStore store_{table_};
  std::vector<std::string> log_;
  std::unique_ptr<StreamSet> set_;
};

TEST_F(StreamSetTest, AFormerStreamsLeasesAreDeletedAgainAfterAFailedDeletion) {
  ASSERT_TRUE(streams().start().ok());
  ASSERT_EQ(leases_of("payments").size(), 1u);
  listed_ = {"orders"};
  turn();  // payments is former from now on
  store_.set_deletes_throttled(true);
  clock_.advance(config_.former_stream_deletion_delay);
  auto r = streams().tick();
  ASSERT_TRUE(r.ok()) << "one throttled deletion stopped the worker: " << r.status();
  EXPECT_EQ(leases_of("payments").size(), 1u);
  EXPECT_GE(store_.deletes_refused(), 1);
  // Tried again at each later turn; of the 6 failures, the 1st and the 3rd are logged.
  for (int i = 0; i < 5; ++i) turn();
  EXPECT_EQ(store_.deletes_refused(), 6) << "the deletion was not tried again at each turn";
  EXPECT_EQ(lines_with("ProvisionedThroughputExceeded"), 2u) << log_text();
  EXPECT_EQ(lines_with("3 times in a row"), 1u) << log_text();
  store_.set_deletes_throttled(false);
  StreamSet::Turn deleted;
  for (int i = 0; i < 3 && deleted.leases_deleted == 0; ++i) deleted = turn();
  EXPECT_EQ(deleted.leases_deleted, 1u);
  EXPECT_TRUE(leases_of("payments").empty()) << log_text();
  EXPECT_EQ(leases_of("orders").size(), 1u);
  EXPECT_EQ(streams().names(), "orders");
}

TEST_F(StreamSetTest, ADeletedStreamsLeasesAreDeletedAgainAfterAFailedDeletion) {
  config_.stream_tracker = nullptr;
  config_.streams = {{"orders", std::nullopt}, {"payments", std::nullopt}};
  ASSERT_TRUE(streams().start().ok());
  ASSERT_EQ(leases_of("payments").size(), 1u);
  existing_.erase("payments");
  store_.set_deletes_throttled(true);
  auto r = streams().tick({"payments"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(store_.deletes_refused(), 1);
  EXPECT_EQ(leases_of("payments").size(), 1u);
  store_.set_deletes_throttled(false);
  for (int i = 0; i < 10 && !leases_of("payments").empty(); ++i) turn();
  EXPECT_TRUE(leases_of("payments").empty())
      << "the deleted stream's identifier was dropped with the failed deletion: its leases "
         "stay for ever\n"
      << log_text();
  EXPECT_EQ(leases_of("orders").size(), 1u);
}

TEST_F(StreamSetTest, AStreamListedAgainBeforeItsLeasesAreDeletedKeepsThem) {
  ASSERT_TRUE(streams().start().ok());
  listed_ = {"orders"};
  turn();
  store_.set_deletes_throttled(true);
  clock_.advance(config_.former_stream_deletion_delay);
  ASSERT_TRUE(streams().tick().ok());
  listed_ = {"orders", "payments"};  // back while its deletion waits for a retry
  store_.set_deletes_throttled(false);
  for (int i = 0; i < 5; ++i) turn();
  EXPECT_EQ(leases_of("payments").size(), 1u) << log_text();
  EXPECT_EQ(streams().names(), "orders,payments");
}

TEST_F(StreamSetTest, ASyncThatFailsAtEveryTurnIsLoggedAtTheFirstThirdAndTenthWithTheCount) {
  listed_ = {"orders", "missing"};
  ASSERT_TRUE(streams().start().ok());
  for (int i = 0; i < 12; ++i) turn();
  // 13 failures (start's and 12 turns'): the 1st, 3rd and 10th are logged.
  EXPECT_EQ(lines_with("missing"), 3u) << log_text();
  EXPECT_EQ(lines_with("10 times in a row"), 1u) << log_text();
  existing_.insert("missing");
  turn();
  EXPECT_EQ(leases_of("missing").size(), 1u);
  EXPECT_EQ(lines_with("recovered after 13 failures"), 1u) << log_text();
}

// Of several streams, one the worker may not read (an access error, a throttle that outlasts
// the retries) does not fail the start of the others: it is logged and tried again soon. When
// no stream can be synced the start fails (the worker retries its start, then reports it).
TEST_F(StreamSetTest, AStreamThatFailsItsSyncAtStartDoesNotHoldBackTheOthers) {
  existing_.insert("locked");
  refused_ = {"locked"};
  listed_ = {"orders", "locked"};
  auto started = streams().start();
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(leases_of("orders").size(), 1u) << log_text();
  EXPECT_TRUE(leases_of("locked").empty());
  EXPECT_EQ(lines_with("AccessDeniedException"), 1u) << log_text();
  // Tried again soon, not a whole sync interval later.
  EXPECT_LE(streams().next_due(), clock_.now() + 5s);
  refused_.clear();
  clock_.advance(5s);
  auto r = streams().tick();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(leases_of("locked").size(), 1u) << log_text();
}

TEST_F(StreamSetTest, AStartWhereNoStreamCanBeSyncedFails) {
  existing_.insert("locked");
  refused_ = {"locked", "orders"};
  listed_ = {"orders", "locked"};
  auto started = streams().start();
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.status().message().find("AccessDeniedException"), std::string::npos)
      << started.status();
}

TEST_F(StreamSetTest, ATrackersAfterCheckpointPositionIsRefusedForTheWorkersOnce) {
  const std::string seq = "49590338271490256608559692538361571095921575989136588898";
  config_.stream_tracker = [&] {
    return std::vector<StreamConfig>{{"orders", StartPosition::after_checkpoint(seq)},
                                     {"payments", InitialPosition::latest()}};
  };
  ASSERT_TRUE(streams().start().ok());
  for (int i = 0; i < 3; ++i) turn();
  EXPECT_EQ(streams().initial_position_of("orders").kind, StartPosition::Kind::kTrimHorizon);
  EXPECT_EQ(streams().initial_position_of("payments").kind, StartPosition::Kind::kLatest);
  const auto orders = table_.list_leases().value();
  for (const Lease& l : orders) {
    if (leases::lease_stream_name(l) != "orders") continue;
    EXPECT_EQ(l.checkpoint, ExtendedSequenceNumber::trim_horizon())
        << "the resume point became a root lease's checkpoint";
  }
  EXPECT_EQ(lines_with("AFTER_CHECKPOINT"), 1u) << log_text();
}

}  // namespace
}  // namespace kcl::worker
