// ShardSyncer against kinesalite (Kinesis) and dynalite (the DynamoDB lease store): a
// 2-shard stream, synced; one shard split and the other merged with a split child; synced
// again -> leases for the children with the right parents; cleanup once children started; a
// missing stream; two workers syncing at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "aws/aws_json_client.h"
#include "aws/credentials.h"
#include "aws/http_transport.h"
#include "dynamodb/dynamodb_client.h"
#include "kinesis/kinesis_client.h"
#include "leases/dynamodb_lease_store.h"
#include "shardsync/lineage.h"
#include "shardsync/shard_syncer.h"
#include "support/aws_clients.h"
#include "support/emulators.h"

namespace kcl::shardsync {
namespace {

using namespace std::chrono_literals;

// 2^126 (the middle of shard 0 of a 2-shard stream, whose range is [0, 2^127 - 1]).
constexpr const char* kQuarterHashKey = "85070591730234615865843651857942052864";
constexpr const char* kHalfHashKey = "170141183460469231731687303715884105728";  // 2^127

std::string sid(int n) {
  std::string digits = std::to_string(n);
  return "shardId-" + std::string(12 - digits.size(), '0') + digits;
}

std::vector<std::string> ids(std::initializer_list<int> ns) {
  std::vector<std::string> out;
  for (int n : ns) out.push_back(sid(n));
  return out;
}

std::vector<std::string> keys(const std::vector<Lease>& leases) {
  std::vector<std::string> out;
  for (const Lease& l : leases) out.push_back(l.lease_key);
  std::sort(out.begin(), out.end());
  return out;
}

class ShardSyncerKinesaliteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& emu = kcl::testing::shared_emulators();
    config_ = emu.aws_config();
    client_ = kcl::testing::kinesis_client(config_);
    ASSERT_TRUE(client_);
    stream_ = kcl::testing::unique_name("sync");
  }

  // A new lease table on dynalite.
  std::unique_ptr<leases::LeaseStore> make_store() {
    auto store =
        kcl::testing::dynamodb_lease_store(config_, kcl::testing::unique_name("sync-leases"));
    Status s = store->create_table_if_not_exists();
    EXPECT_TRUE(s.ok()) << s;
    return store;
  }

  void create_stream(int shards) {
    Status s = client_->create_stream(stream_, shards);
    ASSERT_TRUE(s.ok()) << s;
    s = client_->wait_for_active(stream_, 30s);
    ASSERT_TRUE(s.ok()) << s;
  }

  // Splits shard 0 into 2 and 3, then merges 3 with shard 1 into 4:
  //   0 -> {2, 3};  {3, 1} -> 4.
  void reshard() {
    Status s = client_->split_shard(stream_, sid(0), kQuarterHashKey);
    ASSERT_TRUE(s.ok()) << s;
    s = client_->wait_for_active(stream_, 30s);
    ASSERT_TRUE(s.ok()) << s;
    s = client_->merge_shards(stream_, sid(3), sid(1));
    ASSERT_TRUE(s.ok()) << s;
    s = client_->wait_for_active(stream_, 30s);
    ASSERT_TRUE(s.ok()) << s;
  }

  Lease lease_of(leases::LeaseStore& store, int n) {
    auto got = store.get_lease(sid(n));
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok() || !got->has_value()) {
      ADD_FAILURE() << "no lease " << sid(n);
      return Lease{};
    }
    return **got;
  }

  AwsConfig config_;
  std::shared_ptr<kinesis::KinesisClient> client_;
  std::string stream_;
};

TEST_F(ShardSyncerKinesaliteTest, SplitAndMergeGiveChildrenLeasesWithTheirParents) {
  ASSERT_NO_FATAL_FAILURE(create_stream(2));
  auto store = make_store();
  ShardSyncer syncer =
      ShardSyncer::for_stream(*client_, stream_, *store, InitialPosition::trim_horizon());

  auto r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->shards, 2u);
  EXPECT_EQ(r->leases_created, 2u);
  auto leases = store->list_leases();
  ASSERT_TRUE(leases.ok());
  EXPECT_EQ(keys(*leases), ids({0, 1}));
  for (const Lease& l : *leases) {
    EXPECT_EQ(l.checkpoint, ExtendedSequenceNumber::trim_horizon());
    EXPECT_TRUE(l.parent_shard_ids.empty());
    ASSERT_TRUE(l.hash_key_range.has_value());
  }
  EXPECT_EQ(lease_of(*store, 1).hash_key_range->starting_hash_key, kHalfHashKey);

  ASSERT_NO_FATAL_FAILURE(reshard());
  // kinesalite reports the lineage as Kinesis does.
  auto shards = client_->list_shards(stream_);
  ASSERT_TRUE(shards.ok()) << shards.status();
  ASSERT_EQ(shards->size(), 5u);
  EXPECT_EQ(child_shard_ids(*shards, sid(0)), ids({2, 3}));
  EXPECT_EQ(child_shard_ids(*shards, sid(1)), ids({4}));

  r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->shards, 5u);
  EXPECT_EQ(r->leases_created, 3u);
  EXPECT_EQ(r->child_ids_updated, 2u);  // 0 and 1 (3 was created closed, with its child)
  EXPECT_EQ(r->leases_deleted, 0u);

  for (int child : {2, 3}) {
    Lease l = lease_of(*store, child);
    EXPECT_EQ(l.parent_shard_ids, ids({0})) << l.lease_key;
    EXPECT_EQ(l.checkpoint, ExtendedSequenceNumber::trim_horizon()) << l.lease_key;
    EXPECT_EQ(l.lease_counter, 0);
    EXPECT_FALSE(l.lease_owner.has_value());
  }
  Lease merged = lease_of(*store, 4);
  EXPECT_EQ(merged.parent_shard_ids, ids({1, 3}));
  EXPECT_EQ(merged.checkpoint, ExtendedSequenceNumber::trim_horizon());
  ASSERT_TRUE(merged.hash_key_range.has_value());
  EXPECT_EQ(merged.hash_key_range->starting_hash_key, kQuarterHashKey);
  EXPECT_EQ(merged.hash_key_range->ending_hash_key, "340282366920938463463374607431768211455");
  EXPECT_EQ(lease_of(*store, 0).child_shard_ids, ids({2, 3}));
  EXPECT_EQ(lease_of(*store, 1).child_shard_ids, ids({4}));
  EXPECT_EQ(lease_of(*store, 3).child_shard_ids, ids({4}));

  // The merge child waits for both parents; the split children for 0.
  auto wait = parents_finished(*store, merged);
  ASSERT_TRUE(wait.ok()) << wait.status();
  EXPECT_FALSE(*wait);

  // Idempotent.
  r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_created, 0u);
  EXPECT_EQ(r->child_ids_updated, 0u);
  EXPECT_EQ(r->leases_deleted, 0u);
}

TEST_F(ShardSyncerKinesaliteTest, FreshTableOnLatestAfterReshardLeasesOnlyOpenShards) {
  ASSERT_NO_FATAL_FAILURE(create_stream(2));
  ASSERT_NO_FATAL_FAILURE(reshard());
  auto store = make_store();
  ShardSyncer syncer =
      ShardSyncer::for_stream(*client_, stream_, *store, InitialPosition::latest());
  auto r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->shards, 5u);
  auto leases = store->list_leases();
  ASSERT_TRUE(leases.ok());
  EXPECT_EQ(keys(*leases), ids({2, 4}));
  for (const Lease& l : *leases) EXPECT_EQ(l.checkpoint, ExtendedSequenceNumber::latest());
  EXPECT_EQ(lease_of(*store, 4).parent_shard_ids, ids({1, 3}));
  auto wait = parents_finished(*store, lease_of(*store, 4));
  ASSERT_TRUE(wait.ok());
  EXPECT_TRUE(*wait);  // its parents have no lease: nothing to wait for
}

TEST_F(ShardSyncerKinesaliteTest, ParentCleanedUpOnceChildrenStarted) {
  ASSERT_NO_FATAL_FAILURE(create_stream(2));
  auto store = make_store();
  ShardSyncer syncer =
      ShardSyncer::for_stream(*client_, stream_, *store, InitialPosition::trim_horizon());
  ASSERT_TRUE(syncer.sync_once().ok());
  ASSERT_NO_FATAL_FAILURE(reshard());
  ASSERT_TRUE(syncer.sync_once().ok());

  // Shard 0 read to its end; its children 2 and 3 start.
  auto checkpoint = [&](int n, ExtendedSequenceNumber where) {
    Lease seen = lease_of(*store, n);
    auto held = store->take_lease(seen, "worker-1");
    ASSERT_TRUE(held.ok()) << held.status();
    leases::CheckpointFields f;
    f.checkpoint = std::move(where);
    auto done = store->update_checkpoint(*held, f);
    ASSERT_TRUE(done.ok()) << done.status();
  };
  checkpoint(0, ExtendedSequenceNumber::shard_end());
  checkpoint(2, ExtendedSequenceNumber("1"));
  auto r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_deleted, 0u);  // 3 has not started
  checkpoint(3, ExtendedSequenceNumber::shard_end());
  r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_deleted, 1u);
  auto leases = store->list_leases();
  ASSERT_TRUE(leases.ok());
  EXPECT_EQ(keys(*leases), ids({1, 2, 3, 4}));
  // 0 is still listed by Kinesis but is never recreated.
  r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_created, 0u);
}

TEST_F(ShardSyncerKinesaliteTest, TwoWorkersSyncingAtOnceCreateEachLeaseOnce) {
  ASSERT_NO_FATAL_FAILURE(create_stream(2));
  ASSERT_NO_FATAL_FAILURE(reshard());
  auto store = make_store();
  ShardSyncer a =
      ShardSyncer::for_stream(*client_, stream_, *store, InitialPosition::trim_horizon());
  ShardSyncer b =
      ShardSyncer::for_stream(*client_, stream_, *store, InitialPosition::trim_horizon());
  Result<SyncResult> ra = Status(StatusCode::kInternal, "not run");
  Result<SyncResult> rb = Status(StatusCode::kInternal, "not run");
  std::thread ta([&] { ra = a.sync_once(); });
  std::thread tb([&] { rb = b.sync_once(); });
  ta.join();
  tb.join();
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(ra->leases_created + rb->leases_created, 5u);
  auto leases = store->list_leases();
  ASSERT_TRUE(leases.ok());
  EXPECT_EQ(keys(*leases), ids({0, 1, 2, 3, 4}));
}

TEST_F(ShardSyncerKinesaliteTest, MissingStreamIsNotFoundWithItsName) {
  auto store = make_store();
  ShardSyncer syncer =
      ShardSyncer::for_stream(*client_, stream_, *store, InitialPosition::latest());
  auto r = syncer.sync_once();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status();
  EXPECT_NE(r.status().message().find("stream \"" + stream_ + "\" does not exist"),
            std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace kcl::shardsync
