// Worker against kinesalite + dynalite: failures. A processor that throws gets the same
// records again (none lost, order kept); an expired shard iterator (injected: kinesalite's
// expire after 300 s) is replaced without losing or repeating a record; a stream deleted
// while it is read stops the worker with a kNotFound naming the stream, after
// shutdown_requested reached the processors.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/worker_test_support.h"
#include "worker/worker_access.h"

namespace kcl::worker_test {
namespace {

class WorkerErrorsTest : public WorkerTest {};

TEST_F(WorkerErrorsTest, ProcessorExceptionRedeliversTheSameRecordsInOrder) {
  create_stream(1);
  const auto data = names("r", 0, 20);
  ASSERT_EQ(put(data).size(), 20u);

  // The batch holding r7 fails on its first two deliveries.
  auto failures = std::make_shared<std::atomic<int>>(0);
  auto script = std::make_shared<Script>();
  script->on_records = [failures](const std::string&, std::span<const Record> records,
                                  Checkpointer& cp, int) {
    const bool target = std::any_of(records.begin(), records.end(),
                                    [](const Record& r) { return r.data() == "r7"; });
    if (target && failures->load() < 2) {
      failures->fetch_add(1);
      throw std::runtime_error("injected failure");
    }
    Status s = cp.checkpoint();
    ASSERT_TRUE(s.ok()) << s;
  };
  WorkerConfig c = config("A");
  c.retrieval.max_records_per_call = 5;
  Worker w(c, factory("A", script));
  ASSERT_TRUE(w.start().ok());
  ASSERT_TRUE(wait_delivered("r19"));
  EXPECT_TRUE(eventually([&] { return w.stats().records_delivered == 20; }, 10s))
      << w.stats().records_delivered;
  EXPECT_EQ(w.stats().processor_failures, 2u);
  ASSERT_TRUE(stop(w).ok());

  const auto ev = log_->events();
  std::vector<std::vector<std::string>> deliveries;
  for (const Event& e : ev) {
    if (e.kind != EventKind::kProcessRecords) continue;
    std::vector<std::string> batch;
    for (const auto& r : e.records) batch.push_back(r.data);
    deliveries.push_back(batch);
  }
  // The failing batch comes three times in a row, identical; nothing else repeats.
  std::size_t at = deliveries.size();
  for (std::size_t i = 0; i < deliveries.size(); ++i) {
    if (std::find(deliveries[i].begin(), deliveries[i].end(), "r7") != deliveries[i].end()) {
      at = i;
      break;
    }
  }
  ASSERT_LT(at + 2, deliveries.size());
  EXPECT_EQ(deliveries[at], deliveries[at + 1]);
  EXPECT_EQ(deliveries[at], deliveries[at + 2]);
  std::vector<std::string> once;
  for (std::size_t i = 0; i < deliveries.size(); ++i) {
    if (i == at || i == at + 1) continue;  // the failed attempts
    once.insert(once.end(), deliveries[i].begin(), deliveries[i].end());
  }
  EXPECT_EQ(once, data);
}

TEST_F(WorkerErrorsTest, ShutdownWhileABatchKeepsFailingDoesNotCheckpointPastIt) {
  // A processor that checkpoints in shutdown_requested (as most do) must not thereby mark a
  // batch it failed to process as done: the next owner gets that batch again.
  create_stream(1);
  const auto seqs = put(names("r", 0, 15));
  ASSERT_EQ(seqs.size(), 15u);

  auto script = std::make_shared<Script>();
  script->checkpoint_on_shutdown = true;
  script->on_records = [](const std::string&, std::span<const Record> records, Checkpointer& cp,
                          int) {
    if (std::any_of(records.begin(), records.end(),
                    [](const Record& r) { return r.data() == "r7"; })) {
      throw std::runtime_error("this batch always fails");
    }
    Status s = cp.checkpoint();
    ASSERT_TRUE(s.ok()) << s;
  };
  WorkerConfig c = config("A");
  c.retrieval.max_records_per_call = 5;
  {
    Worker a(c, factory("A", script));
    ASSERT_TRUE(a.start().ok());
    ASSERT_TRUE(eventually([&] { return a.stats().processor_failures >= 2; }, 30s));
    ASSERT_TRUE(stop(a).ok());
  }
  auto l = lease(shards().at(0).shard_id);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->checkpoint, ExtendedSequenceNumber(seqs[4]))
      << "the failed batch r5..r9 was checkpointed at shutdown";

  Worker b(config("B"), factory("B"));
  ASSERT_TRUE(b.start().ok());
  ASSERT_TRUE(wait_delivered("r14", "B"));
  ASSERT_TRUE(stop(b).ok());
  EXPECT_EQ(EventLog::data_of(EventLog::records(log_->events(), "B")), names("r", 5, 10));
}

// Wraps the real transport; answers chosen GetRecords calls with ExpiredIteratorException
// and keeps the GetShardIterator request bodies.
class ExpiringTransport final : public aws::HttpTransport {
 public:
  explicit ExpiringTransport(std::shared_ptr<aws::HttpTransport> inner)
      : inner_(std::move(inner)) {}

  Result<aws::HttpResponse> send(const aws::HttpRequest& request) override {
    std::string target;
    for (const auto& [name, value] : request.headers) {
      if (name == "X-Amz-Target" || name == "x-amz-target") target = value;
    }
    if (target.ends_with(".GetRecords")) {
      int n = expire_next.load();
      while (n > 0 && !expire_next.compare_exchange_weak(n, n - 1)) {
      }
      if (n > 0) {
        injected.fetch_add(1);
        aws::HttpResponse response;
        response.status = 400;
        response.headers = {{"content-type", "application/x-amz-json-1.1"}};
        response.body =
            R"json({"__type":"ExpiredIteratorException","message":"Iterator expired (injected)"})json";
        return response;
      }
    } else if (target.ends_with(".GetShardIterator")) {
      std::lock_guard<std::mutex> lock(mu_);
      iterator_requests_.push_back(request.body);
    }
    return inner_->send(request);
  }

  std::vector<std::string> iterator_requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return iterator_requests_;
  }

  std::atomic<int> expire_next{0};
  std::atomic<int> injected{0};

 private:
  std::shared_ptr<aws::HttpTransport> inner_;
  mutable std::mutex mu_;
  std::vector<std::string> iterator_requests_;
};

TEST_F(WorkerErrorsTest, ExpiredIteratorIsReplacedWithoutLosingOrRepeatingRecords) {
  create_stream(1);
  const auto seqs = put(names("r", 0, 10));
  ASSERT_EQ(seqs.size(), 10u);

  auto transport = std::make_shared<ExpiringTransport>(aws::make_curl_transport(aws_.http));
  worker::WorkerInternals internals;
  internals.kinesis = std::make_shared<kinesis::KinesisClient>(
      std::shared_ptr<aws::AwsJsonClient>(aws::make_aws_json_client(
          aws::kinesis_service(), aws_, transport, aws::make_static_provider(*aws_.credentials))));
  auto worker = worker::make_worker(config("A"), factory("A"), {}, internals);
  Worker& w = *worker;
  ASSERT_TRUE(w.start().ok());
  ASSERT_TRUE(wait_delivered("r9"));
  const std::size_t iterators_before = transport->iterator_requests().size();

  // The next two GetRecords calls find their iterator expired.
  transport->expire_next.store(2);
  ASSERT_TRUE(eventually([&] { return transport->injected.load() == 2; }, 10s));
  const auto more = put(names("r", 10, 10));
  ASSERT_EQ(more.size(), 10u);
  ASSERT_TRUE(wait_delivered("r19"));
  ASSERT_TRUE(stop(w).ok());

  EXPECT_EQ(EventLog::data_of(EventLog::records(log_->events())), names("r", 0, 20));
  // New iterators were asked for after the last record fetched.
  const auto requests = transport->iterator_requests();
  ASSERT_GE(requests.size(), iterators_before + 2);
  for (std::size_t i = iterators_before; i < requests.size(); ++i) {
    EXPECT_NE(requests[i].find("AFTER_SEQUENCE_NUMBER"), std::string::npos) << requests[i];
    EXPECT_NE(requests[i].find(seqs[9]), std::string::npos) << requests[i];
  }
}

TEST_F(WorkerErrorsTest, StreamDeletedWhileReadingStopsTheWorkerWithNotFound) {
  create_stream(2);
  std::vector<std::string> ids;
  for (const auto& shard : shards()) ids.push_back(shard.shard_id);
  ASSERT_EQ(ids.size(), 2u);
  ASSERT_EQ(put(names("r", 0, 20)).size(), 20u);

  Worker w(config("A"), factory("A"));
  auto run = std::async(std::launch::async, [&] { return w.run(); });
  ASSERT_TRUE(log_->wait_until(
      [](const std::vector<Event>& ev) {
        return EventLog::records(ev).size() >= 20 &&
               EventLog::count(ev, EventKind::kInitialize) == 2;
      },
      30s));

  ASSERT_TRUE(kinesis_->delete_stream(stream_).ok());
  ASSERT_EQ(run.wait_for(60s), std::future_status::ready) << "the worker did not stop";
  const Status s = run.get();
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find(stream_), std::string::npos) << s;

  const auto ev = log_->events();
  EXPECT_EQ(EventLog::count(ev, EventKind::kShutdownRequested), 2u);
  for (const auto& shard : ids) {
    EXPECT_EQ(EventLog::count(ev, EventKind::kShutdownRequested, shard), 1u) << shard;
  }
  EXPECT_EQ(EventLog::count(ev, EventKind::kLeaseLost), 0u);
}

}  // namespace
}  // namespace kcl::worker_test

namespace kcl::worker_test {
namespace {

// Answers every GetRecords call with a body that is not JSON: the shard's consumer fails
// the same way each time it is restarted.
class UnreadableRecordsTransport final : public aws::HttpTransport {
 public:
  explicit UnreadableRecordsTransport(std::shared_ptr<aws::HttpTransport> inner)
      : inner_(std::move(inner)) {}
  Result<aws::HttpResponse> send(const aws::HttpRequest& request) override {
    for (const auto& [name, value] : request.headers) {
      if ((name == "X-Amz-Target" || name == "x-amz-target") && value.ends_with(".GetRecords")) {
        aws::HttpResponse response;
        response.status = 200;
        response.headers = {{"content-type", "application/x-amz-json-1.1"}};
        response.body = "{not json";
        return response;
      }
    }
    return inner_->send(request);
  }

 private:
  std::shared_ptr<aws::HttpTransport> inner_;
};

// Keeps every line logged at ERROR.
class ErrorLines final : public Logger {
 public:
  bool enabled(LogLevel level) const override { return level >= LogLevel::kWarn; }
  void log(LogLevel level, std::string_view component, std::string_view message) override {
    if (level < LogLevel::kError) return;
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(std::string(component) + ": " + std::string(message));
  }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST_F(WorkerTest, AShardFailingTheSameWayIsReportedOnceWithACountNotOncePerRestart) {
  create_stream(1);
  ASSERT_EQ(put(names("r", 0, 3)).size(), 3u);
  auto transport =
      std::make_shared<UnreadableRecordsTransport>(aws::make_curl_transport(aws_.http));
  worker::WorkerInternals internals;
  internals.kinesis = std::make_shared<kinesis::KinesisClient>(
      std::shared_ptr<aws::AwsJsonClient>(aws::make_aws_json_client(
          aws::kinesis_service(), aws_, transport, aws::make_static_provider(*aws_.credentials))));
  auto logger = std::make_shared<ErrorLines>();
  Dependencies deps;
  deps.logger = logger;
  WorkerConfig c = config("A");
  c.processing.failure_backoff_max = 50ms;  // restart the failing consumer quickly
  // A restart that falls due wakes the scheduler: with its interval at the 10 s maximum, the
  // 12 restarts below would otherwise take two minutes, past the wait's 60 s.
  c.processing.scheduler_interval = 10s;
  c.processing.shard_sync_interval = 3600s;  // no sync to wake it either
  auto worker = worker::make_worker(c, factory("A"), deps, internals);
  ASSERT_TRUE(worker->start().ok());
  auto failures = [&] {
    auto s = worker->stats();
    return s.failing_shards.empty() ? 0 : s.failing_shards.front().consecutive_failures;
  };
  ASSERT_TRUE(eventually([&] { return failures() >= 12; }, 60s)) << failures();
  ASSERT_TRUE(stop(*worker).ok());

  const auto stats = worker->stats();
  ASSERT_EQ(stats.failing_shards.size(), 1u);
  const FailingShard& f = stats.failing_shards.front();
  EXPECT_EQ(f.records_delivered, 0u);
  EXPECT_EQ(f.cause.code(), StatusCode::kInternal) << f.cause;
  EXPECT_NE(f.cause.message().find("GetRecords"), std::string::npos) << f.cause;
  // One line when the series starts, one at 3 failures and one at 10: not one per restart.
  std::vector<std::string> about_shard;
  for (const auto& l : logger->lines()) {
    if (l.find(f.shard_id) != std::string::npos) about_shard.push_back(l);
  }
  const int n = f.consecutive_failures;
  ASSERT_GE(n, 12);
  const std::size_t expected = n < 100 ? 3u : 4u;
  ASSERT_EQ(about_shard.size(), expected) << ::testing::PrintToString(about_shard);
  EXPECT_NE(about_shard[1].find("failed 3 times in a row"), std::string::npos) << about_shard[1];
  EXPECT_NE(about_shard[2].find("failed 10 times in a row"), std::string::npos) << about_shard[2];
  EXPECT_NE(about_shard[2].find("no record delivered yet"), std::string::npos) << about_shard[2];
  EXPECT_TRUE(EventLog::records(log_->events()).empty());
}

}  // namespace
}  // namespace kcl::worker_test
