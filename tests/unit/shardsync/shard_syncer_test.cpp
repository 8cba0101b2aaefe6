// ShardSyncer on an InMemoryLeaseStore with canned listings.
#include "shardsync/shard_syncer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <optional>
#include <stdexcept>
#include <thread>

#include "leases/in_memory_lease_store.h"
#include "shardsync/lineage.h"
#include "unit/shardsync/test_listing.h"

namespace kcl::shardsync {
namespace {

using test::ids;
using test::keys;
using test::lineage_listing;
using test::RecordingMetrics;
using test::seq;
using test::shard;
using test::sid;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using test::kTimestamp;
using test::lease;

// A listing the test changes between passes.
struct Stream {
  std::vector<kinesis::Shard> shards;
  std::optional<Status> error;
  ShardLister lister() {
    return [this]() -> Result<std::vector<kinesis::Shard>> {
      if (error) return *error;
      return shards;
    };
  }
  kinesis::Shard& at(int id) {
    for (auto& s : shards) {
      if (s.shard_id == sid(id)) return s;
    }
    throw std::runtime_error("no shard " + sid(id));
  }
  void close(int id) { at(id).sequence_number_range.ending_sequence_number = "9999"; }
};

// Forwards to an InMemoryLeaseStore and calls a hook after each create.
class HookedStore final : public leases::LeaseStore {
 public:
  explicit HookedStore(leases::InMemoryLeaseStore& inner) : inner_(inner) {}
  std::function<void(const Lease&)> after_create;
  int fail_creates = 0;     // the next creates fail (kUnavailable) without applying
  int apply_then_fail = 0;  // the next creates apply, then report kUnavailable

  Status create_table_if_not_exists() override { return inner_.create_table_if_not_exists(); }
  Result<std::vector<Lease>> list_leases() override { return inner_.list_leases(); }
  Result<std::optional<Lease>> get_lease(std::string_view k) override {
    return inner_.get_lease(k);
  }
  Status create_lease_if_not_exists(const Lease& lease) override {
    if (fail_creates > 0) {
      --fail_creates;
      return Status(StatusCode::kUnavailable, "throttled");
    }
    Status s = inner_.create_lease_if_not_exists(lease);
    if (apply_then_fail > 0) {
      --apply_then_fail;
      return Status(StatusCode::kUnavailable, "timed out");
    }
    if (after_create) {
      auto hook = std::move(after_create);  // once
      after_create = nullptr;
      hook(lease);
    }
    return s;
  }
  Result<Lease> take_lease(const Lease& seen, std::string_view o) override {
    return inner_.take_lease(seen, o);
  }
  Result<Lease> renew_lease(const Lease& held) override { return inner_.renew_lease(held); }
  Result<Lease> evict_lease(const Lease& held) override { return inner_.evict_lease(held); }
  Result<Lease> initiate_handoff(const Lease& seen, std::string_view new_owner) override {
    return inner_.initiate_handoff(seen, new_owner);
  }
  Result<Lease> update_checkpoint(const Lease& held, const leases::CheckpointFields& f) override {
    return inner_.update_checkpoint(held, f);
  }
  Status update_child_shard_ids(std::string_view k, const std::vector<std::string>& c) override {
    return inner_.update_child_shard_ids(k, c);
  }
  Status delete_lease(std::string_view k) override { return inner_.delete_lease(k); }

 private:
  leases::InMemoryLeaseStore& inner_;
};

// Checkpoints a lease in the store as its owner would (take, then checkpoint); in a
// multi-stream table, the lease of shard `id` of the stream `stream_id`.
void checkpoint(leases::InMemoryLeaseStore& store, const std::string& stream_id, int id,
                ExtendedSequenceNumber where) {
  const std::string key = stream_id.empty() ? sid(id) : stream_id + ":" + sid(id);
  auto current = store.peek(key);
  ASSERT_TRUE(current.has_value()) << key;
  auto held = store.take_lease(*current, "worker-x");
  ASSERT_TRUE(held.ok()) << held.status();
  leases::CheckpointFields f;
  f.checkpoint = std::move(where);
  auto done = store.update_checkpoint(*held, f);
  ASSERT_TRUE(done.ok()) << done.status();
}

void checkpoint(leases::InMemoryLeaseStore& store, int id, ExtendedSequenceNumber where) {
  checkpoint(store, "", id, std::move(where));
}

std::vector<std::string> stored_keys(const leases::InMemoryLeaseStore& store) {
  return keys(store.snapshot());
}

// ---------------------------------------------------------------------------------------
// Fresh tables

TEST(ShardSyncerTest, FreshTableTrimHorizon) {
  leases::InMemoryLeaseStore store;
  Stream stream{lineage_listing(), {}};
  RecordingMetrics metrics;
  ShardSyncer syncer(stream.lister(), store, InitialPosition::trim_horizon(), metrics);
  auto r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->shards, 6u);
  EXPECT_EQ(r->leases, 0u);
  EXPECT_EQ(r->leases_created, 6u);
  EXPECT_EQ(r->leases_deleted, 0u);
  EXPECT_EQ(r->child_ids_updated, 0u);  // set at creation
  EXPECT_EQ(metrics.get("shardsync.leases_created"), 6);
  EXPECT_EQ(stored_keys(store), ids({0, 1, 2, 3, 4, 5}));
  for (int root : {0, 1, 2}) {
    EXPECT_EQ(store.peek(sid(root))->checkpoint, ExtendedSequenceNumber::trim_horizon());
  }
  auto merge = store.peek(sid(5));
  EXPECT_EQ(merge->parent_shard_ids, ids({1, 4}));
  EXPECT_EQ(merge->checkpoint, ExtendedSequenceNumber::trim_horizon());
  EXPECT_EQ(merge->lease_counter, 0);
  EXPECT_FALSE(merge->lease_owner.has_value());
  EXPECT_EQ(merge->hash_key_range, (HashKeyRange{"25", "79"}));
  EXPECT_EQ(store.peek(sid(0))->child_shard_ids, ids({3, 4}));
  EXPECT_EQ(store.peek(sid(3))->parent_shard_ids, ids({0}));
}

// A multi-stream application's table ("<account>:<stream>:<epoch>:<shard>" keys) is refused
// with a clear error and left as it was: syncing it as one stream would create a second set
// of leases and delete the others as leases of shards gone.
TEST(ShardSyncerTest, AMultiStreamTableIsRefusedAndLeftAlone) {
  leases::InMemoryLeaseStore store;
  Lease java;
  java.lease_key = "123456789012:orders:1700000000:shardId-000000000000";
  java.checkpoint = ExtendedSequenceNumber("4959");
  ASSERT_TRUE(store.create_lease_if_not_exists(java).ok());
  Stream stream{lineage_listing(), {}};
  RecordingMetrics metrics;
  ShardSyncer syncer(stream.lister(), store, InitialPosition::trim_horizon(), metrics);
  auto r = syncer.sync_once();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("multi-stream lease " + java.lease_key));
  EXPECT_EQ(stored_keys(store), std::vector<std::string>{java.lease_key});
}

// Two streams through one table, in the Java KCL's multi-stream format: each syncer keeps
// its own stream's leases ("<stream id>:<shard>" with streamName and shardId; parents as bare
// shard ids) and never touches the other's; a one-stream lease in the table is refused.
TEST(ShardSyncerTest, MultiStreamSyncersKeepEachStreamsLeasesApart) {
  leases::InMemoryLeaseStore store;
  Stream a{lineage_listing(), {}};
  Stream b{lineage_listing(), {}};
  RecordingMetrics metrics;
  const std::string id_a = "123456789012:orders:1700000000";
  const std::string id_b = "123456789012:audit:1700000001";
  ShardSyncer sync_a(a.lister(), store, InitialPosition::trim_horizon(), metrics, id_a);
  ShardSyncer sync_b(b.lister(), store, InitialPosition::trim_horizon(), metrics, id_b);
  ASSERT_TRUE(sync_a.sync_once().ok());
  auto r = sync_b.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases, 0u) << "stream b saw stream a's leases as its own";
  EXPECT_EQ(r->leases_created, 6u);
  EXPECT_EQ(stored_keys(store).size(), 12u);
  auto merge = store.peek(id_a + ":" + sid(5));
  ASSERT_TRUE(merge.has_value());
  EXPECT_EQ(merge->stream_identifier, id_a);
  EXPECT_EQ(merge->shard_id, sid(5));
  EXPECT_EQ(merge->parent_shard_ids, ids({1, 4}));
  EXPECT_EQ(store.peek(id_b + ":" + sid(0))->child_shard_ids, ids({3, 4}));
  // Unchanged streams: a second pass of each writes nothing.
  for (ShardSyncer* s : {&sync_a, &sync_b}) {
    auto again = s->sync_once();
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->leases, 6u);
    EXPECT_EQ(again->leases_created + again->leases_deleted + again->child_ids_updated, 0u);
  }
  // Stream a's shard 0 is finished and both children started: only a's lease of it goes.
  checkpoint(store, id_a, 0, ExtendedSequenceNumber::shard_end());
  for (int child : {3, 4}) checkpoint(store, id_a, child, ExtendedSequenceNumber("5"));
  auto cleaned = sync_a.sync_once();
  ASSERT_TRUE(cleaned.ok()) << cleaned.status();
  EXPECT_FALSE(store.peek(id_a + ":" + sid(0)).has_value());
  EXPECT_TRUE(store.peek(id_b + ":" + sid(0)).has_value());

  Lease one_stream;
  one_stream.lease_key = sid(9);
  ASSERT_TRUE(store.create_lease_if_not_exists(one_stream).ok());
  auto refused = sync_b.sync_once();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("one-stream lease " + sid(9)));
}

// A multi-stream worker's listing of the leases, read before shard 3 was created, read to
// its end and cleaned up once its children 6 and 7 started: from that listing 3 looks like a
// shard that still needs a lease. The pass reads the table afresh before creating and
// creates nothing.
TEST(ShardSyncerTest, AnOldListingDoesNotBringBackALeaseCleanedUpSince) {
  leases::InMemoryLeaseStore store;
  // Now in the table: 0 finished and kept (a child of it not started yet), 6 and 7 started.
  store.put(lease(0, ExtendedSequenceNumber::shard_end()));
  store.put(lease(6, seq("9"), ids({3})));
  store.put(lease(7, seq("9"), ids({3})));
  const std::vector<Lease> old_listing = {lease(0, seq("5"))};
  Stream stream{{shard(0, -1, -1, true), shard(3, 0, -1, true), shard(6, 3), shard(7, 3)}, {}};
  ShardSyncer syncer(stream.lister(), store, InitialPosition::trim_horizon());
  auto r = syncer.sync_once(&old_listing);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_created, 0u);
  EXPECT_FALSE(store.peek(sid(3))) << "shard 3 is not read again after its children";
}

TEST(ShardSyncerTest, FreshTableAtTimestamp) {
  leases::InMemoryLeaseStore store;
  Stream stream{lineage_listing(), {}};
  ShardSyncer syncer(stream.lister(), store, InitialPosition::at_timestamp(kTimestamp));
  auto r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_created, 6u);
  for (int shard : {0, 1, 2, 3, 4, 5}) {
    EXPECT_EQ(store.peek(sid(shard))->checkpoint, ExtendedSequenceNumber::at_timestamp());
  }
}

TEST(ShardSyncerTest, FreshTableLatest) {
  leases::InMemoryLeaseStore store;
  Stream stream{lineage_listing(), {}};
  ShardSyncer syncer(stream.lister(), store, InitialPosition::latest());
  auto r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_created, 3u);
  EXPECT_EQ(stored_keys(store), ids({2, 3, 5}));
  for (const Lease& l : store.snapshot()) {
    EXPECT_EQ(l.checkpoint, ExtendedSequenceNumber::latest()) << l.lease_key;
  }
  EXPECT_EQ(store.peek(sid(5))->parent_shard_ids, ids({1, 4}));
}

TEST(ShardSyncerTest, SecondSyncWritesNothing) {
  for (auto pos : {InitialPosition::trim_horizon(), InitialPosition::latest(),
                   InitialPosition::at_timestamp(kTimestamp)}) {
    leases::InMemoryLeaseStore store;
    Stream stream{lineage_listing(), {}};
    ShardSyncer syncer(stream.lister(), store, pos);
    ASSERT_TRUE(syncer.sync_once().ok());
    const auto before = store.snapshot();
    store.reset_stats();
    auto r = syncer.sync_once();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->leases_created, 0u) << pos.name();
    EXPECT_EQ(r->already_existed, 0u) << pos.name();
    EXPECT_EQ(r->child_ids_updated, 0u) << pos.name();
    EXPECT_EQ(r->leases_deleted, 0u) << pos.name();
    EXPECT_EQ(store.stats().writes, 0) << pos.name();
    EXPECT_EQ(store.snapshot(), before) << pos.name();
  }
}

// ---------------------------------------------------------------------------------------
// Resharding while running

TEST(ShardSyncerTest, SplitThenMergeCreatesChildrenWithParents) {
  leases::InMemoryLeaseStore store;
  Stream stream{{shard(0, -1, -1, false, 0, 49), shard(1, -1, -1, false, 50, 99)}, {}};
  RecordingMetrics metrics;
  ShardSyncer syncer(stream.lister(), store, InitialPosition::latest(), metrics);
  ASSERT_TRUE(syncer.sync_once().ok());
  EXPECT_EQ(stored_keys(store), ids({0, 1}));
  checkpoint(store, 0, seq("100"));

  // Split 0 into 2 and 3.
  stream.close(0);
  stream.shards.push_back(shard(2, 0, -1, false, 0, 24));
  stream.shards.push_back(shard(3, 0, -1, false, 25, 49));
  auto r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_created, 2u);
  EXPECT_EQ(r->child_ids_updated, 1u);
  for (int child : {2, 3}) {
    auto l = store.peek(sid(child));
    ASSERT_TRUE(l.has_value());
    EXPECT_EQ(l->checkpoint, ExtendedSequenceNumber::trim_horizon());
    EXPECT_EQ(l->parent_shard_ids, ids({0}));
  }
  EXPECT_EQ(store.peek(sid(0))->child_shard_ids, ids({2, 3}));
  EXPECT_EQ(store.peek(sid(0))->checkpoint, seq("100"));  // untouched
  EXPECT_EQ(store.peek(sid(0))->lease_owner, "worker-x");

  // Merge 3 and 1 into 4.
  stream.close(3);
  stream.close(1);
  stream.shards.push_back(shard(4, 3, 1, false, 25, 99));
  r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_created, 1u);
  EXPECT_EQ(r->child_ids_updated, 2u);
  auto merged = store.peek(sid(4));
  ASSERT_TRUE(merged.has_value());
  EXPECT_EQ(merged->parent_shard_ids, ids({1, 3}));
  EXPECT_EQ(merged->checkpoint, ExtendedSequenceNumber::trim_horizon());
  EXPECT_EQ(store.peek(sid(1))->child_shard_ids, ids({4}));
  EXPECT_EQ(store.peek(sid(3))->child_shard_ids, ids({4}));
  EXPECT_EQ(metrics.get("shardsync.leases_created"), 5);
  EXPECT_EQ(metrics.get("shardsync.child_ids_updated"), 3);

  // The merge child waits for both parents.
  auto wait = parents_finished(store, *merged);
  ASSERT_TRUE(wait.ok());
  EXPECT_FALSE(*wait);
}

TEST(ShardSyncerTest, ChildIdsKeepThoseLearntElsewhere) {
  leases::InMemoryLeaseStore store;
  Lease parent = test::lease(0, seq("5"), {}, ids({7}));  // e.g. from GetRecords ChildShards
  store.put(parent);
  Stream stream{{shard(0, -1, -1, true), shard(2, 0), shard(3, 0)}, {}};
  ShardSyncer syncer(stream.lister(), store, InitialPosition::latest());
  auto r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(store.peek(sid(0))->child_shard_ids, ids({2, 3, 7}));
  EXPECT_EQ(store.peek(sid(0))->lease_counter, 0);  // childShardIds writes leave the counter
}

// ---------------------------------------------------------------------------------------
// Cleanup

TEST(ShardSyncerTest, FinishedParentDeletedOnlyOnceEveryChildStarted) {
  leases::InMemoryLeaseStore store;
  Stream stream{{shard(0, -1, -1, false)}, {}};
  RecordingMetrics metrics;
  ShardSyncer syncer(stream.lister(), store, InitialPosition::trim_horizon(), metrics);
  ASSERT_TRUE(syncer.sync_once().ok());
  stream.close(0);
  stream.shards.push_back(shard(1, 0));
  stream.shards.push_back(shard(2, 0));
  ASSERT_TRUE(syncer.sync_once().ok());
  checkpoint(store, 0, ExtendedSequenceNumber::shard_end());

  // Neither child started.
  auto r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_deleted, 0u);
  // One child started.
  checkpoint(store, 1, seq("10"));
  r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_deleted, 0u);
  EXPECT_TRUE(store.peek(sid(0)).has_value());
  // Both started: the parent's lease goes.
  checkpoint(store, 2, seq("11"));
  r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_deleted, 1u);
  EXPECT_FALSE(store.peek(sid(0)).has_value());
  EXPECT_EQ(metrics.get("shardsync.leases_deleted"), 1);

  // The cleaned-up parent is still listed: it is never recreated, whatever the position.
  for (auto pos : {InitialPosition::trim_horizon(), InitialPosition::latest(),
                   InitialPosition::at_timestamp(kTimestamp)}) {
    ShardSyncer other(stream.lister(), store, pos);
    r = other.sync_once();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->leases_created, 0u) << pos.name();
    EXPECT_FALSE(store.peek(sid(0)).has_value()) << pos.name();
  }
  // And a child that then ends and whose own children start is cleaned up the same way.
  stream.close(1);
  stream.shards.push_back(shard(3, 1));
  stream.shards.push_back(shard(4, 1));
  r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_created, 2u);
  checkpoint(store, 1, ExtendedSequenceNumber::shard_end());
  checkpoint(store, 3, seq("1"));
  checkpoint(store, 4, ExtendedSequenceNumber::shard_end());
  r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_deleted, 1u);
  EXPECT_EQ(stored_keys(store), ids({2, 3, 4}));
  r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_created, 0u);
  EXPECT_EQ(r->leases_deleted, 0u);
}

TEST(ShardSyncerTest, VanishedShardDeletedUnlessAChildStillNeedsIt) {
  leases::InMemoryLeaseStore store;
  // 0 (split into 3, 4) and 1 (no children known) have leases but were trimmed.
  store.put(test::lease(0, seq("50")));
  store.put(test::lease(1, seq("60")));
  store.put(test::lease(3, ExtendedSequenceNumber(), ids({0})));
  Stream stream{{shard(3, 0), shard(4, 0)}, {}};
  ShardSyncer syncer(stream.lister(), store, InitialPosition::latest());

  auto r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  // 4 gets a lease at TRIM_HORIZON because its parent's lease is still there.
  EXPECT_EQ(r->leases_created, 1u);
  EXPECT_EQ(store.peek(sid(4))->checkpoint, ExtendedSequenceNumber::trim_horizon());
  // 1 is gone and nobody needs it; 0 is kept while its children have not started.
  EXPECT_EQ(r->leases_deleted, 1u);
  EXPECT_EQ(stored_keys(store), ids({0, 3, 4}));

  checkpoint(store, 3, seq("1"));
  checkpoint(store, 4, seq("2"));
  r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_deleted, 1u);
  EXPECT_EQ(stored_keys(store), ids({3, 4}));
}

TEST(ShardSyncerTest, LeasesNewerThanTheListingSurvive) {
  // This worker's listing predates a split another worker already made leases for.
  leases::InMemoryLeaseStore store;
  store.put(test::lease(0, seq("50"), {}, ids({1, 2})));
  store.put(test::lease(1, seq("51"), ids({0})));
  store.put(test::lease(2, ExtendedSequenceNumber(), ids({0})));
  Stream stream{{shard(0)}, {}};
  ShardSyncer syncer(stream.lister(), store, InitialPosition::latest());
  auto r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_deleted, 0u);
  EXPECT_EQ(stored_keys(store), ids({0, 1, 2}));
}

TEST(ShardSyncerTest, EmptyListingDeletesNothing) {
  leases::InMemoryLeaseStore store;
  store.put(test::lease(0, seq("50")));
  Stream stream{{}, {}};
  ShardSyncer syncer(stream.lister(), store, InitialPosition::latest());
  auto r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_deleted, 0u);
  EXPECT_EQ(store.size(), 1u);
}

// ---------------------------------------------------------------------------------------
// Several workers

// Worker B runs a whole pass in the middle of worker A's creations (after A's first): both
// together create every lease exactly once, and the table is what one pass alone makes.
TEST(ShardSyncerTest, InterleavedPassesOfTwoWorkersCreateEachLeaseOnce) {
  for (auto pos : {InitialPosition::trim_horizon(), InitialPosition::latest(),
                   InitialPosition::at_timestamp(kTimestamp)}) {
    for (int interrupt_after = 0; interrupt_after < 6; ++interrupt_after) {
      leases::InMemoryLeaseStore reference;
      Stream stream{lineage_listing(), {}};
      ASSERT_TRUE(ShardSyncer(stream.lister(), reference, pos).sync_once().ok());

      leases::InMemoryLeaseStore store;
      HookedStore a_store(store);
      ShardSyncer a(stream.lister(), a_store, pos);
      ShardSyncer b(stream.lister(), store, pos);
      Result<SyncResult> b_result = Status(StatusCode::kInternal, "B did not run");
      int creates = 0;
      std::function<void(const Lease&)> hook = [&](const Lease&) {
        if (creates++ == interrupt_after) {
          b_result = b.sync_once();
        } else {
          a_store.after_create = hook;
        }
      };
      a_store.after_create = hook;
      auto a_result = a.sync_once();
      ASSERT_TRUE(a_result.ok()) << a_result.status();
      const std::size_t expected = reference.size();
      if (static_cast<std::size_t>(interrupt_after) >= expected) continue;  // B never ran
      ASSERT_TRUE(b_result.ok()) << b_result.status();
      EXPECT_EQ(a_result->leases_created + b_result->leases_created, expected)
          << pos.name() << " after " << interrupt_after;
      EXPECT_EQ(a_result->already_existed, b_result->leases_created);
      EXPECT_EQ(store.snapshot(), reference.snapshot())
          << pos.name() << " after " << interrupt_after;
    }
  }
}

TEST(ShardSyncerTest, ConcurrentPassesOnThreadsCreateEachLeaseOnce) {
  for (int round = 0; round < 50; ++round) {
    leases::InMemoryLeaseStore store;
    Stream stream{lineage_listing(), {}};
    ShardSyncer a(stream.lister(), store, InitialPosition::trim_horizon());
    ShardSyncer b(stream.lister(), store, InitialPosition::trim_horizon());
    std::atomic<bool> go{false};
    Result<SyncResult> ra = Status(StatusCode::kInternal, "not run");
    Result<SyncResult> rb = Status(StatusCode::kInternal, "not run");
    std::thread ta([&] {
      while (!go) std::this_thread::yield();
      ra = a.sync_once();
    });
    std::thread tb([&] {
      while (!go) std::this_thread::yield();
      rb = b.sync_once();
    });
    go = true;
    ta.join();
    tb.join();
    ASSERT_TRUE(ra.ok()) << ra.status();
    ASSERT_TRUE(rb.ok()) << rb.status();
    EXPECT_EQ(ra->leases_created + rb->leases_created, 6u);
    EXPECT_EQ(stored_keys(store), ids({0, 1, 2, 3, 4, 5}));
    for (const Lease& l : store.snapshot()) EXPECT_EQ(l.lease_counter, 0) << l.lease_key;
  }
}

// ---------------------------------------------------------------------------------------
// Errors

TEST(ShardSyncerTest, ListingErrorIsReturned) {
  leases::InMemoryLeaseStore store;
  Stream stream{{}, Status(StatusCode::kNotFound, "stream \"orders\" does not exist")};
  RecordingMetrics metrics;
  ShardSyncer syncer(stream.lister(), store, InitialPosition::latest(), metrics);
  auto r = syncer.sync_once();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("orders"));
  EXPECT_EQ(metrics.get("shardsync.failures"), 1);
  EXPECT_EQ(store.stats().writes, 0);
}

TEST(ShardSyncerTest, FailedCreateStopsBeforeTheChildren) {
  leases::InMemoryLeaseStore store;
  HookedStore hooked(store);
  Stream stream{{shard(0, -1, -1, true), shard(1, 0), shard(2, 0)}, {}};
  RecordingMetrics metrics;
  ShardSyncer syncer(stream.lister(), hooked, InitialPosition::trim_horizon(), metrics);

  hooked.fail_creates = 1;
  auto r = syncer.sync_once();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("creating lease " + sid(0)));
  EXPECT_EQ(store.size(), 0u) << "no child may be created while its parent's creation failed";
  EXPECT_EQ(metrics.get("shardsync.failures"), 1);

  store.fail_next(1, StatusCode::kUnavailable);  // the scan
  r = syncer.sync_once();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("listing leases"));

  // The next pass completes.
  r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_created, 3u);
  EXPECT_EQ(stored_keys(store), ids({0, 1, 2}));
}

TEST(ShardSyncerTest, CreateAppliedButReportedFailedIsFinishedNextPass) {
  leases::InMemoryLeaseStore store;
  HookedStore hooked(store);
  Stream stream{{shard(0, -1, -1, true), shard(1, 0)}, {}};
  ShardSyncer syncer(stream.lister(), hooked, InitialPosition::trim_horizon());
  hooked.apply_then_fail = 1;
  auto r = syncer.sync_once();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(stored_keys(store), ids({0}));
  r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_created, 1u);
  EXPECT_EQ(stored_keys(store), ids({0, 1}));
  EXPECT_EQ(store.peek(sid(1))->checkpoint, ExtendedSequenceNumber::trim_horizon());
}

TEST(ShardSyncerTest, ChildIdsOnALeaseDeletedMeanwhileAreSkipped) {
  // The scan sees lease 0; another worker deletes it before the childShardIds write.
  leases::InMemoryLeaseStore store;
  store.put(test::lease(0, ExtendedSequenceNumber::shard_end()));
  store.put(test::lease(1, seq("1"), ids({0})));
  HookedStore hooked(store);
  Stream stream{{shard(0, -1, -1, true), shard(1, 0), shard(2, 0)}, {}};
  hooked.after_create = [&](const Lease&) { ASSERT_TRUE(store.delete_lease(sid(0)).ok()); };
  ShardSyncer syncer(stream.lister(), hooked, InitialPosition::trim_horizon());
  auto r = syncer.sync_once();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->leases_created, 1u);  // 2, at TRIM_HORIZON (its parent had a lease)
  EXPECT_EQ(r->child_ids_updated, 0u);
  EXPECT_EQ(store.peek(sid(2))->checkpoint, ExtendedSequenceNumber::trim_horizon());
}

}  // namespace
}  // namespace kcl::shardsync
