// The in-memory lease store: conditions, results, counting and fault injection. The same
// semantics are checked against dynalite for the DynamoDB store (integration tests).
#include "leases/in_memory_lease_store.h"

#include <gtest/gtest.h>

#include "support/lease_store_contract.h"
#include "support/lease_test_util.h"

namespace kcl::leases {
namespace {

using testing::shard;

Lease free_lease(int i) {
  Lease l;
  l.lease_key = shard(i);
  return l;
}

TEST(InMemoryLeaseStoreTest, Contract) {
  InMemoryLeaseStore store;
  testing::check_lease_store_contract(store);
}

TEST(InMemoryLeaseStoreTest, HandoffContract) {
  InMemoryLeaseStore store;
  testing::check_lease_store_handoff_contract(store);
}

TEST(InMemoryLeaseStoreTest, CreateIfNotExistsKeepsTheExistingItem) {
  InMemoryLeaseStore store;
  Lease l = free_lease(1);
  l.parent_shard_ids = {"shardId-b", "shardId-a"};
  ASSERT_TRUE(store.create_lease_if_not_exists(l).ok());
  EXPECT_EQ(store.peek(shard(1))->parent_shard_ids,
            (std::vector<std::string>{"shardId-a", "shardId-b"}));
  Lease other = free_lease(1);
  other.checkpoint = ExtendedSequenceNumber::latest();
  EXPECT_EQ(store.create_lease_if_not_exists(other).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store.peek(shard(1))->checkpoint, ExtendedSequenceNumber::trim_horizon());
}

TEST(InMemoryLeaseStoreTest, TakeIsConditionalOnCounterAndOwner) {
  InMemoryLeaseStore store;
  store.put(free_lease(1));
  Lease seen = *store.peek(shard(1));
  auto taken = store.take_lease(seen, "A");
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->lease_counter, 1);
  EXPECT_EQ(taken->lease_owner, "A");
  EXPECT_EQ(taken->owner_switches_since_checkpoint, 0);
  // The same stale view again: the counter moved.
  auto again = store.take_lease(seen, "B");
  EXPECT_EQ(again.status().code(), StatusCode::kConditionFailed);
  // Right counter, wrong owner expectation (seen as free, but A owns it).
  Lease wrong_owner = *store.peek(shard(1));
  wrong_owner.lease_owner.reset();
  EXPECT_EQ(store.take_lease(wrong_owner, "B").status().code(), StatusCode::kConditionFailed);
  // A correct view: A -> B is an owner switch.
  auto stolen = store.take_lease(*store.peek(shard(1)), "B");
  ASSERT_TRUE(stolen.ok());
  EXPECT_EQ(stolen->lease_counter, 2);
  EXPECT_EQ(stolen->owner_switches_since_checkpoint, 1);
  EXPECT_EQ(store.stats().failed_conditions, 2);
  EXPECT_EQ(store.stats().owner_changes, 2);
}

TEST(InMemoryLeaseStoreTest, RenewEvictAndCheckpointFenceOnCounterAndOwner) {
  InMemoryLeaseStore store;
  store.put(free_lease(1));
  Lease held = store.take_lease(*store.peek(shard(1)), "A").value();

  Lease not_owner = held;
  not_owner.lease_owner = "B";
  EXPECT_EQ(store.renew_lease(not_owner).status().code(), StatusCode::kConditionFailed);
  Lease stale = held;
  stale.lease_counter -= 1;
  EXPECT_EQ(store.renew_lease(stale).status().code(), StatusCode::kConditionFailed);

  held = store.renew_lease(held).value();
  EXPECT_EQ(held.lease_counter, 2);

  CheckpointFields f;
  f.checkpoint = ExtendedSequenceNumber("100", 2);
  f.pending_checkpoint = ExtendedSequenceNumber("200");
  f.pending_checkpoint_state = std::string("\x00\x01state", 7);
  f.owner_switches_since_checkpoint = 0;
  EXPECT_EQ(store.update_checkpoint(stale, f).status().code(), StatusCode::kConditionFailed);
  held = store.update_checkpoint(held, f).value();
  EXPECT_EQ(held.lease_counter, 3);
  EXPECT_EQ(held.checkpoint, ExtendedSequenceNumber("100", 2));
  EXPECT_EQ(held.pending_checkpoint, ExtendedSequenceNumber("200"));
  EXPECT_EQ(held.pending_checkpoint_state, std::string("\x00\x01state", 7));
  EXPECT_EQ(*store.peek(shard(1)), held);

  CheckpointFields clear;
  clear.checkpoint = ExtendedSequenceNumber("200");
  held = store.update_checkpoint(held, clear).value();
  EXPECT_FALSE(held.pending_checkpoint);
  EXPECT_FALSE(held.pending_checkpoint_state);

  EXPECT_EQ(store.evict_lease(stale).status().code(), StatusCode::kConditionFailed);
  Lease released = store.evict_lease(held).value();
  EXPECT_FALSE(released.lease_owner);
  EXPECT_EQ(released.lease_counter, 5);
  EXPECT_EQ(released.checkpoint, ExtendedSequenceNumber("200"));
  // A free lease cannot be renewed by anyone.
  EXPECT_EQ(store.renew_lease(held).status().code(), StatusCode::kConditionFailed);
}

TEST(InMemoryLeaseStoreTest, ChildShardIdsDoNotTouchTheCounter) {
  InMemoryLeaseStore store;
  store.put(free_lease(1));
  ASSERT_TRUE(store.update_child_shard_ids(shard(1), {"c2", "c1"}).ok());
  auto l = store.peek(shard(1));
  EXPECT_EQ(l->child_shard_ids, (std::vector<std::string>{"c1", "c2"}));
  EXPECT_EQ(l->lease_counter, 0);
  EXPECT_EQ(store.update_child_shard_ids(shard(9), {"x"}).code(), StatusCode::kNotFound);
}

TEST(InMemoryLeaseStoreTest, DeleteIsIdempotent) {
  InMemoryLeaseStore store;
  store.put(free_lease(1));
  EXPECT_TRUE(store.delete_lease(shard(1)).ok());
  EXPECT_TRUE(store.delete_lease(shard(1)).ok());
  auto got = store.get_lease(shard(1));
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
}

TEST(InMemoryLeaseStoreTest, FaultInjectionBeforeAndAfterApplying) {
  InMemoryLeaseStore store;
  store.put(free_lease(1));
  store.fail_next(2);
  EXPECT_EQ(store.list_leases().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.take_lease(*store.peek(shard(1)), "A").status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(store.peek(shard(1))->lease_owner) << "failed before applying";
  store.fail_next(1, StatusCode::kUnavailable, /*after_apply=*/true);
  EXPECT_EQ(store.take_lease(*store.peek(shard(1)), "A").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.peek(shard(1))->lease_owner, "A") << "applied, then failed";
  EXPECT_TRUE(store.list_leases().ok());
  EXPECT_EQ(store.stats().injected_faults, 3);
}

TEST(InMemoryLeaseStoreTest, CountsOperationsAndCapacity) {
  InMemoryLeaseStore store;
  testing::add_free_leases(store, 5000);
  store.reset_stats();
  ASSERT_TRUE(store.list_leases().ok());
  auto s = store.stats();
  EXPECT_EQ(s.scans, 1);
  EXPECT_EQ(s.items_scanned, 5000);
  EXPECT_GT(s.bytes_scanned, 5000 * 80);
  EXPECT_GE(s.scan_pages, 1);
  EXPECT_GT(s.read_units, 40);
  (void)store.get_lease(shard(1));
  (void)store.renew_lease(*store.peek(shard(1)));  // fails: no owner
  s = store.stats();
  EXPECT_EQ(s.gets, 1);
  EXPECT_EQ(s.requests(), s.scan_pages + 1 + s.writes);
}

TEST(InMemoryLeaseStoreTest, ItemSizeFollowsDynamoDbRules) {
  Lease l;
  l.lease_key = "shardId-000000000001";  // 8 + 20
  EXPECT_EQ(estimated_item_size(l), 28u + (12 + 1 + 1) + (28 + 2) + (10 + 12) + (27 + 2));
}

}  // namespace
}  // namespace kcl::leases
