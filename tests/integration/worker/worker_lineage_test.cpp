// Worker against kinesalite + dynalite: resharding. After SplitShard and MergeShards every
// record is delivered exactly once; a child's records come only after each parent's
// shard_ended and its SHARD_END checkpoint; children start at TRIM_HORIZON; a processor that
// does not checkpoint in shard_ended holds the children back (the worker keeps asking, never
// skips) until it does.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "support/worker_test_support.h"

namespace kcl::worker_test {
namespace {

// Index of the successful SHARD_END checkpoint of `shard` in the log, or npos.
std::size_t shard_end_checkpoint(const std::vector<Event>& ev, const std::string& shard) {
  return EventLog::first(ev, [&](const Event& e) {
    return e.kind == EventKind::kCheckpoint && e.shard == shard && e.status.ok() &&
           e.position.is_shard_end();
  });
}

// Index of the shard_ended call in which `shard` was checkpointed at SHARD_END (the call
// logs before it checkpoints, so a child that starts right after the write lands is still
// ordered after it), or npos.
std::size_t shard_end_call(const std::vector<Event>& ev, const std::string& shard) {
  const std::size_t written = shard_end_checkpoint(ev, shard);
  if (written == std::string::npos) return written;
  for (std::size_t i = written; i-- > 0;) {
    if (ev[i].kind == EventKind::kShardEnded && ev[i].shard == shard) return i;
  }
  return std::string::npos;
}

// Index of the first initialize of any of `shards`, or npos.
std::size_t first_initialize(const std::vector<Event>& ev, const std::set<std::string>& shards) {
  return EventLog::first(ev, [&](const Event& e) {
    return (e.kind == EventKind::kInitialize || e.kind == EventKind::kProcessRecords) &&
           shards.count(e.shard) > 0;
  });
}

// Checks that every name of `expected` was delivered exactly once, and, per shard, in
// increasing sequence order.
void expect_exactly_once_in_order(const std::vector<Delivered>& got,
                                  const std::vector<std::string>& expected) {
  std::multiset<std::string> seen;
  for (const auto& r : got) seen.insert(r.data);
  for (const auto& d : expected) EXPECT_EQ(seen.count(d), 1u) << d;
  EXPECT_EQ(got.size(), expected.size());
  std::map<std::string, std::string> last_seq;
  for (const auto& r : got) {
    auto it = last_seq.find(r.shard);
    if (it != last_seq.end()) {
      EXPECT_LT(ExtendedSequenceNumber(it->second), ExtendedSequenceNumber(r.sequence_number))
          << "out of order on " << r.shard << " at " << r.data;
    }
    last_seq[r.shard] = r.sequence_number;
  }
}

class WorkerLineageTest : public WorkerTest {};

TEST_F(WorkerLineageTest, SplitDeliversEverythingAndChildrenStartAfterTheParentsShardEnd) {
  create_stream(1);
  const std::string parent = shards().at(0).shard_id;
  const auto before = names("r", 0, 10);
  ASSERT_EQ(put(before).size(), 10u);

  Worker worker(config("A"), factory("A"));
  ASSERT_TRUE(worker.start().ok());
  ASSERT_TRUE(wait_delivered("r9"));

  ASSERT_TRUE(kinesis_->split_shard(stream_, parent, kHalfHashKey).ok());
  ASSERT_TRUE(kinesis_->wait_for_active(stream_, 30s).ok());
  std::set<std::string> children;
  for (const auto& s : shards()) {
    if (s.parent_shard_id == parent) children.insert(s.shard_id);
  }
  ASSERT_EQ(children.size(), 2u);
  const auto after = names("r", 10, 30);
  ASSERT_EQ(put(after).size(), 30u);

  std::vector<std::string> all = before;
  all.insert(all.end(), after.begin(), after.end());
  ASSERT_TRUE(wait_all_delivered(all, 60s));
  ASSERT_TRUE(stop(worker).ok());

  const auto ev = log_->events();
  const auto got = EventLog::records(ev);
  expect_exactly_once_in_order(got, all);
  // The parent held exactly the records written before the split, in order.
  EXPECT_EQ(EventLog::data_of(EventLog::records(ev, "", parent)), before);
  // Both children got records (the partition keys spread over the hash key range).
  for (const auto& c : children) EXPECT_FALSE(EventLog::records(ev, "", c).empty()) << c;

  // shard_ended, then the SHARD_END checkpoint, then the children.
  const std::size_t ended = EventLog::first(
      ev, [&](const Event& e) { return e.kind == EventKind::kShardEnded && e.shard == parent; });
  const std::size_t checkpointed = shard_end_checkpoint(ev, parent);
  ASSERT_NE(ended, std::string::npos);
  ASSERT_NE(checkpointed, std::string::npos);
  EXPECT_LT(ended, checkpointed);
  EXPECT_LT(shard_end_call(ev, parent), first_initialize(ev, children));
  // Children start at TRIM_HORIZON.
  for (const Event& e : ev) {
    if (e.kind == EventKind::kInitialize && children.count(e.shard)) {
      EXPECT_EQ(e.position, ExtendedSequenceNumber::trim_horizon()) << e.shard;
    }
  }
  // The lease table: children name the parent; the parent is at SHARD_END or cleaned up.
  for (const auto& c : children) {
    auto l = lease(c);
    ASSERT_TRUE(l.has_value()) << c;
    EXPECT_EQ(l->parent_shard_ids, std::vector<std::string>{parent});
    EXPECT_FALSE(l->lease_owner.has_value()) << "graceful shutdown hands leases back";
  }
  if (auto p = lease(parent)) {
    EXPECT_TRUE(p->checkpoint.is_shard_end());
  }
}

// The scheduler does not poll its way through a split: a lease taken, a parent's consumer
// ending and its children's leases taken each wake it. With its interval at the 10 s maximum,
// the first records and then the children's arrive well inside one interval (a scheduler
// waiting for its interval would take at least 10 s for each of these steps).
TEST_F(WorkerLineageTest, ASplitIsFollowedAtOnceWhateverTheSchedulerInterval) {
  create_stream(1);
  const std::string parent = shards().at(0).shard_id;
  const auto before = names("s", 0, 5);
  ASSERT_EQ(put(before).size(), 5u);

  WorkerConfig c = config("A");
  c.processing.scheduler_interval = 10s;
  c.processing.shard_sync_interval = 3600s;  // only a shard's end makes the children's leases
  Worker worker(c, factory("A"));
  ASSERT_TRUE(worker.start().ok());
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_delivered("s4", {}, 8s)) << "the consumer waited for the scheduler interval";
  const auto first = std::chrono::steady_clock::now() - started;

  ASSERT_TRUE(kinesis_->split_shard(stream_, parent, kHalfHashKey).ok());
  ASSERT_TRUE(kinesis_->wait_for_active(stream_, 30s).ok());
  const auto after = names("s", 5, 20);
  ASSERT_EQ(put(after).size(), 20u);
  const auto split = std::chrono::steady_clock::now();
  EXPECT_TRUE(wait_all_delivered(after, 8s)) << "the children waited for the scheduler interval";
  const auto children = std::chrono::steady_clock::now() - split;
  std::printf(
      "first records after %lld ms; the children's %lld ms after the split\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(first).count()),
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(children).count()));
  ASSERT_TRUE(stop(worker).ok());
  std::vector<std::string> all = before;
  all.insert(all.end(), after.begin(), after.end());
  expect_exactly_once_in_order(EventLog::records(log_->events()), all);
}

TEST_F(WorkerLineageTest, MergeChildWaitsForBothParents) {
  create_stream(2);
  const auto listed = shards();
  ASSERT_EQ(listed.size(), 2u);
  const std::string p0 = listed[0].shard_id;
  const std::string p1 = listed[1].shard_id;
  const auto before = names("m", 0, 20);
  ASSERT_EQ(put(before).size(), 20u);

  // The second parent holds back its SHARD_END checkpoint twice, so the child must wait for
  // it well after the first parent finished.
  auto script = std::make_shared<Script>();
  script->hold_shard_end = [p1](const std::string& shard, int call) {
    return shard == p1 && call <= 2;
  };
  Worker worker(config("A"), factory("A", script));
  ASSERT_TRUE(worker.start().ok());
  ASSERT_TRUE(wait_all_delivered(before, 30s));

  ASSERT_TRUE(kinesis_->merge_shards(stream_, p0, p1).ok());
  ASSERT_TRUE(kinesis_->wait_for_active(stream_, 30s).ok());
  std::string child;
  for (const auto& s : shards()) {
    if (!s.adjacent_parent_shard_id.empty()) child = s.shard_id;
  }
  ASSERT_FALSE(child.empty());
  const auto after = names("m", 20, 20);
  ASSERT_EQ(put(after).size(), 20u);

  ASSERT_TRUE(wait_all_delivered(after, 60s));
  ASSERT_TRUE(stop(worker).ok());

  const auto ev = log_->events();
  std::vector<std::string> all = before;
  all.insert(all.end(), after.begin(), after.end());
  expect_exactly_once_in_order(EventLog::records(ev), all);
  EXPECT_EQ(EventLog::data_of(EventLog::records(ev, "", child)), after);

  const std::size_t end0 = shard_end_checkpoint(ev, p0);
  const std::size_t end1 = shard_end_checkpoint(ev, p1);
  ASSERT_NE(end0, std::string::npos);
  ASSERT_NE(end1, std::string::npos);
  EXPECT_EQ(EventLog::count(ev, EventKind::kShardEnded, p1), 3u);
  const std::size_t child_start = first_initialize(ev, {child});
  ASSERT_NE(child_start, std::string::npos);
  EXPECT_LT(shard_end_call(ev, p0), child_start);
  EXPECT_LT(shard_end_call(ev, p1), child_start);
  for (const Event& e : ev) {
    if (e.kind == EventKind::kInitialize && e.shard == child) {
      EXPECT_EQ(e.position, ExtendedSequenceNumber::trim_horizon());
    }
  }
  auto l = lease(child);
  ASSERT_TRUE(l.has_value());
  std::vector<std::string> parents{p0, p1};
  std::sort(parents.begin(), parents.end());
  EXPECT_EQ(l->parent_shard_ids, parents);
}

TEST_F(WorkerLineageTest, ShardEndedWithoutCheckpointHoldsChildrenBackUntilItCheckpoints) {
  create_stream(1);
  const std::string parent = shards().at(0).shard_id;
  ASSERT_EQ(put(names("s", 0, 5)).size(), 5u);

  std::atomic<bool> allow{false};
  auto script = std::make_shared<Script>();
  script->hold_shard_end = [&allow](const std::string&, int) { return !allow.load(); };
  Worker worker(config("A"), factory("A", script));
  ASSERT_TRUE(worker.start().ok());
  ASSERT_TRUE(wait_delivered("s4"));
  ASSERT_TRUE(kinesis_->split_shard(stream_, parent, kHalfHashKey).ok());
  ASSERT_TRUE(kinesis_->wait_for_active(stream_, 30s).ok());
  std::set<std::string> children;
  for (const auto& s : shards()) {
    if (s.parent_shard_id == parent) children.insert(s.shard_id);
  }
  ASSERT_EQ(children.size(), 2u);
  const auto after = names("s", 5, 10);
  ASSERT_EQ(put(after).size(), 10u);

  // The worker keeps asking (with backoff) and nothing of the children is started meanwhile,
  // although their leases exist and this worker holds them.
  ASSERT_TRUE(log_->wait_until(
      [&](const std::vector<Event>& ev) {
        return EventLog::count(ev, EventKind::kShardEnded, parent) >= 4;
      },
      30s));
  ASSERT_TRUE(eventually(
      [&] {
        int held = 0;
        for (const auto& l : leases()) {
          if (children.count(l.lease_key) && l.lease_owner == std::optional<std::string>("A")) {
            ++held;
          }
        }
        return held == 2;
      },
      30s));
  // A few more refusals while the children's consumers wait on their parent.
  const std::size_t refusals = EventLog::count(log_->events(), EventKind::kShardEnded, parent);
  ASSERT_TRUE(log_->wait_until(
      [&](const std::vector<Event>& ev) {
        return EventLog::count(ev, EventKind::kShardEnded, parent) >= refusals + 2;
      },
      30s));
  {
    const auto ev = log_->events();
    EXPECT_EQ(first_initialize(ev, children), std::string::npos)
        << "a child started before its parent checkpointed SHARD_END";
    EXPECT_EQ(shard_end_checkpoint(ev, parent), std::string::npos);
    auto p = lease(parent);
    ASSERT_TRUE(p.has_value());
    EXPECT_FALSE(p->checkpoint.is_shard_end());
  }

  allow.store(true);
  ASSERT_TRUE(wait_all_delivered(after, 60s));
  ASSERT_TRUE(stop(worker).ok());

  const auto ev = log_->events();
  const std::size_t checkpointed = shard_end_checkpoint(ev, parent);
  ASSERT_NE(checkpointed, std::string::npos);
  EXPECT_LT(shard_end_call(ev, parent), first_initialize(ev, children));
  // Once checkpointed, shard_ended is not called again.
  std::size_t calls_after = 0;
  for (std::size_t i = checkpointed; i < ev.size(); ++i) {
    if (ev[i].kind == EventKind::kShardEnded && ev[i].shard == parent) ++calls_after;
  }
  EXPECT_EQ(calls_after, 0u);
  std::vector<std::string> all = names("s", 0, 15);
  expect_exactly_once_in_order(EventLog::records(ev), all);
}

}  // namespace
}  // namespace kcl::worker_test
