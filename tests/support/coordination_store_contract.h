// The CoordinationStore contract, as one sequence of calls with the results every
// implementation must give. Run on the in-memory store (unit tests) and on
// DynamoDbCoordinationStore against dynalite (integration tests).
#pragma once

#include <gtest/gtest.h>

#include "coordination/coordination_store.h"

namespace kcl::coordination::testing {

// `store` must be an empty, ready table.
inline void check_coordination_store_contract(CoordinationStore& store) {
  // Nothing yet.
  auto empty = store.read_all(Consistency::kStrong);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_FALSE(empty->leader);
  EXPECT_TRUE(empty->workers.empty());

  // Register, heartbeat (conditional on the incarnation only: the value only ever goes up),
  // report.
  WorkerEntry a;
  a.worker_id = "worker-a";
  a.incarnation = "inc-1";
  a.status_url = "http://127.0.0.1:9400";
  auto registered = store.register_worker(a);
  ASSERT_TRUE(registered.ok()) << registered.status();
  EXPECT_EQ(registered->heartbeat, 0);
  EXPECT_EQ(registered->status_url, a.status_url);
  EXPECT_EQ(store.register_worker(a).status().code(), StatusCode::kConditionFailed)
      << "a registration sent again after its answer was lost leaves the entry alone";
  WorkerEntry report;
  report.lease_count = 3;
  report.draining = false;
  report.lease_kbps = {{"shardId-000000000001", 12.5}, {"shardId-000000000002", 0.0}};
  auto beat = store.heartbeat(*registered, report);
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_EQ(beat->heartbeat, 1);
  EXPECT_EQ(beat->lease_count, 3);
  EXPECT_EQ(beat->lease_kbps, report.lease_kbps);
  // A heartbeat whose answer was lost moved the value; the next one, sent with the value the
  // worker last saw, still lands and moves it on.
  beat = store.heartbeat(*registered, report);
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_EQ(beat->heartbeat, 2);
  WorkerEntry other_incarnation = *beat;
  other_incarnation.incarnation = "inc-0";
  EXPECT_EQ(store.heartbeat(other_incarnation, report).status().code(),
            StatusCode::kConditionFailed);

  // The entry as read: the status endpoint written at registration stays through heartbeats.
  auto own = store.read_all(Consistency::kStrong);
  ASSERT_TRUE(own.ok()) << own.status();
  ASSERT_EQ(own->workers.size(), 1u);
  EXPECT_EQ(own->workers[0].heartbeat, 2);
  EXPECT_EQ(own->workers[0].status_url, "http://127.0.0.1:9400")
      << "the status endpoint written at registration stays through heartbeats";
  report.draining = true;
  auto beat2 = store.heartbeat(own->workers[0], report);
  ASSERT_TRUE(beat2.ok()) << beat2.status();
  EXPECT_TRUE(beat2->draining);
  EXPECT_EQ(beat2->heartbeat, 3);

  // The lock: taken when absent; then only on the value seen.
  auto no_lock = store.read_leader(Consistency::kStrong);
  ASSERT_TRUE(no_lock.ok()) << no_lock.status();
  EXPECT_FALSE(no_lock->has_value());
  auto led = store.acquire_leadership(std::nullopt, "worker-a", "inc-1");
  ASSERT_TRUE(led.ok()) << led.status();
  auto lock_read = store.read_leader(Consistency::kStrong);
  ASSERT_TRUE(lock_read.ok() && lock_read->has_value()) << lock_read.status();
  EXPECT_EQ(**lock_read, *led) << "read_leader gives the lock as written";
  EXPECT_EQ(led->owner, std::optional<std::string>("worker-a"));
  EXPECT_EQ(led->owner_incarnation, "inc-1");
  EXPECT_EQ(store.acquire_leadership(std::nullopt, "worker-b", "x").status().code(),
            StatusCode::kConditionFailed);
  auto renewed = store.renew_leadership(*led);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(renewed->counter, led->counter + 1);
  // A renewal whose answer was lost costs nothing: the holder's next renewal, sent with the
  // counter it last saw, lands (conditional on the owner and incarnation only).
  renewed = store.renew_leadership(*led);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(renewed->counter, led->counter + 2);
  EXPECT_EQ(store.acquire_leadership(*led, "worker-b", "x").status().code(),
            StatusCode::kConditionFailed)
      << "a lock seen before a renewal cannot be taken";
  // leasesVersion moves without disturbing the holder's conditions.
  ASSERT_TRUE(store.note_leases_changed().ok());
  auto all = store.read_all(Consistency::kStrong);
  ASSERT_TRUE(all.ok() && all->leader);
  EXPECT_EQ(all->leader->leases_version, 1);
  auto renewed2 = store.renew_leadership(*renewed);
  ASSERT_TRUE(renewed2.ok()) << renewed2.status();
  // A call for attention is a renewal that also moves attention, which every reader sees.
  EXPECT_EQ(renewed2->attention, 0);
  renewed2 = store.call_attention(*renewed2);
  ASSERT_TRUE(renewed2.ok()) << renewed2.status();
  EXPECT_EQ(renewed2->attention, 1);
  EXPECT_EQ(renewed2->counter, renewed->counter + 2);
  lock_read = store.read_leader(Consistency::kStrong);
  ASSERT_TRUE(lock_read.ok() && lock_read->has_value()) << lock_read.status();
  EXPECT_EQ(**lock_read, *renewed2);
  LeaderEntry other_holder = *renewed2;
  other_holder.owner_incarnation = "inc-0";
  EXPECT_EQ(store.call_attention(other_holder).status().code(), StatusCode::kConditionFailed)
      << "only the holder calls attention";
  // Taken over on what was seen (the lock lapsed), by another worker.
  auto taken = store.acquire_leadership(*all->leader, "worker-b", "inc-b");
  EXPECT_EQ(taken.status().code(), StatusCode::kConditionFailed) << "the holder renewed since";
  all = store.read_all(Consistency::kStrong);
  ASSERT_TRUE(all.ok() && all->leader);
  taken = store.acquire_leadership(*all->leader, "worker-b", "inc-b");
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(store.renew_leadership(*renewed2).status().code(), StatusCode::kConditionFailed)
      << "the old holder learns it lost the lock";
  ASSERT_TRUE(store.release_leadership(*taken).ok());
  all = store.read_all(Consistency::kStrong);
  ASSERT_TRUE(all.ok() && all->leader);
  EXPECT_FALSE(all->leader->owner) << "released: nobody leads";
  EXPECT_EQ(all->leader->leases_version, 1);

  // Fencing: conditional on the value seen; afterwards the incarnation can never renew.
  EXPECT_EQ(store.fence_worker(*registered).code(), StatusCode::kConditionFailed)
      << "it renewed since that value";
  ASSERT_TRUE(store.fence_worker(*beat2).ok());
  EXPECT_EQ(store.heartbeat(*beat2, report).status().code(), StatusCode::kConditionFailed);
  own = store.read_all(Consistency::kStrong);
  ASSERT_TRUE(own.ok());
  EXPECT_TRUE(own->workers.empty());

  // A new incarnation replaces whatever was there; deregister removes only its own entry.
  WorkerEntry a2 = a;
  a2.incarnation = "inc-2";
  ASSERT_TRUE(store.register_worker(a2).ok());
  EXPECT_EQ(store.deregister_worker(a).code(), StatusCode::kConditionFailed);
  ASSERT_TRUE(store.deregister_worker(a2).ok());
  all = store.read_all(Consistency::kStrong);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->workers.empty());

  // A worker stopping (draining) that registers anew (fenced during its stop) is still
  // draining: the leader assigns it nothing.
  WorkerEntry a3 = a;
  a3.incarnation = "inc-3";
  a3.draining = true;
  auto stopping = store.register_worker(a3);
  ASSERT_TRUE(stopping.ok()) << stopping.status();
  EXPECT_TRUE(stopping->draining);
  all = store.read_all(Consistency::kStrong);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->workers.size(), 1u);
  EXPECT_TRUE(all->workers[0].draining) << "registered anew as a new, empty member";
  ASSERT_TRUE(store.deregister_worker(a3).ok());
}

}  // namespace kcl::coordination::testing
