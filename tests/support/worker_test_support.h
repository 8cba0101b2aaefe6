// Shared pieces of the worker integration tests (kinesalite + dynalite through the fixture):
//
//  - EventLog: a thread-safe, ordered log of every processor callback of every worker of a
//    test (initialize, process_records with the records delivered, checkpoints written and
//    their results, shard_ended, shutdown_requested, lease_lost). Tests wait on it with a
//    deadline (a condition variable, no fixed sleeps) and then check orders and contents.
//  - Script: what a recording processor does besides recording (checkpoint every batch or
//    not, a hook run inside process_records that may checkpoint, throw or block, holding
//    back the SHARD_END checkpoint).
//  - WorkerTest: a fixture with a stream, an application name, a Kinesis client for the test
//    itself (put, split, merge, delete), a lease store on the worker's table for inspecting
//    and tampering with leases, and a WorkerConfig with short times.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "aws/aws_json_client.h"
#include "aws/credentials.h"
#include "aws/http_transport.h"
#include "dynamodb/dynamodb_client.h"
#include "kcl/worker.h"
#include "kinesis/kinesis_client.h"
#include "leases/dynamodb_lease_store.h"
#include "support/aws_clients.h"
#include "support/emulators.h"
#include "support/eventually.h"

namespace kcl {
// Readable positions in test failure messages.
inline void PrintTo(const ExtendedSequenceNumber& position, std::ostream* os) {
  *os << position.to_string();
}
}  // namespace kcl

namespace kcl::worker_test {

using namespace std::chrono_literals;

// 2^127: the middle of the hash key range of a one-shard stream ([0, 2^128 - 1]).
inline constexpr const char* kHalfHashKey = "170141183460469231731687303715884105728";

struct Delivered {
  std::string shard;
  std::string sequence_number;
  std::uint64_t sub_sequence_number = 0;
  bool aggregated = false;
  std::string partition_key;
  std::string data;
  std::string stream;  // InitializationInput::stream_name of the shard's processor

  ExtendedSequenceNumber position() const {
    return ExtendedSequenceNumber(sequence_number, static_cast<std::int64_t>(sub_sequence_number));
  }
};

enum class EventKind {
  kInitialize,
  kProcessRecords,
  kCheckpoint,  // a checkpoint the processor wrote (or tried to), with its result
  kShardEnded,
  kShutdownRequested,
  kLeaseLost,
};

struct Event {
  EventKind kind = EventKind::kInitialize;
  std::string worker;  // the tag of the factory (one per worker)
  std::string shard;
  ExtendedSequenceNumber position;  // kInitialize: start; kCheckpoint: what was asked for
  std::vector<Delivered> records;   // kProcessRecords
  Status status;                    // kCheckpoint
};

class EventLog {
 public:
  void add(Event e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(std::move(e));
    }
    cv_.notify_all();
  }

  std::vector<Event> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

  // Waits until pred(events) holds or `timeout` passes; returns whether it held.
  bool wait_until(const std::function<bool(const std::vector<Event>&)>& pred,
                  std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(events_); });
  }

  // Every record delivered (in delivery order), optionally only by one worker / on one shard.
  static std::vector<Delivered> records(const std::vector<Event>& events,
                                        std::string_view worker = {}, std::string_view shard = {}) {
    std::vector<Delivered> out;
    for (const Event& e : events) {
      if (e.kind != EventKind::kProcessRecords) continue;
      if (!worker.empty() && e.worker != worker) continue;
      if (!shard.empty() && e.shard != shard) continue;
      out.insert(out.end(), e.records.begin(), e.records.end());
    }
    return out;
  }
  static std::vector<std::string> data_of(const std::vector<Delivered>& records) {
    std::vector<std::string> out;
    for (const auto& r : records) out.push_back(r.data);
    return out;
  }
  static bool delivered(const std::vector<Event>& events, std::string_view data,
                        std::string_view worker = {}) {
    for (const auto& r : records(events, worker)) {
      if (r.data == data) return true;
    }
    return false;
  }
  static std::size_t count(const std::vector<Event>& events, EventKind kind,
                           std::string_view shard = {}, std::string_view worker = {}) {
    std::size_t n = 0;
    for (const Event& e : events) {
      if (e.kind == kind && (shard.empty() || e.shard == shard) &&
          (worker.empty() || e.worker == worker)) {
        ++n;
      }
    }
    return n;
  }
  // Index of the first event matching, or npos.
  static std::size_t first(const std::vector<Event>& events,
                           const std::function<bool(const Event&)>& pred) {
    for (std::size_t i = 0; i < events.size(); ++i) {
      if (pred(events[i])) return i;
    }
    return std::string::npos;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
};

// What a recording processor does besides recording. Shared by every processor of a factory;
// the hooks run on the worker's threads (several shards at once), so they must be
// thread-safe.
struct Script {
  // checkpoint() after every batch (unless on_records is set).
  bool checkpoint_each_batch = true;
  // checkpoint() in shutdown_requested.
  bool checkpoint_on_shutdown = true;
  // Runs inside process_records, after the delivery was logged, instead of the per-batch
  // checkpoint. `delivery` counts the calls of this processor (1-based). It may checkpoint
  // (use checkpoint_logged to have it logged), throw or block.
  std::function<void(const std::string& shard, std::span<const Record> records,
                     Checkpointer& checkpointer, int delivery)>
      on_records;
  // Asked at each shard_ended call (`call` is 1-based, per processor): true = return
  // without checkpointing.
  std::function<bool(const std::string& shard, int call)> hold_shard_end;
};

class RecordingProcessor final : public RecordProcessor {
 public:
  RecordingProcessor(std::shared_ptr<EventLog> log, std::shared_ptr<Script> script,
                     std::string worker, std::string shard)
      : log_(std::move(log)),
        script_(std::move(script)),
        worker_(std::move(worker)),
        shard_(std::move(shard)) {}

  // Checkpoints (at `position`, or at the last delivered record when empty) and logs it.
  Status checkpoint_logged(Checkpointer& cp,
                           std::optional<ExtendedSequenceNumber> position = std::nullopt) {
    Status s;
    Event e{EventKind::kCheckpoint, worker_, shard_, {}, {}, {}};
    if (position) {
      e.position = *position;
      s = cp.checkpoint(position->sequence_number(),
                        static_cast<std::uint64_t>(position->sub_sequence_number()));
    } else {
      s = cp.checkpoint();
      e.position = cp.last_checkpoint();
    }
    e.status = s;
    log_->add(std::move(e));
    return s;
  }

  void initialize(const InitializationInput& input) override {
    stream_ = input.stream_name;
    Event e{EventKind::kInitialize, worker_, shard_, input.starting_position, {}, {}};
    log_->add(std::move(e));
  }

  void process_records(const ProcessRecordsInput& input) override {
    ++deliveries_;
    Event e{EventKind::kProcessRecords, worker_, shard_, {}, {}, {}};
    for (const Record& r : input.records) {
      e.records.push_back(Delivered{
          std::string(r.shard_id()), std::string(r.sequence_number()), r.sub_sequence_number(),
          r.aggregated(), std::string(r.partition_key()), std::string(r.data()), stream_});
    }
    log_->add(std::move(e));
    if (script_->on_records) {
      script_->on_records(shard_, input.records, input.checkpointer, deliveries_);
    } else if (script_->checkpoint_each_batch) {
      Status s = checkpoint_logged(input.checkpointer);
      (void)s;
    }
  }

  void lease_lost() override {
    log_->add(Event{EventKind::kLeaseLost, worker_, shard_, {}, {}, {}});
  }

  void shard_ended(Checkpointer& checkpointer) override {
    ++shard_end_calls_;
    log_->add(Event{EventKind::kShardEnded, worker_, shard_, {}, {}, {}});
    if (script_->hold_shard_end && script_->hold_shard_end(shard_, shard_end_calls_)) return;
    Status s = checkpoint_logged(checkpointer);
    (void)s;
  }

  void shutdown_requested(Checkpointer& checkpointer) override {
    log_->add(Event{EventKind::kShutdownRequested, worker_, shard_, {}, {}, {}});
    if (script_->checkpoint_on_shutdown) {
      Status s = checkpoint_logged(checkpointer);
      (void)s;
    }
  }

 private:
  std::shared_ptr<EventLog> log_;
  std::shared_ptr<Script> script_;
  const std::string worker_;
  const std::string shard_;
  std::string stream_;
  int deliveries_ = 0;
  int shard_end_calls_ = 0;
};

class RecordingFactory final : public RecordProcessorFactory {
 public:
  RecordingFactory(std::shared_ptr<EventLog> log, std::string worker,
                   std::shared_ptr<Script> script = std::make_shared<Script>())
      : log_(std::move(log)), worker_(std::move(worker)), script_(std::move(script)) {}
  std::unique_ptr<RecordProcessor> create(std::string_view shard_id) override {
    return std::make_unique<RecordingProcessor>(log_, script_, worker_, std::string(shard_id));
  }

 private:
  std::shared_ptr<EventLog> log_;
  std::string worker_;
  std::shared_ptr<Script> script_;
};

using kcl::testing::eventually;

// Waits until the wall clock has passed `t` (to separate arrival timestamps; a few ms).
inline void wall_clock_past(std::chrono::system_clock::time_point t) {
  while (std::chrono::system_clock::now() <= t) std::this_thread::sleep_for(1ms);
}

inline std::string data_name(const std::string& prefix, std::size_t i) {
  return prefix + std::to_string(i);
}

class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& emu = kcl::testing::shared_emulators();
    aws_ = emu.aws_config();
    kinesis_ = kcl::testing::kinesis_client(aws_);
    ASSERT_TRUE(kinesis_);
    stream_ = kcl::testing::unique_name("wk");
    app_ = kcl::testing::unique_name("wkapp");
    log_ = std::make_shared<EventLog>();
  }

  void create_stream(int shards) {
    Status s = kinesis_->create_stream(stream_, shards);
    ASSERT_TRUE(s.ok()) << s;
    s = kinesis_->wait_for_active(stream_, 30s);
    ASSERT_TRUE(s.ok()) << s;
  }

  std::vector<kinesis::Shard> shards() {
    auto listed = kinesis_->list_shards(stream_);
    EXPECT_TRUE(listed.ok()) << listed.status();
    return listed.ok() ? *listed : std::vector<kinesis::Shard>{};
  }

  // Puts `data` (one record each, partition keys "pk-<data>") in one PutRecords call (<= 500)
  // and returns the sequence numbers in order.
  std::vector<std::string> put(const std::vector<std::string>& data) {
    std::vector<kinesis::PutRecordsEntry> entries;
    for (const auto& d : data) entries.push_back({d, "pk-" + d, ""});
    return put_entries(entries);
  }
  std::vector<std::string> put_entries(const std::vector<kinesis::PutRecordsEntry>& entries) {
    std::vector<std::string> seqs;
    auto r = kinesis_->put_records(stream_, entries);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return seqs;
    EXPECT_EQ(r->failed_record_count, 0);
    for (const auto& e : r->records) seqs.push_back(e.sequence_number);
    return seqs;
  }
  // "<prefix>first" .. "<prefix>(first+n-1)".
  static std::vector<std::string> names(const std::string& prefix, std::size_t first,
                                        std::size_t n) {
    std::vector<std::string> out;
    for (std::size_t i = first; i < first + n; ++i) out.push_back(data_name(prefix, i));
    return out;
  }

  // Short times throughout, TRIM_HORIZON, this test's stream and application.
  WorkerConfig config(const std::string& worker_id) const {
    WorkerConfig c;
    c.stream_name = stream_;
    c.leases.application_name = app_;
    c.leases.worker_id = worker_id;
    c.leases.failover_time = 2000ms;
    c.leases.take_interval = 200ms;
    c.leases.table_active_timeout = 30s;
    c.initial_position = InitialPosition::trim_horizon();
    c.retrieval.idle_time_between_calls = 100ms;
    c.retrieval.min_call_interval = 20ms;
    c.retrieval.throttle_backoff_base = 50ms;
    c.retrieval.throttle_backoff_max = 500ms;
    c.processing.thread_pool_size = 4;
    c.processing.scheduler_interval = 20ms;
    c.processing.parent_check_interval = 100ms;
    c.processing.shard_sync_interval = 1000ms;
    c.processing.failure_backoff_base = 50ms;
    c.processing.failure_backoff_max = 400ms;
    c.processing.shutdown_timeout = 15000ms;
    c.aws = aws_;
    return c;
  }

  std::shared_ptr<RecordingFactory> factory(
      const std::string& tag, std::shared_ptr<Script> script = std::make_shared<Script>()) {
    return std::make_shared<RecordingFactory>(log_, tag, std::move(script));
  }

  // A lease store on this test's lease table (the worker creates the table).
  leases::DynamoDbLeaseStore& store() {
    if (!store_) {
      store_ = kcl::testing::dynamodb_lease_store(aws_, app_);
    }
    return *store_;
  }

  std::optional<Lease> lease(const std::string& key) {
    auto l = store().get_lease(key);
    EXPECT_TRUE(l.ok()) << l.status();
    return l.ok() ? *l : std::nullopt;
  }

  std::vector<Lease> leases() {
    auto l = store().list_leases();
    EXPECT_TRUE(l.ok()) << l.status();
    return l.ok() ? *l : std::vector<Lease>{};
  }

  // Graceful shutdown with a deadline; returns the worker's exit status.
  static Status stop(Worker& w, std::chrono::milliseconds timeout = 30s) {
    auto done = w.begin_shutdown();
    if (done.wait_for(timeout) != std::future_status::ready) {
      return Status(StatusCode::kDeadlineExceeded, "the worker did not stop in time");
    }
    return done.get();
  }

  bool wait_delivered(const std::string& data, std::string_view worker = {},
                      std::chrono::milliseconds timeout = 30s) {
    return log_->wait_until(
        [&](const std::vector<Event>& ev) { return EventLog::delivered(ev, data, worker); },
        timeout);
  }
  // Every name of `data` delivered (by any worker).
  bool wait_all_delivered(const std::vector<std::string>& data,
                          std::chrono::milliseconds timeout = 30s) {
    return log_->wait_until(
        [&](const std::vector<Event>& ev) {
          for (const auto& d : data) {
            if (!EventLog::delivered(ev, d)) return false;
          }
          return true;
        },
        timeout);
  }

  AwsConfig aws_;
  std::shared_ptr<kinesis::KinesisClient> kinesis_;
  std::string stream_;
  std::string app_;
  std::shared_ptr<EventLog> log_;
  std::unique_ptr<leases::DynamoDbLeaseStore> store_;
};

}  // namespace kcl::worker_test
