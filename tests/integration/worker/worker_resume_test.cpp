// Worker against kinesalite + dynalite: where reading starts and resumes. A restarted worker
// resumes after the checkpoint and redelivers nothing at or below it; a worker that loses its
// lease in the middle of a batch cannot checkpoint (kLeaseLost, the table keeps the previous
// checkpoint) and the next owner resumes from that one; AT_TIMESTAMP skips what came before;
// KPL aggregates are deaggregated (resuming inside one), corrupt ones delivered as they came.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "support/kpl_builder.h"
#include "support/worker_test_support.h"

namespace kcl::worker_test {
namespace {

class WorkerResumeTest : public WorkerTest {};

TEST_F(WorkerResumeTest, RestartResumesAfterTheCheckpointAndRedeliversNothingAtOrBelowIt) {
  create_stream(1);
  const std::string shard = shards().at(0).shard_id;
  const auto data = names("r", 0, 30);
  const auto seqs = put(data);
  ASSERT_EQ(seqs.size(), 30u);

  // Worker A checkpoints at r14 only (in the middle of a batch: 7 records per call), and
  // not at shutdown.
  auto script_a = std::make_shared<Script>();
  script_a->checkpoint_on_shutdown = false;
  script_a->on_records = [](const std::string&, std::span<const Record> records, Checkpointer& cp,
                            int) {
    for (const Record& r : records) {
      if (r.data() == "r14") {
        Status s = cp.checkpoint(r);
        ASSERT_TRUE(s.ok()) << s;
      }
    }
  };
  WorkerConfig ca = config("A");
  ca.retrieval.max_records_per_call = 7;
  {
    Worker a(ca, factory("A", script_a));
    ASSERT_TRUE(a.start().ok());
    ASSERT_TRUE(wait_delivered("r29", "A"));
    ASSERT_TRUE(stop(a).ok());
  }
  auto l = lease(shard);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->checkpoint, ExtendedSequenceNumber(seqs[14]));
  EXPECT_FALSE(l->lease_owner.has_value()) << "A handed the lease back";
  EXPECT_EQ(EventLog::data_of(EventLog::records(log_->events(), "A")), data);

  WorkerConfig cb = config("B");
  cb.retrieval.max_records_per_call = 7;
  Worker b(cb, factory("B"));
  ASSERT_TRUE(b.start().ok());
  ASSERT_TRUE(wait_delivered("r29", "B"));
  ASSERT_TRUE(stop(b).ok());

  const auto ev = log_->events();
  EXPECT_EQ(EventLog::data_of(EventLog::records(ev, "B")), names("r", 15, 15));
  const std::size_t init = EventLog::first(
      ev, [](const Event& e) { return e.kind == EventKind::kInitialize && e.worker == "B"; });
  ASSERT_NE(init, std::string::npos);
  EXPECT_EQ(ev[init].position, ExtendedSequenceNumber(seqs[14]));
  l = lease(shard);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->checkpoint, ExtendedSequenceNumber(seqs[29]));
}

// A latch the processor waits on inside process_records.
struct Latch {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false;
  bool released = false;
  std::optional<Status> checkpoint_result;

  void enter_and_wait() {
    std::unique_lock<std::mutex> lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return released; });
  }
  bool wait_entered(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return entered; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
    cv.notify_all();
  }
  void set_result(Status s) {
    std::lock_guard<std::mutex> lock(mu);
    checkpoint_result = std::move(s);
    cv.notify_all();
  }
  std::optional<Status> wait_result(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, timeout, [&] { return checkpoint_result.has_value(); });
    return checkpoint_result;
  }
};

TEST_F(WorkerResumeTest, LeaseLostInTheMiddleOfABatchCannotCheckpointAndTheNextOwnerResumes) {
  create_stream(1);
  const std::string shard = shards().at(0).shard_id;
  const auto first = put(names("r", 0, 5));
  ASSERT_EQ(first.size(), 5u);

  auto latch = std::make_shared<Latch>();

  auto script = std::make_shared<Script>();
  script->checkpoint_on_shutdown = false;
  script->on_records = [latch](const std::string&, std::span<const Record> records,
                               Checkpointer& cp, int) {
    const bool blocks = std::any_of(records.begin(), records.end(),
                                    [](const Record& r) { return r.data() == "r5"; });
    if (!blocks) {
      Status s = cp.checkpoint();
      ASSERT_TRUE(s.ok()) << s;
      return;
    }
    latch->enter_and_wait();
    latch->set_result(cp.checkpoint());
  };
  // A long failover time for A: it must learn of the loss from its fenced checkpoint, not
  // from its renewals, and must not take the lease back from the (silent) thief.
  WorkerConfig ca = config("A");
  ca.leases.failover_time = 20s;
  Worker a(ca, factory("A", script));
  // Declared after the worker, so destroyed before it: releases the latch however the test
  // ends, and the worker's thread is never left blocked while the worker stops.
  struct ReleaseOnExit {
    std::shared_ptr<Latch> latch;
    ~ReleaseOnExit() { latch->release(); }
  } release_on_exit{latch};
  ASSERT_TRUE(a.start().ok());
  ASSERT_TRUE(eventually(
      [&] {
        auto l = lease(shard);
        return l && l->checkpoint == ExtendedSequenceNumber(first[4]);
      },
      30s));

  const auto second = put(names("r", 5, 5));
  ASSERT_EQ(second.size(), 5u);
  ASSERT_TRUE(latch->wait_entered(30s));

  // Another owner takes the lease while A is inside process_records.
  std::optional<Lease> taken;
  ASSERT_TRUE(eventually(
      [&] {
        auto seen = lease(shard);
        if (!seen) return false;
        auto t = store().take_lease(*seen, "thief");
        if (t.ok()) taken = *t;
        return t.ok();
      },
      10s));
  ASSERT_EQ(taken->lease_owner, std::optional<std::string>("thief"));

  latch->release();
  auto result = latch->wait_result(30s);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->code(), StatusCode::kLeaseLost) << *result;
  ASSERT_TRUE(log_->wait_until(
      [](const std::vector<Event>& ev) {
        return EventLog::count(ev, EventKind::kLeaseLost, "", "A") == 1;
      },
      30s));
  auto l = lease(shard);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->lease_owner, std::optional<std::string>("thief"));
  EXPECT_EQ(l->checkpoint, ExtendedSequenceNumber(first[4])) << "A's checkpoint was written";
  EXPECT_EQ(l->lease_counter, taken->lease_counter);

  // A stops; the thief hands the lease back; B resumes from the checkpoint at r4.
  ASSERT_TRUE(stop(a).ok());
  EXPECT_EQ(EventLog::count(log_->events(), EventKind::kShutdownRequested, "", "A"), 0u);
  l = lease(shard);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->lease_owner, std::optional<std::string>("thief")) << "A released a lease it lost";
  auto evicted = store().evict_lease(*l);
  ASSERT_TRUE(evicted.ok()) << evicted.status();

  Worker b(config("B"), factory("B"));
  ASSERT_TRUE(b.start().ok());
  ASSERT_TRUE(wait_delivered("r9", "B"));
  ASSERT_TRUE(stop(b).ok());
  const auto ev = log_->events();
  EXPECT_EQ(EventLog::data_of(EventLog::records(ev, "B")), names("r", 5, 5));
  const std::size_t init = EventLog::first(
      ev, [](const Event& e) { return e.kind == EventKind::kInitialize && e.worker == "B"; });
  ASSERT_NE(init, std::string::npos);
  EXPECT_EQ(ev[init].position, ExtendedSequenceNumber(first[4]));
}

TEST_F(WorkerResumeTest, AtTimestampSkipsRecordsWrittenBefore) {
  create_stream(1);
  ASSERT_EQ(put(names("early", 0, 10)).size(), 10u);
  // T strictly after the early records' arrival and strictly before the late ones'.
  wall_clock_past(std::chrono::system_clock::now() + 5ms);
  const auto t = std::chrono::system_clock::now();
  wall_clock_past(t + 5ms);
  const auto late = names("late", 0, 10);
  ASSERT_EQ(put(late).size(), 10u);

  WorkerConfig c = config("A");
  c.initial_position = InitialPosition::at_timestamp(t);
  Worker w(c, factory("A"));
  ASSERT_TRUE(w.start().ok());
  ASSERT_TRUE(wait_delivered("late9"));
  // Records written after start are delivered as well.
  ASSERT_EQ(put({"later"}).size(), 1u);
  ASSERT_TRUE(wait_delivered("later"));
  ASSERT_TRUE(stop(w).ok());

  const auto ev = log_->events();
  auto expected = late;
  expected.push_back("later");
  EXPECT_EQ(EventLog::data_of(EventLog::records(ev)), expected);
  const std::size_t init =
      EventLog::first(ev, [](const Event& e) { return e.kind == EventKind::kInitialize; });
  ASSERT_NE(init, std::string::npos);
  EXPECT_EQ(ev[init].position, ExtendedSequenceNumber::at_timestamp());
}

TEST_F(WorkerResumeTest, AggregatedRecordsAreDeaggregatedResumedInsideAndCorruptOnesPassed) {
  create_stream(1);
  const std::string shard = shards().at(0).shard_id;
  std::vector<kcl::testing::SubRecord> subs;
  for (int i = 0; i < 5; ++i) {
    subs.push_back({"sub-pk-" + std::to_string(i % 2), std::nullopt, "a" + std::to_string(i), {}});
  }
  const std::string aggregate = kcl::testing::build_aggregate(subs);
  const std::string corrupt =
      kcl::testing::with_bad_md5(kcl::testing::build_aggregate({{"x", std::nullopt, "c0", {}},
                                                                {"y", std::nullopt, "c1", {}},
                                                                {"x", std::nullopt, "c2", {}}}));
  const auto seqs = put_entries({{"p0", "pk-p0", ""},
                                 {aggregate, "outer-pk", ""},
                                 {"p1", "pk-p1", ""},
                                 {corrupt, "outer-pk2", ""},
                                 {"p2", "pk-p2", ""}});
  ASSERT_EQ(seqs.size(), 5u);

  // A checkpoints at sub-record 2 of the aggregate and nowhere else.
  auto script_a = std::make_shared<Script>();
  script_a->checkpoint_on_shutdown = false;
  script_a->on_records = [](const std::string&, std::span<const Record> records, Checkpointer& cp,
                            int) {
    for (const Record& r : records) {
      if (r.data() == "a2") {
        Status s = cp.checkpoint(r);
        ASSERT_TRUE(s.ok()) << s;
      }
    }
  };
  {
    Worker a(config("A"), factory("A", script_a));
    ASSERT_TRUE(a.start().ok());
    ASSERT_TRUE(wait_delivered("p2", "A"));
    EXPECT_TRUE(eventually([&] { return a.stats().corrupt_aggregates == 1; }, 10s))
        << a.stats().corrupt_aggregates;
    EXPECT_TRUE(eventually([&] { return a.stats().records_delivered == 9; }, 10s))
        << a.stats().records_delivered;
    ASSERT_TRUE(stop(a).ok());
  }
  const auto got_a = EventLog::records(log_->events(), "A");
  ASSERT_EQ(EventLog::data_of(got_a),
            (std::vector<std::string>{"p0", "a0", "a1", "a2", "a3", "a4", "p1", corrupt, "p2"}));
  for (std::size_t i = 1; i <= 5; ++i) {
    EXPECT_TRUE(got_a[i].aggregated);
    EXPECT_EQ(got_a[i].sequence_number, seqs[1]);
    EXPECT_EQ(got_a[i].sub_sequence_number, i - 1);
    EXPECT_EQ(got_a[i].partition_key, "sub-pk-" + std::to_string((i - 1) % 2));
  }
  EXPECT_FALSE(got_a[0].aggregated);
  EXPECT_FALSE(got_a[7].aggregated) << "a corrupt aggregate is delivered as it came";
  EXPECT_EQ(got_a[7].sequence_number, seqs[3]);
  EXPECT_EQ(got_a[7].sub_sequence_number, 0u);
  EXPECT_EQ(got_a[7].partition_key, "outer-pk2");

  auto l = lease(shard);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->checkpoint, ExtendedSequenceNumber(seqs[1], 2));

  Worker b(config("B"), factory("B"));
  ASSERT_TRUE(b.start().ok());
  ASSERT_TRUE(wait_delivered("p2", "B"));
  ASSERT_TRUE(stop(b).ok());
  const auto ev = log_->events();
  const auto got_b = EventLog::records(ev, "B");
  EXPECT_EQ(EventLog::data_of(got_b), (std::vector<std::string>{"a3", "a4", "p1", corrupt, "p2"}));
  ASSERT_GE(got_b.size(), 2u);
  EXPECT_EQ(got_b[0].sub_sequence_number, 3u);
  EXPECT_EQ(got_b[1].sub_sequence_number, 4u);
  const std::size_t init = EventLog::first(
      ev, [](const Event& e) { return e.kind == EventKind::kInitialize && e.worker == "B"; });
  ASSERT_NE(init, std::string::npos);
  EXPECT_EQ(ev[init].position, ExtendedSequenceNumber(seqs[1], 2));
  l = lease(shard);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->checkpoint, ExtendedSequenceNumber(seqs[4]));
}

}  // namespace
}  // namespace kcl::worker_test
