// The checkpointer: validation, fencing, SHARD_END, two-phase; on the in-memory store with a
// fake clock.
#include "checkpoint/shard_checkpointer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "leases/in_memory_lease_store.h"
#include "support/lease_test_util.h"

namespace kcl::checkpoint {
namespace {

using namespace std::chrono_literals;
using ESN = ExtendedSequenceNumber;
using leases::InMemoryLeaseStore;
using leases::testing::shard;
using leases::testing::TakesWorker;
using leases::testing::test_config;

class CheckpointerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Lease l;
    l.lease_key = shard(0);
    l.checkpoint = ESN("100");
    l.owner_switches_since_checkpoint = 3;
    store_.put(l);
    a_ = std::make_unique<TakesWorker>(store_, test_config("A"), clock_,
                                       NoopMetricsSink::instance(), 1);
    ASSERT_EQ(a_->run_take_pass().taken.size(), 1u);
    auto cp = ShardCheckpointer::create(a_->held(), shard(0));
    ASSERT_TRUE(cp.ok()) << cp.status();
    cp_ = std::move(cp).value();
  }
  Lease table() const { return *store_.peek(shard(0)); }

  ManualClock clock_;
  InMemoryLeaseStore store_;
  std::unique_ptr<TakesWorker> a_;
  std::unique_ptr<ShardCheckpointer> cp_;
};

TEST_F(CheckpointerTest, StartsFromTheLeaseCheckpoint) {
  EXPECT_EQ(cp_->last_checkpoint(), ESN("100"));
  EXPECT_EQ(cp_->largest_permitted(), ESN("100"));
  EXPECT_TRUE(cp_->checkpoint().ok()) << "nothing delivered: nothing to write";
  EXPECT_EQ(table().lease_counter, 1);
}

TEST_F(CheckpointerTest, CheckpointsAtTheLastRecordDeliveredAndBumpsTheCounter) {
  cp_->records_delivered(ESN("150"));
  cp_->records_delivered(ESN("120"));  // older: ignored
  ASSERT_TRUE(cp_->checkpoint().ok());
  Lease l = table();
  EXPECT_EQ(l.checkpoint, ESN("150"));
  EXPECT_EQ(l.owner_switches_since_checkpoint, 0) << "a checkpoint resets the switch count";
  EXPECT_EQ(l.lease_counter, 2);
  EXPECT_EQ(a_->held_lease(shard(0))->lease_counter, 2) << "the holder tracks the new counter";
  // A renewal afterwards uses the new counter.
  clock_.advance(3s);
  EXPECT_EQ(a_->run_renew_pass().renewed, 1);
  EXPECT_EQ(table().lease_counter, 3);
  // Same position again: nothing written.
  ASSERT_TRUE(cp_->checkpoint().ok());
  EXPECT_EQ(table().lease_counter, 3);
}

TEST_F(CheckpointerTest, ExplicitPositionWithSubSequence) {
  cp_->records_delivered(ESN("200", 4));
  ASSERT_TRUE(cp_->checkpoint("200", 2).ok());
  EXPECT_EQ(table().checkpoint, ESN("200", 2));
  EXPECT_EQ(table().checkpoint.sub_sequence_number(), 2);
  ASSERT_TRUE(cp_->checkpoint(ESN("200", 4)).ok());
  EXPECT_EQ(table().checkpoint, ESN("200", 4));
}

TEST_F(CheckpointerTest, NeverBackwardsNeverPastDelivered) {
  cp_->records_delivered(ESN("300"));
  ASSERT_TRUE(cp_->checkpoint("250").ok());
  const auto counter = table().lease_counter;
  Status back = cp_->checkpoint("240");
  EXPECT_EQ(back.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(back.message().find("before the last checkpoint 250"), std::string::npos) << back;
  Status ahead = cp_->checkpoint("301");
  EXPECT_EQ(ahead.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ahead.message().find("after the last record delivered"), std::string::npos) << ahead;
  EXPECT_EQ(table().lease_counter, counter) << "rejected checkpoints write nothing";
  EXPECT_TRUE(cp_->checkpoint("250", 1).ok()) << "250#1 lies between 250 and 300";
  EXPECT_EQ(table().lease_counter, counter + 1);
}

TEST_F(CheckpointerTest, RejectsNonNumbersAndStartSentinels) {
  cp_->records_delivered(ESN("300"));
  EXPECT_EQ(cp_->checkpoint("abc").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cp_->checkpoint(ESN::trim_horizon()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cp_->checkpoint(ESN::latest()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cp_->checkpoint(ESN::shard_end()).code(), StatusCode::kInvalidArgument)
      << "SHARD_END before the shard ended";
  EXPECT_EQ(table().checkpoint, ESN("100"));
}

TEST_F(CheckpointerTest, ShardEnd) {
  cp_->records_delivered(ESN("500"));
  cp_->shard_ended(ESN("500"));
  EXPECT_EQ(cp_->largest_permitted(), ESN::shard_end());
  ASSERT_TRUE(cp_->checkpoint().ok());
  EXPECT_EQ(table().checkpoint, ESN::shard_end());
  EXPECT_EQ(cp_->checkpoint("500").code(), StatusCode::kInvalidArgument) << "after SHARD_END";
}

TEST_F(CheckpointerTest, CheckpointAtTheShardsLastRecordIsShardEnd) {
  cp_->records_delivered(ESN("500"));
  cp_->shard_ended(ESN("500"));
  ASSERT_TRUE(cp_->checkpoint("500").ok());
  EXPECT_EQ(table().checkpoint, ESN::shard_end());
}

TEST_F(CheckpointerTest, APrepareAtTheShardsLastRecordAlreadyCheckpointedIsShardEnd) {
  // The last record was checkpointed while processing; at the shard's end the processor
  // prepares and commits that same record: SHARD_END, or the shard's end never counts as
  // processed (its children would wait for ever).
  cp_->records_delivered(ESN("500"));
  ASSERT_TRUE(cp_->checkpoint("500").ok());
  cp_->shard_ended(ESN("500"));
  auto prepared = cp_->prepare_checkpoint(ESN("500"));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_TRUE(prepared->written);
  EXPECT_EQ(prepared->position, ESN::shard_end());
  ASSERT_TRUE(cp_->commit(*prepared).ok());
  EXPECT_EQ(table().checkpoint, ESN::shard_end());
}

// Prepared while processing the final batch, at its last record, and committed in
// shard_ended(): the record has turned out to be the shard's last, so the commit writes
// SHARD_END (as the Java KCL's prepared checkpointer does). It wrote the record itself, and
// the shard's children waited for ever.
TEST_F(CheckpointerTest, APrepareAtTheLastRecordCommittedAfterTheShardEndedIsShardEnd) {
  cp_->records_delivered(ESN("500"));
  auto prepared = cp_->prepare_checkpoint(ESN("500"));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(prepared->position, ESN("500"));
  cp_->shard_ended(ESN("500"));
  ASSERT_TRUE(cp_->commit(*prepared).ok());
  EXPECT_EQ(table().checkpoint, ESN::shard_end());
}

// A new owner (a handover after the old one checkpointed the shard's last record, 100)
// resumes at the checkpoint, gets no record and reaches the end: the processor naming that
// checkpoint, as the Java KCL allows, writes SHARD_END (else the children wait for ever).
TEST_F(CheckpointerTest, ANewOwnerNamingTheCheckpointAtTheShardsEndWritesShardEnd) {
  cp_->shard_ended();
  ASSERT_TRUE(cp_->checkpoint("100").ok());
  EXPECT_EQ(table().checkpoint, ESN::shard_end());
}

TEST_F(CheckpointerTest, ANewOwnerPreparingTheCheckpointAtTheShardsEndCommitsShardEnd) {
  cp_->shard_ended();
  auto prepared = cp_->prepare_checkpoint(ESN("100"));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_TRUE(prepared->written);
  EXPECT_EQ(prepared->position, ESN::shard_end());
  ASSERT_TRUE(cp_->commit(*prepared).ok());
  EXPECT_EQ(table().checkpoint, ESN::shard_end());
}

TEST_F(CheckpointerTest, TwoPhasePrepareThenCommit) {
  cp_->records_delivered(ESN("700"));
  auto prepared = cp_->prepare_checkpoint(ESN("650"), std::string("app-state"));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_TRUE(prepared->written);
  Lease l = table();
  EXPECT_EQ(l.checkpoint, ESN("100")) << "prepare keeps the checkpoint";
  EXPECT_EQ(l.pending_checkpoint, ESN("650"));
  EXPECT_EQ(l.pending_checkpoint_state, "app-state");
  EXPECT_EQ(l.owner_switches_since_checkpoint, 3) << "a prepare is not a checkpoint";
  EXPECT_EQ(cp_->pending_checkpoint(), ESN("650"));

  ASSERT_TRUE(cp_->commit(*prepared).ok());
  l = table();
  EXPECT_EQ(l.checkpoint, ESN("650"));
  EXPECT_FALSE(l.pending_checkpoint);
  EXPECT_FALSE(l.pending_checkpoint_state);
  EXPECT_EQ(l.owner_switches_since_checkpoint, 0);
  EXPECT_FALSE(cp_->pending_checkpoint());
}

TEST_F(CheckpointerTest, PrepareValidatesLikeACheckpoint) {
  cp_->records_delivered(ESN("700"));
  EXPECT_EQ(cp_->prepare_checkpoint(ESN("701")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cp_->prepare_checkpoint(ESN("99")).status().code(), StatusCode::kInvalidArgument);
  auto same = cp_->prepare_checkpoint(ESN("100"));
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->written) << "at the current checkpoint: nothing to prepare";
  EXPECT_TRUE(cp_->commit(*same).ok());
  auto at_delivered = cp_->prepare_checkpoint();
  ASSERT_TRUE(at_delivered.ok());
  EXPECT_EQ(at_delivered->position, ESN("700"));
}

TEST_F(CheckpointerTest, CommitAfterALaterCheckpointIsRejected) {
  cp_->records_delivered(ESN("700"));
  auto prepared = cp_->prepare_checkpoint(ESN("600"));
  ASSERT_TRUE(prepared.ok());
  ASSERT_TRUE(cp_->checkpoint("650").ok());
  EXPECT_EQ(cp_->commit(*prepared).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(table().checkpoint, ESN("650"));
}

TEST_F(CheckpointerTest, LostLeaseGivesLeaseLostAndWritesNothing) {
  cp_->records_delivered(ESN("800"));
  // Another worker takes the lease (e.g. after judging it expired).
  ASSERT_TRUE(store_.take_lease(table(), "B").ok());
  const Lease before = table();
  Status s = cp_->checkpoint();
  EXPECT_EQ(s.code(), StatusCode::kLeaseLost);
  EXPECT_NE(s.message().find("taken by B"), std::string::npos) << s;
  EXPECT_EQ(table(), before);
  EXPECT_EQ(cp_->last_checkpoint(), ESN("100"));
  // Prepare too.
  EXPECT_EQ(cp_->prepare_checkpoint(ESN("800")).status().code(), StatusCode::kLeaseLost);
  EXPECT_EQ(table(), before);
  EXPECT_FALSE(a_->holds(shard(0)));
}

TEST_F(CheckpointerTest, CheckpointAfterRenewalDeadlineIsLeaseLost) {
  cp_->records_delivered(ESN("800"));
  clock_.advance(9s);
  EXPECT_EQ(cp_->checkpoint().code(), StatusCode::kLeaseLost);
  EXPECT_EQ(table().checkpoint, ESN("100"));
}

TEST_F(CheckpointerTest, TransientFailureCanBeRetried) {
  cp_->records_delivered(ESN("800"));
  store_.fail_next(1);
  EXPECT_EQ(cp_->checkpoint().code(), StatusCode::kUnavailable);
  EXPECT_EQ(cp_->last_checkpoint(), ESN("100"));
  EXPECT_TRUE(cp_->checkpoint().ok());
  EXPECT_EQ(table().checkpoint, ESN("800"));
}

TEST_F(CheckpointerTest, AppliedCheckpointWhoseAnswerWasLostIsNeverUndercut) {
  cp_->records_delivered(ESN("800"));
  // DynamoDB applies the checkpoint, but the answer is lost (a timeout).
  store_.fail_next(1, StatusCode::kUnavailable, /*after_apply=*/true);
  EXPECT_EQ(cp_->checkpoint().code(), StatusCode::kUnavailable);
  ASSERT_EQ(table().checkpoint, ESN("800"));
  // The processor falls back to an earlier position: it must not move the table backwards.
  Status back = cp_->checkpoint("500");
  EXPECT_EQ(back.code(), StatusCode::kInvalidArgument) << back;
  EXPECT_NE(back.message().find("before the last checkpoint 800"), std::string::npos) << back;
  EXPECT_EQ(table().checkpoint, ESN("800"));
  EXPECT_EQ(cp_->last_checkpoint(), ESN("800")) << "adopted from the table";
  // The checkpoint at 800 is already there: nothing more to write, and the lease is still
  // held with the stored counter (later writes are not mistaken for a loss).
  const std::int64_t counter = table().lease_counter;
  EXPECT_TRUE(cp_->checkpoint().ok());
  EXPECT_EQ(table().lease_counter, counter);
  EXPECT_EQ(a_->held_lease(shard(0))->lease_counter, counter);
  cp_->records_delivered(ESN("900"));
  EXPECT_TRUE(cp_->checkpoint().ok());
  EXPECT_EQ(table().checkpoint, ESN("900"));
}

TEST_F(CheckpointerTest, UnappliedFailedCheckpointDoesNotRaiseTheFloor) {
  cp_->records_delivered(ESN("800"));
  store_.fail_next(1, StatusCode::kUnavailable, /*after_apply=*/false);
  EXPECT_EQ(cp_->checkpoint().code(), StatusCode::kUnavailable);
  ASSERT_EQ(table().checkpoint, ESN("100"));
  // The read-back shows 100: an earlier position than the failed attempt is still fine.
  EXPECT_TRUE(cp_->checkpoint("500").ok());
  EXPECT_EQ(table().checkpoint, ESN("500"));
}

TEST_F(CheckpointerTest, UnknownOutcomeThenFailedReadBackWritesNothing) {
  cp_->records_delivered(ESN("800"));
  store_.fail_next(1, StatusCode::kUnavailable, /*after_apply=*/true);
  EXPECT_EQ(cp_->checkpoint().code(), StatusCode::kUnavailable);
  store_.fail_next(1);  // the read-back fails too
  Status s = cp_->checkpoint("500");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("outcome is unknown"), std::string::npos) << s;
  EXPECT_EQ(table().checkpoint, ESN("800"));
  // Once the table answers again, the floor is the stored 800.
  EXPECT_EQ(cp_->checkpoint("500").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(table().checkpoint, ESN("800"));
}

TEST_F(CheckpointerTest, UnknownOutcomeThenLeaseTakenIsLeaseLost) {
  cp_->records_delivered(ESN("800"));
  store_.fail_next(1, StatusCode::kUnavailable, /*after_apply=*/true);
  EXPECT_EQ(cp_->checkpoint().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(store_.take_lease(table(), "B").ok());
  const Lease before = table();
  Status s = cp_->checkpoint();
  EXPECT_EQ(s.code(), StatusCode::kLeaseLost) << s;
  EXPECT_NE(s.message().find("taken by B"), std::string::npos) << s;
  EXPECT_EQ(table(), before);
  EXPECT_FALSE(a_->holds(shard(0)));
}

TEST_F(CheckpointerTest, RewoundCheckpointerKeepsTheReadBackOfAnUnknownWrite) {
  cp_->records_delivered(ESN("800"));
  store_.fail_next(1, StatusCode::kUnavailable, /*after_apply=*/true);
  EXPECT_EQ(cp_->checkpoint().code(), StatusCode::kUnavailable);
  // The processor failed on the batch up to 800: records after 400 are delivered again.
  auto rewound = cp_->rewound(ESN("400"));
  EXPECT_EQ(rewound->largest_permitted(), ESN("400"));
  // Redelivered up to 600; a checkpoint there must not undercut the stored 800.
  rewound->records_delivered(ESN("600"));
  EXPECT_EQ(rewound->checkpoint("600").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(table().checkpoint, ESN("800"));
  EXPECT_EQ(rewound->last_checkpoint(), ESN("800"));
  EXPECT_TRUE(rewound->checkpoint().ok()) << "the table is already past what was delivered";
  EXPECT_EQ(table().checkpoint, ESN("800"));
}

TEST_F(CheckpointerTest, PreparedCheckpointWhoseAnswerWasLostIsAdopted) {
  cp_->records_delivered(ESN("700"));
  store_.fail_next(1, StatusCode::kUnavailable, /*after_apply=*/true);
  EXPECT_EQ(cp_->prepare_checkpoint(ESN("600")).status().code(), StatusCode::kUnavailable);
  ASSERT_EQ(table().pending_checkpoint, ESN("600"));
  // The next call reads the stored pending checkpoint back.
  auto again = cp_->prepare_checkpoint(ESN("650"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(table().pending_checkpoint, ESN("650"));
  EXPECT_EQ(table().checkpoint, ESN("100"));
  ASSERT_TRUE(cp_->commit(*again).ok());
  EXPECT_EQ(table().checkpoint, ESN("650"));
  EXPECT_FALSE(table().pending_checkpoint.has_value());
}

TEST_F(CheckpointerTest, CheckpointerOfAnEarlierTenureCannotWriteAfterTheLeaseCameBack) {
  cp_->records_delivered(ESN("300"));
  // B takes the lease, checkpoints further and hands it back; A notices the loss and takes
  // the lease again (a new tenure) while a processor call of the old tenure still runs.
  auto b = store_.take_lease(table(), "B");
  ASSERT_TRUE(b.ok()) << b.status();
  leases::CheckpointFields fields;
  fields.checkpoint = ESN("900");
  auto b2 = store_.update_checkpoint(*b, fields);
  ASSERT_TRUE(b2.ok()) << b2.status();
  ASSERT_TRUE(store_.evict_lease(*b2).ok());
  clock_.advance(3s);
  EXPECT_EQ(a_->run_renew_pass().lost.size(), 1u);
  ASSERT_EQ(a_->run_take_pass().taken.size(), 1u);
  ASSERT_TRUE(a_->holds(shard(0)));
  EXPECT_NE(a_->tenure_of(shard(0)), cp_->tenure());
  // The old tenure's late checkpoint at 300 must not undercut B's 900.
  Status late = cp_->checkpoint();
  EXPECT_EQ(late.code(), StatusCode::kLeaseLost) << late;
  EXPECT_NE(late.message().find("took it again"), std::string::npos) << late;
  EXPECT_EQ(table().checkpoint, ESN("900"));
  EXPECT_TRUE(a_->holds(shard(0))) << "the new tenure keeps the lease";
  // A checkpointer of the new tenure starts at 900 and may write.
  auto fresh = ShardCheckpointer::create(a_->held(), shard(0));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ((*fresh)->last_checkpoint(), ESN("900"));
  (*fresh)->records_delivered(ESN("950"));
  EXPECT_TRUE((*fresh)->checkpoint().ok());
  EXPECT_EQ(table().checkpoint, ESN("950"));
  // Asking for the old tenure explicitly is refused.
  EXPECT_EQ(ShardCheckpointer::create(a_->held(), shard(0), cp_->tenure()).status().code(),
            StatusCode::kLeaseLost);
}

TEST(CheckpointTenureTest, AWriteOfAnEarlierTenureDoesNotLandAfterTheLeaseCameBack) {
  // A checkpoint is in flight when its tenure ends and the lease comes back to this worker as
  // a new tenure (lost, then taken again: the counter moves by one). The write's condition
  // fails on that counter; retried, it would land in the new tenure.
  ManualClock clock;
  InMemoryLeaseStore inner;
  leases::testing::PartitionableStore store(inner);
  Lease l;
  l.lease_key = shard(0);
  l.checkpoint = ESN("100");
  inner.put(l);
  TakesWorker a(store, test_config("A"), clock, NoopMetricsSink::instance(), 1);
  ASSERT_EQ(a.run_take_pass().taken.size(), 1u);
  auto cp = ShardCheckpointer::create(a.held(), shard(0));
  ASSERT_TRUE(cp.ok()) << cp.status();
  (*cp)->records_delivered(ESN("300"));
  store.before_next_checkpoint([&] {
    a.held().lose_all(Status(StatusCode::kLeaseLost, "membership lapsed"));
    auto taken = inner.take_lease(*inner.peek(shard(0)), "A");
    ASSERT_TRUE(taken.ok()) << taken.status();
    a.held().gain(*taken, clock.now());
  });
  Status late = (*cp)->checkpoint();
  EXPECT_EQ(late.code(), StatusCode::kLeaseLost) << late;
  EXPECT_EQ(inner.peek(shard(0))->checkpoint, ESN("100")) << "nothing of the old tenure landed";
  EXPECT_TRUE(a.holds(shard(0))) << "the new tenure keeps the lease";
  EXPECT_NE(a.tenure_of(shard(0)), (*cp)->tenure());
}

TEST_F(CheckpointerTest, CheckpointRacingOwnRenewalsFromTwoThreads) {
  // Renewals and checkpoints of one worker interleave freely: none of them may be mistaken
  // for a lost lease.
  std::atomic<bool> stop{false};
  std::thread renewer([&] {
    while (!stop.load()) (void)a_->run_renew_pass();
  });
  for (int i = 101; i <= 400; ++i) {
    cp_->records_delivered(ESN(std::to_string(i)));
    ASSERT_TRUE(cp_->checkpoint().ok()) << i;
  }
  stop = true;
  renewer.join();
  EXPECT_EQ(table().checkpoint, ESN("400"));
  EXPECT_TRUE(a_->holds(shard(0)));
  EXPECT_EQ(a_->held_lease(shard(0))->lease_counter, table().lease_counter);
}

TEST(CheckpointerCreateTest, NotHeldIsLeaseLost) {
  ManualClock clock;
  InMemoryLeaseStore store;
  TakesWorker a(store, test_config("A"), clock, NoopMetricsSink::instance(), 1);
  EXPECT_EQ(ShardCheckpointer::create(a.held(), "shardId-x").status().code(),
            StatusCode::kLeaseLost);
}

}  // namespace
}  // namespace kcl::checkpoint
