// Lineage: the graph, parents_finished, and the creation / deletion rules as pure functions.
#include "shardsync/lineage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "leases/in_memory_lease_store.h"
#include "unit/shardsync/test_listing.h"

namespace kcl::shardsync {
namespace {

using test::find;
using test::ids;
using test::keys;
using test::lease;
using test::lineage_listing;
using test::seq;
using test::shard;
using test::sid;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

using test::kTimestamp;

// ---------------------------------------------------------------------------------------
// InitialPosition

TEST(InitialPositionTest, DefaultIsLatestAndSentinelsMatch) {
  InitialPosition def;
  EXPECT_EQ(def.kind, InitialPosition::Kind::kLatest);
  EXPECT_EQ(def, InitialPosition::latest());
  EXPECT_EQ(InitialPosition::latest().sentinel().kind(), ExtendedSequenceNumber::Kind::kLatest);
  EXPECT_EQ(InitialPosition::trim_horizon().sentinel().kind(),
            ExtendedSequenceNumber::Kind::kTrimHorizon);
  auto at = InitialPosition::at_timestamp(kTimestamp);
  EXPECT_EQ(at.sentinel().kind(), ExtendedSequenceNumber::Kind::kAtTimestamp);
  EXPECT_EQ(at.timestamp, kTimestamp);
  EXPECT_EQ(at.name(), "AT_TIMESTAMP");
  EXPECT_EQ(InitialPosition::trim_horizon().name(), "TRIM_HORIZON");
  EXPECT_EQ(def.name(), "LATEST");
  EXPECT_THAT(at.validate(), IsEmpty());
  EXPECT_THAT(def.validate(), IsEmpty());
  InitialPosition no_time;
  no_time.kind = InitialPosition::Kind::kAtTimestamp;
  EXPECT_EQ(no_time.validate().size(), 1u);
}

// ---------------------------------------------------------------------------------------
// ShardGraph

TEST(ShardGraphTest, ParentsChildrenRootsAndOrder) {
  ShardGraph g(lineage_listing());
  EXPECT_EQ(g.size(), 6u);
  EXPECT_EQ(g.roots(), ids({0, 1, 2}));
  EXPECT_EQ(g.parents(sid(5)), ids({1, 4}));
  EXPECT_EQ(g.parents(sid(3)), ids({0}));
  EXPECT_THAT(g.parents(sid(0)), IsEmpty());
  EXPECT_EQ(g.children(sid(0)), ids({3, 4}));
  EXPECT_EQ(g.children(sid(1)), ids({5}));
  EXPECT_EQ(g.listed_children(sid(4)), ids({5}));
  EXPECT_THAT(g.children(sid(2)), IsEmpty());
  EXPECT_EQ(g.descendants(sid(0)), ids({3, 4, 5}));
  EXPECT_THAT(g.descendants(sid(5)), IsEmpty());
  EXPECT_TRUE(g.in_listing(sid(4)));
  EXPECT_FALSE(g.in_listing(sid(9)));
  EXPECT_EQ(g.shard(sid(9)), nullptr);
  ASSERT_NE(g.shard(sid(5)), nullptr);
  EXPECT_EQ(g.shard(sid(5))->adjacent_parent_shard_id, sid(1));

  // Parents before children.
  const auto& order = g.topological_order();
  ASSERT_EQ(order.size(), 6u);
  auto pos = [&](int n) { return std::find(order.begin(), order.end(), sid(n)) - order.begin(); };
  EXPECT_LT(pos(0), pos(3));
  EXPECT_LT(pos(0), pos(4));
  EXPECT_LT(pos(4), pos(5));
  EXPECT_LT(pos(1), pos(5));
}

TEST(ShardGraphTest, OrderIsParentsFirstEvenWhenIdsSayOtherwise) {
  // A child with a smaller id than its parent (not what Kinesis does, but the order must not
  // rely on ids).
  std::vector<kinesis::Shard> listing = {shard(1, 7), shard(7), shard(0, 1)};
  ShardGraph g(listing);
  EXPECT_EQ(g.topological_order(), ids({7, 1, 0}));
  EXPECT_EQ(g.roots(), ids({7}));
}

TEST(ShardGraphTest, LeasesAddEdgesForShardsNoLongerListed) {
  // Shard 0 was trimmed; its lease and its children's leases remain.
  std::vector<kinesis::Shard> listing = {shard(3, 0), shard(4, 0, -1, true), shard(5, 4, 1)};
  std::vector<Lease> leases = {lease(0, seq("5"), {}, ids({3, 4, 9})),
                               lease(8, seq("1"), ids({6}))};
  ShardGraph g(listing, leases);
  EXPECT_EQ(g.children(sid(0)), ids({3, 4, 9}));  // listing + childShardIds
  EXPECT_EQ(g.listed_children(sid(0)), ids({3, 4}));
  EXPECT_EQ(g.children(sid(6)), ids({8}));  // from the lease's parentShardId
  EXPECT_EQ(g.parents(sid(8)), ids({6}));
  EXPECT_EQ(g.descendants(sid(0)), ids({3, 4, 5, 9}));
  EXPECT_EQ(g.roots(), ids({3, 4}));  // 5's parent 4 is listed
}

TEST(LineageTest, ParentIdsAndChildShardIds) {
  EXPECT_EQ(parent_ids(shard(5, 4, 1)), ids({1, 4}));
  EXPECT_EQ(parent_ids(shard(3, 0)), ids({0}));
  EXPECT_THAT(parent_ids(shard(2)), IsEmpty());
  EXPECT_EQ(child_shard_ids(lineage_listing(), sid(0)), ids({3, 4}));
  EXPECT_EQ(child_shard_ids(lineage_listing(), sid(1)), ids({5}));
  EXPECT_THAT(child_shard_ids(lineage_listing(), sid(2)), IsEmpty());
}

// ---------------------------------------------------------------------------------------
// parents_finished

TEST(ParentsFinishedTest, Cases) {
  const Lease split_child = lease(3, ExtendedSequenceNumber(), ids({0}));
  const Lease merge_child = lease(5, ExtendedSequenceNumber(), ids({1, 4}));
  const Lease root = lease(2);

  // No parents: nothing to wait for.
  EXPECT_TRUE(parents_finished(root, std::vector<Lease>{}));
  // Parent SHARD_END.
  EXPECT_TRUE(parents_finished(split_child, {lease(0, ExtendedSequenceNumber::shard_end())}));
  // Parent still reading (sequence number) or never started (TRIM_HORIZON).
  EXPECT_FALSE(parents_finished(split_child, {lease(0, seq("123"))}));
  EXPECT_FALSE(parents_finished(split_child, {lease(0)}));
  // Parent has no lease (trimmed or cleaned up).
  EXPECT_TRUE(parents_finished(split_child, {lease(7)}));
  // Merge: both finished / one missing and one finished / one unfinished.
  EXPECT_TRUE(parents_finished(merge_child, {lease(1, ExtendedSequenceNumber::shard_end()),
                                             lease(4, ExtendedSequenceNumber::shard_end())}));
  EXPECT_TRUE(parents_finished(merge_child, {lease(4, ExtendedSequenceNumber::shard_end())}));
  EXPECT_FALSE(parents_finished(
      merge_child, {lease(1, ExtendedSequenceNumber::shard_end()), lease(4, seq("77"))}));
  EXPECT_FALSE(parents_finished(merge_child, {lease(1, ExtendedSequenceNumber::latest())}));
}

TEST(ParentsFinishedTest, FromStoreReadsEachParent) {
  leases::InMemoryLeaseStore store;
  const Lease merge_child = lease(5, ExtendedSequenceNumber(), ids({1, 4}));
  store.put(lease(1, ExtendedSequenceNumber::shard_end()));
  store.put(lease(4, seq("10")));
  auto r = parents_finished(store, merge_child);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);

  store.put(lease(4, ExtendedSequenceNumber::shard_end()));
  r = parents_finished(store, merge_child);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);

  ASSERT_TRUE(store.delete_lease(sid(1)).ok());
  r = parents_finished(store, merge_child);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  EXPECT_EQ(store.stats().gets, 6);  // consistent reads, one per parent

  store.fail_next(1, StatusCode::kUnavailable);
  r = parents_finished(store, merge_child);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr(sid(1)));
}

// ---------------------------------------------------------------------------------------
// leases_to_create on an empty table

TEST(LeasesToCreateTest, FreshTableTrimHorizon) {
  auto created = leases_to_create(lineage_listing(), {}, InitialPosition::trim_horizon());
  ASSERT_EQ(keys(created), ids({0, 1, 2, 3, 4, 5}));
  for (const Lease& l : created) {
    EXPECT_EQ(l.checkpoint, ExtendedSequenceNumber::trim_horizon()) << l.lease_key;
    EXPECT_EQ(l.lease_counter, 0);
    EXPECT_FALSE(l.lease_owner.has_value());
    EXPECT_EQ(l.owner_switches_since_checkpoint, 0);
    EXPECT_FALSE(l.pending_checkpoint.has_value());
    ASSERT_TRUE(l.hash_key_range.has_value());
  }
  EXPECT_THAT(find(created, sid(0))->parent_shard_ids, IsEmpty());
  EXPECT_EQ(find(created, sid(0))->child_shard_ids, ids({3, 4}));
  EXPECT_EQ(find(created, sid(3))->parent_shard_ids, ids({0}));
  EXPECT_THAT(find(created, sid(3))->child_shard_ids, IsEmpty());
  EXPECT_EQ(find(created, sid(4))->child_shard_ids, ids({5}));
  EXPECT_EQ(find(created, sid(5))->parent_shard_ids, ids({1, 4}));
  EXPECT_EQ(find(created, sid(5))->hash_key_range, (HashKeyRange{"25", "79"}));

  // Creation order: parents first.
  auto pos = [&](int n) {
    return std::find_if(created.begin(), created.end(),
                        [&](const Lease& l) { return l.lease_key == sid(n); }) -
           created.begin();
  };
  EXPECT_LT(pos(0), pos(3));
  EXPECT_LT(pos(0), pos(4));
  EXPECT_LT(pos(4), pos(5));
  EXPECT_LT(pos(1), pos(5));
}

TEST(LeasesToCreateTest, FreshTableAtTimestampGivesEveryShardTheSentinel) {
  // As the Java KCL: the children too start at the time, not at their start (a child that
  // began before the time holds records the application asked to skip).
  auto created = leases_to_create(lineage_listing(), {}, InitialPosition::at_timestamp(kTimestamp));
  ASSERT_EQ(keys(created), ids({0, 1, 2, 3, 4, 5}));
  for (int shard : {0, 1, 2, 3, 4, 5}) {
    EXPECT_EQ(find(created, sid(shard))->checkpoint, ExtendedSequenceNumber::at_timestamp());
  }
  // A split of a shard being read: its children start at the time too (after it).
  std::vector<Lease> existing = {lease(0, seq("5"))};
  std::vector<kinesis::Shard> listing = {shard(0, -1, -1, true), shard(3, 0), shard(4, 0)};
  created = leases_to_create(listing, existing, InitialPosition::at_timestamp(kTimestamp));
  ASSERT_EQ(keys(created), ids({3, 4}));
  EXPECT_EQ(created[0].checkpoint, ExtendedSequenceNumber::at_timestamp());
  EXPECT_EQ(created[0].parent_shard_ids, ids({0}));
}

TEST(LeasesToCreateTest, FreshTableLatestOnlyOpenShards) {
  auto created = leases_to_create(lineage_listing(), {}, InitialPosition::latest());
  ASSERT_EQ(keys(created), ids({2, 3, 5}));
  for (const Lease& l : created) {
    EXPECT_EQ(l.checkpoint, ExtendedSequenceNumber::latest()) << l.lease_key;
  }
  // The parent ids are kept; those parents have no lease, so the children need not wait.
  EXPECT_EQ(find(created, sid(5))->parent_shard_ids, ids({1, 4}));
  EXPECT_TRUE(parents_finished(*find(created, sid(5)), created));
  EXPECT_TRUE(parents_finished(*find(created, sid(3)), created));
}

TEST(LeasesToCreateTest, NothingWhenEveryShardHasALease) {
  for (auto pos : {InitialPosition::trim_horizon(), InitialPosition::latest(),
                   InitialPosition::at_timestamp(kTimestamp)}) {
    auto first = leases_to_create(lineage_listing(), {}, pos);
    EXPECT_THAT(leases_to_create(lineage_listing(), first, pos), IsEmpty()) << pos.name();
  }
}

// A concurrent worker may see the table half filled (leases are created parents first):
// its decisions must match those taken on the empty table, for every prefix.
TEST(LeasesToCreateTest, HalfFilledTableGivesTheSameDecisions) {
  for (auto pos : {InitialPosition::trim_horizon(), InitialPosition::latest(),
                   InitialPosition::at_timestamp(kTimestamp)}) {
    auto full = leases_to_create(lineage_listing(), {}, pos);
    for (std::size_t prefix = 0; prefix <= full.size(); ++prefix) {
      std::vector<Lease> existing(full.begin(), full.begin() + static_cast<long>(prefix));
      auto rest = leases_to_create(lineage_listing(), existing, pos);
      std::vector<Lease> expected(full.begin() + static_cast<long>(prefix), full.end());
      EXPECT_EQ(rest, expected) << pos.name() << " prefix " << prefix;
    }
  }
}

// ---------------------------------------------------------------------------------------
// leases_to_create on a table in use

TEST(LeasesToCreateTest, NewSplitChildrenStartAtTrimHorizonWithTheirParent) {
  // Running on LATEST: shard 2 has a lease; it is split into 6 and 7.
  std::vector<kinesis::Shard> listing = {shard(2, -1, -1, true), shard(6, 2), shard(7, 2)};
  auto created = leases_to_create(listing, {lease(2, seq("55"))}, InitialPosition::latest());
  ASSERT_EQ(keys(created), ids({6, 7}));
  for (const Lease& l : created) {
    EXPECT_EQ(l.checkpoint, ExtendedSequenceNumber::trim_horizon());
    EXPECT_EQ(l.parent_shard_ids, ids({2}));
  }
}

TEST(LeasesToCreateTest, NewMergeChildNamesBothParents) {
  std::vector<kinesis::Shard> listing = {
      shard(6, -1, -1, true, 0, 49), shard(7, -1, -1, true, 50, 99), shard(8, 7, 6, false, 0, 99)};
  std::vector<Lease> existing = {lease(6, seq("1")), lease(7, seq("2"))};
  auto created = leases_to_create(listing, existing, InitialPosition::latest());
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].lease_key, sid(8));
  EXPECT_EQ(created[0].parent_shard_ids, ids({6, 7}));
  EXPECT_EQ(created[0].checkpoint, ExtendedSequenceNumber::trim_horizon());
  EXPECT_EQ(created[0].hash_key_range, (HashKeyRange{"0", "99"}));
}

TEST(LeasesToCreateTest, MergeChildWithOnlyOneLeasedParentStillStartsAtTrimHorizon) {
  // Parent 1 held nothing to read on LATEST (closed, never leased); parent 4 has a lease.
  std::vector<kinesis::Shard> listing = {shard(1, -1, -1, true), shard(4, -1, -1, true),
                                         shard(5, 4, 1)};
  auto created = leases_to_create(listing, {lease(4, seq("9"))}, InitialPosition::latest());
  ASSERT_EQ(keys(created), ids({5}));
  EXPECT_EQ(created[0].checkpoint, ExtendedSequenceNumber::trim_horizon());
}

TEST(LeasesToCreateTest, GrandchildrenOfALeasedShardAllStartAtTrimHorizon) {
  // 2 (leased) split into 6 and 7 and 6 split again into 8 and 9 before any sync ran.
  std::vector<kinesis::Shard> listing = {shard(2, -1, -1, true), shard(6, 2, -1, true), shard(7, 2),
                                         shard(8, 6), shard(9, 6)};
  auto created = leases_to_create(listing, {lease(2, seq("1"))}, InitialPosition::latest());
  ASSERT_EQ(keys(created), ids({6, 7, 8, 9}));
  for (const Lease& l : created) EXPECT_EQ(l.checkpoint, ExtendedSequenceNumber::trim_horizon());
  EXPECT_EQ(find(created, sid(6))->child_shard_ids, ids({8, 9}));
  EXPECT_EQ(find(created, sid(8))->parent_shard_ids, ids({6}));
}

TEST(LeasesToCreateTest, CleanedUpParentIsNeverRecreated) {
  // 0 finished and its lease was deleted once 3 and 4 had started; 0 is still listed.
  std::vector<Lease> existing = {lease(1, ExtendedSequenceNumber::shard_end()), lease(2, seq("5")),
                                 lease(3, seq("6"), ids({0})),
                                 lease(4, ExtendedSequenceNumber::shard_end(), ids({0})),
                                 lease(5, seq("8"), ids({1, 4}))};
  for (auto pos : {InitialPosition::trim_horizon(), InitialPosition::latest(),
                   InitialPosition::at_timestamp(kTimestamp)}) {
    EXPECT_THAT(leases_to_create(lineage_listing(), existing, pos), IsEmpty()) << pos.name();
  }
  // Even a grandparent whose only leased descendant is a grandchild.
  std::vector<Lease> only_grandchild = {lease(2, seq("5")), lease(3, seq("6"), ids({0})),
                                        lease(5, seq("8"), ids({1, 4}))};
  EXPECT_THAT(leases_to_create(lineage_listing(), only_grandchild, InitialPosition::trim_horizon()),
              IsEmpty());
}

TEST(LeasesToCreateTest, ChildOfAParentWithoutLeaseIsDecidedLikeARoot) {
  // 0 has no lease and 3 has one, but 4 has none. Cleanup never leaves this (0's lease goes
  // only once 3 and 4 have started), so 0 was never read (LATEST skipped it) and 4 is
  // decided like a root.
  std::vector<kinesis::Shard> listing = {shard(0, -1, -1, true), shard(3, 0), shard(4, 0)};
  std::vector<Lease> existing = {lease(3, ExtendedSequenceNumber::latest(), ids({0}))};
  auto created = leases_to_create(listing, existing, InitialPosition::latest());
  ASSERT_EQ(keys(created), ids({4}));
  EXPECT_EQ(created[0].checkpoint, ExtendedSequenceNumber::latest());
  EXPECT_EQ(created[0].parent_shard_ids, ids({0}));

  created = leases_to_create(listing, existing, InitialPosition::trim_horizon());
  ASSERT_EQ(keys(created), ids({4}));
  EXPECT_EQ(created[0].checkpoint, ExtendedSequenceNumber::trim_horizon());

  // A closed one on LATEST holds nothing new: skipped, and its open child gets LATEST.
  listing = {shard(0, -1, -1, true), shard(3, 0), shard(4, 0, -1, true), shard(5, 4)};
  created = leases_to_create(listing, existing, InitialPosition::latest());
  ASSERT_EQ(keys(created), ids({5}));
  EXPECT_EQ(created[0].checkpoint, ExtendedSequenceNumber::latest());
}

TEST(LeasesToCreateTest, NewRootGetsTheInitialPosition) {
  // A listing whose parents are gone (trimmed) and have no lease: a root.
  std::vector<kinesis::Shard> listing = {shard(6, 2), shard(7, 2)};
  auto created = leases_to_create(listing, {lease(9, seq("1"))}, InitialPosition::trim_horizon());
  ASSERT_EQ(keys(created), ids({6, 7}));
  EXPECT_EQ(created[0].checkpoint, ExtendedSequenceNumber::trim_horizon());
  EXPECT_EQ(created[0].parent_shard_ids, ids({2}));

  created = leases_to_create(listing, {}, InitialPosition::at_timestamp(kTimestamp));
  ASSERT_EQ(keys(created), ids({6, 7}));
  EXPECT_EQ(created[0].checkpoint, ExtendedSequenceNumber::at_timestamp());

  // A trimmed parent that still has a lease: its children wait and start at TRIM_HORIZON.
  created = leases_to_create(listing, {lease(2, seq("1"))}, InitialPosition::latest());
  ASSERT_EQ(keys(created), ids({6, 7}));
  EXPECT_EQ(created[0].checkpoint, ExtendedSequenceNumber::trim_horizon());
}

// ---------------------------------------------------------------------------------------
// leases_to_delete

TEST(LeasesToDeleteTest, FinishedParentKeptUntilEveryChildStarted) {
  std::vector<kinesis::Shard> listing = {shard(0, -1, -1, true), shard(3, 0), shard(4, 0)};
  std::vector<Lease> leases = {lease(0, ExtendedSequenceNumber::shard_end()),
                               lease(3, seq("10"), ids({0})), lease(4, {}, ids({0}))};
  EXPECT_THAT(leases_to_delete(listing, leases, true), IsEmpty());
  leases[2].checkpoint = ExtendedSequenceNumber::latest();  // initial sentinel: not started
  EXPECT_THAT(leases_to_delete(listing, leases, true), IsEmpty());
  leases[2].checkpoint = seq("11");
  EXPECT_THAT(leases_to_delete(listing, leases, true), ElementsAre(sid(0)));
  leases[2].checkpoint = ExtendedSequenceNumber::shard_end();  // a child that also ended
  EXPECT_THAT(leases_to_delete(listing, leases, true), ElementsAre(sid(0)));
  // The listing need not be complete for this rule.
  EXPECT_THAT(leases_to_delete(listing, leases, false), ElementsAre(sid(0)));
}

TEST(LeasesToDeleteTest, FinishedParentKeptWhileAChildHasNoLease) {
  std::vector<kinesis::Shard> listing = {shard(0, -1, -1, true), shard(3, 0), shard(4, 0)};
  std::vector<Lease> leases = {lease(0, ExtendedSequenceNumber::shard_end()),
                               lease(3, seq("10"), ids({0}))};
  EXPECT_THAT(leases_to_delete(listing, leases, true), IsEmpty());
}

TEST(LeasesToDeleteTest, ChildrenFromChildShardIdsCountToo) {
  // The listing does not show 0's children (e.g. listed before the split), but the lease
  // knows them.
  std::vector<kinesis::Shard> listing = {shard(0, -1, -1, true)};
  std::vector<Lease> leases = {lease(0, ExtendedSequenceNumber::shard_end(), {}, ids({3, 4})),
                               lease(3, seq("10"), ids({0}))};
  EXPECT_THAT(leases_to_delete(listing, leases, true), IsEmpty());
  leases.push_back(lease(4, seq("12"), ids({0})));
  EXPECT_THAT(leases_to_delete(listing, leases, true), ElementsAre(sid(0)));
}

TEST(LeasesToDeleteTest, FinishedShardWithoutKnownChildrenIsKept) {
  std::vector<kinesis::Shard> listing = {shard(0, -1, -1, true)};
  EXPECT_THAT(leases_to_delete(listing, {lease(0, ExtendedSequenceNumber::shard_end())}, true),
              IsEmpty());
}

TEST(LeasesToDeleteTest, MergeParentsKeptUntilTheChildStarted) {
  std::vector<Lease> leases = {lease(1, ExtendedSequenceNumber::shard_end()), lease(2, seq("3")),
                               lease(3, seq("4"), ids({0})),
                               lease(4, ExtendedSequenceNumber::shard_end(), ids({0})),
                               lease(5, {}, ids({1, 4}))};
  EXPECT_THAT(leases_to_delete(lineage_listing(), leases, true), IsEmpty());
  leases[4].checkpoint = seq("100");
  EXPECT_THAT(leases_to_delete(lineage_listing(), leases, true), ElementsAre(sid(1), sid(4)));
}

TEST(LeasesToDeleteTest, VanishedShardDeletedUnlessAChildNeedsIt) {
  // 0 was trimmed from the stream; its lease remains (it never reached SHARD_END).
  std::vector<kinesis::Shard> listing = {shard(3, 0), shard(4, 0)};
  std::vector<Lease> leases = {lease(0, seq("7")), lease(3, {}, ids({0})),
                               lease(4, seq("8"), ids({0}))};
  EXPECT_THAT(leases_to_delete(listing, leases, true), IsEmpty());  // 3 has not started
  leases[1].checkpoint = seq("9");
  EXPECT_THAT(leases_to_delete(listing, leases, true), ElementsAre(sid(0)));
  // Not on an incomplete listing.
  EXPECT_THAT(leases_to_delete(listing, leases, false), IsEmpty());
  // Nor on an empty one, even when called complete.
  EXPECT_THAT(leases_to_delete({}, leases, true), IsEmpty());
}

TEST(LeasesToDeleteTest, VanishedShardKeptWhileAListedChildHasNoLeaseYet) {
  std::vector<kinesis::Shard> listing = {shard(3, 0), shard(4, 0)};
  std::vector<Lease> leases = {lease(0, ExtendedSequenceNumber::shard_end()),
                               lease(3, seq("9"), ids({0}))};
  EXPECT_THAT(leases_to_delete(listing, leases, true), IsEmpty());
}

TEST(LeasesToDeleteTest, LeaseNewerThanTheListingIsNotTakenForTrimmed) {
  // Another worker, with a listing taken after 0 was split, created leases for 2 and 3; this
  // listing predates the split.
  std::vector<kinesis::Shard> listing = {shard(0), shard(1)};
  std::vector<Lease> leases = {lease(0, seq("5")), lease(1, seq("6")), lease(2, seq("7"), ids({0})),
                               lease(3, {}, ids({0}))};
  EXPECT_THAT(leases_to_delete(listing, leases, true), IsEmpty());
  // Ids compare as numbers, not as text.
  std::vector<kinesis::Shard> wide = {kinesis::Shard{"shardId-1000000000000", "", "", {}, {}}};
  std::vector<Lease> old_lease = {lease(999, seq("1"))};
  EXPECT_THAT(leases_to_delete(wide, old_lease, true), ElementsAre(sid(999)));
}

TEST(LeasesToDeleteTest, VanishedShardWithoutChildrenIsDeleted) {
  std::vector<kinesis::Shard> listing = {shard(2)};
  std::vector<Lease> leases = {lease(2, seq("1")), lease(1, seq("3"))};
  EXPECT_THAT(leases_to_delete(listing, leases, true), ElementsAre(sid(1)));
}

TEST(LeasesToDeleteTest, ChildCleanedUpItselfNoLongerNeedsTheParent) {
  // 0 (trimmed) -> 4 (finished, lease cleaned up) -> 5 (started). 0's lease is left over.
  std::vector<kinesis::Shard> listing = {shard(4, 0, -1, true), shard(5, 4)};
  std::vector<Lease> leases = {lease(0, ExtendedSequenceNumber::shard_end(), {}, ids({4})),
                               lease(5, seq("1"), ids({4}))};
  EXPECT_THAT(leases_to_delete(listing, leases, true), ElementsAre(sid(0)));
}

TEST(LeasesToDeleteTest, OpenAndUnfinishedLeasesAreKept) {
  std::vector<Lease> leases = {
      lease(0, seq("1")),     lease(1, seq("2")),           lease(2),
      lease(3, {}, ids({0})), lease(4, seq("3"), ids({0})), lease(5, {}, ids({1, 4}))};
  EXPECT_THAT(leases_to_delete(lineage_listing(), leases, true), IsEmpty());
}

// ---------------------------------------------------------------------------------------
// child_shard_id_updates

TEST(ChildShardIdUpdatesTest, SetsMissingChildrenAndKeepsKnownOnes) {
  std::vector<Lease> leases = {lease(0, seq("1")),                      // needs 3, 4
                               lease(1, seq("2"), {}, ids({5})),        // complete
                               lease(4, seq("3"), ids({0}), ids({9})),  // 9 learnt elsewhere
                               lease(2, seq("4"))};                     // open: none
  auto updates = child_shard_id_updates(lineage_listing(), leases);
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0], (ChildIdsUpdate{sid(0), ids({3, 4})}));
  EXPECT_EQ(updates[1], (ChildIdsUpdate{sid(4), ids({5, 9})}));
}

}  // namespace
}  // namespace kcl::shardsync
