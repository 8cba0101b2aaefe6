// The LeaseStore contract, as one sequence of calls with the results every implementation
// must give. Run on the in-memory store (unit tests) and on DynamoDbLeaseStore against
// dynalite (integration tests), it shows the two have the same semantics.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "leases/lease_store.h"

namespace kcl::leases::testing {

// `store` must be an empty, ready table.
inline void check_lease_store_contract(LeaseStore& store) {
  using ESN = ExtendedSequenceNumber;
  const std::string key = "shardId-000000000001";

  // Create.
  Lease fresh;
  fresh.lease_key = key;
  fresh.parent_shard_ids = {"shardId-000000000000", "shardId-00000000000a"};
  fresh.hash_key_range = HashKeyRange{"0", "340282366920938463463374607431768211455"};
  ASSERT_TRUE(store.create_lease_if_not_exists(fresh).ok());
  Lease other = fresh;
  other.checkpoint = ESN::latest();
  EXPECT_EQ(store.create_lease_if_not_exists(other).code(), StatusCode::kAlreadyExists);
  auto got = store.get_lease(key);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, fresh);
  auto missing = store.get_lease("shardId-none");
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_FALSE(missing->has_value());

  // Take a free lease: counter + 1, no owner switch.
  auto taken = store.take_lease(fresh, "A");
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->lease_owner, "A");
  EXPECT_EQ(taken->lease_counter, 1);
  EXPECT_EQ(taken->owner_switches_since_checkpoint, 0);
  EXPECT_EQ(taken->parent_shard_ids, fresh.parent_shard_ids);
  // A stale view cannot take it.
  EXPECT_EQ(store.take_lease(fresh, "B").status().code(), StatusCode::kConditionFailed);

  // Renew: fenced on counter and owner.
  Lease held = taken.value();
  Lease wrong_owner = held;
  wrong_owner.lease_owner = "B";
  EXPECT_EQ(store.renew_lease(wrong_owner).status().code(), StatusCode::kConditionFailed);
  auto renewed = store.renew_lease(held);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(renewed->lease_counter, 2);
  EXPECT_EQ(store.renew_lease(held).status().code(), StatusCode::kConditionFailed)
      << "the counter it was conditional on has moved";
  held = renewed.value();

  // Checkpoint with pending fields, then a plain checkpoint clears them.
  CheckpointFields prepare;
  prepare.checkpoint = ESN::trim_horizon();
  prepare.pending_checkpoint = ESN("4959033827149025660855969253836157109592157598913658", 4);
  prepare.pending_checkpoint_state = std::string("\x01\x00\xfe", 3);
  auto prepared = store.update_checkpoint(held, prepare);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(prepared->lease_counter, 3);
  EXPECT_EQ(prepared->pending_checkpoint, prepare.pending_checkpoint);
  EXPECT_EQ(prepared->pending_checkpoint_state, prepare.pending_checkpoint_state);
  held = prepared.value();
  CheckpointFields commit;
  commit.checkpoint = ESN("4959033827149025660855969253836157109592157598913658", 4);
  auto committed = store.update_checkpoint(held, commit);
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_EQ(committed->checkpoint, commit.checkpoint);
  EXPECT_FALSE(committed->pending_checkpoint);
  EXPECT_FALSE(committed->pending_checkpoint_state);
  EXPECT_EQ(committed->lease_counter, 4);
  EXPECT_EQ(store.update_checkpoint(held, commit).status().code(), StatusCode::kConditionFailed);
  held = committed.value();

  // Another worker takes it from A: an owner switch; A's writes are now all rejected.
  auto stolen = store.take_lease(held, "B");
  ASSERT_TRUE(stolen.ok()) << stolen.status();
  EXPECT_EQ(stolen->lease_owner, "B");
  EXPECT_EQ(stolen->lease_counter, 5);
  EXPECT_EQ(stolen->owner_switches_since_checkpoint, 1);
  EXPECT_EQ(store.renew_lease(held).status().code(), StatusCode::kConditionFailed);
  EXPECT_EQ(store.update_checkpoint(held, commit).status().code(), StatusCode::kConditionFailed);
  EXPECT_EQ(store.evict_lease(held).status().code(), StatusCode::kConditionFailed);

  // Child ids do not touch the counter.
  ASSERT_TRUE(
      store.update_child_shard_ids(key, {"shardId-000000000003", "shardId-000000000002"}).ok());
  EXPECT_EQ(store.update_child_shard_ids("shardId-none", {"x"}).code(), StatusCode::kNotFound);

  // B hands it back: no owner, counter + 1, checkpoint kept.
  auto released = store.evict_lease(stolen.value());
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_FALSE(released->lease_owner);
  EXPECT_EQ(released->lease_counter, 6);
  EXPECT_EQ(released->checkpoint, commit.checkpoint);
  EXPECT_EQ(released->child_shard_ids,
            (std::vector<std::string>{"shardId-000000000002", "shardId-000000000003"}));
  EXPECT_EQ(released->owner_switches_since_checkpoint, 1);

  // Taking a handed-back lease is no switch.
  auto retaken = store.take_lease(released.value(), "C");
  ASSERT_TRUE(retaken.ok()) << retaken.status();
  EXPECT_EQ(retaken->owner_switches_since_checkpoint, 1);

  // What get_lease and list_leases return is what the writes returned.
  auto listed = store.list_leases();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->at(0), retaken.value());

  // Delete, twice.
  EXPECT_TRUE(store.delete_lease(key).ok());
  EXPECT_TRUE(store.delete_lease(key).ok());
  auto after = store.list_leases();
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->empty());
  // Writes to a lease that does not exist fail their condition.
  EXPECT_EQ(store.renew_lease(retaken.value()).status().code(), StatusCode::kConditionFailed);
}

// The graceful handoff (Java KCL 3.x's checkpointOwner) on the same store: `store` must be
// an empty, ready table.
inline void check_lease_store_handoff_contract(LeaseStore& store) {
  const std::string key = "shardId-000000000007";
  Lease fresh;
  fresh.lease_key = key;
  ASSERT_TRUE(store.create_lease_if_not_exists(fresh).ok());
  auto held = store.take_lease(fresh, "old");
  ASSERT_TRUE(held.ok()) << held.status();

  // Start: leaseOwner = new, checkpointOwner = old, the counter unchanged.
  auto started = store.initiate_handoff(*held, "new");
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->lease_owner, std::optional<std::string>("new"));
  EXPECT_EQ(started->checkpoint_owner, std::optional<std::string>("old"));
  EXPECT_EQ(started->lease_counter, held->lease_counter);
  auto stored = store.get_lease(key);
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ(**stored, *started) << "the item as read equals the item as written";
  // Not twice, and not from a stale owner.
  EXPECT_EQ(store.initiate_handoff(*held, "third").status().code(), StatusCode::kConditionFailed);
  // The old owner's writes as it last saw the lease fail (the owners moved)...
  CheckpointFields cp;
  cp.checkpoint = ExtendedSequenceNumber("4959000000000000000000000000000042");
  EXPECT_EQ(store.update_checkpoint(*held, cp).status().code(), StatusCode::kConditionFailed);
  // ...and succeed on what it reads: it is the checkpoint owner.
  auto checkpointed = store.update_checkpoint(*started, cp);
  ASSERT_TRUE(checkpointed.ok()) << checkpointed.status();
  EXPECT_EQ(checkpointed->checkpoint_owner, std::optional<std::string>("old"));
  EXPECT_EQ(checkpointed->lease_counter, started->lease_counter + 1);
  // The new owner cannot take it while the handoff is pending with a view without it.
  Lease without = *checkpointed;
  without.checkpoint_owner.reset();
  EXPECT_EQ(store.take_lease(without, "new").status().code(), StatusCode::kConditionFailed);

  // Complete: evict removes only checkpointOwner.
  auto done = store.evict_lease(*checkpointed);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->lease_owner, std::optional<std::string>("new"));
  EXPECT_FALSE(done->checkpoint_owner);
  EXPECT_EQ(done->checkpoint, cp.checkpoint);
  // The new owner adopts it with a take (fencing anything older).
  auto adopted = store.take_lease(*done, "new");
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(adopted->lease_counter, done->lease_counter + 1);

  // A take of a lease still being handed off ends the handoff (the receiver's timeout).
  auto again = store.initiate_handoff(*adopted, "old");
  ASSERT_TRUE(again.ok()) << again.status();
  auto forced = store.take_lease(*again, "old");
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_EQ(forced->lease_owner, std::optional<std::string>("old"));
  EXPECT_FALSE(forced->checkpoint_owner);
}

}  // namespace kcl::leases::testing
