// Worker against kinesalite + dynalite with ProcessorErrorPolicy::kDeadLetter: one poison
// record among 10,000 ends up in a JSON-lines file with its error while every good record is
// processed (redeliveries exactly those the bisection implies) and the checkpoint passes it;
// the stream sink writes it to a second stream through the producer; a sink that refuses
// holds the shard's checkpoint until it accepts; an outage of what the processor depends on
// (every call failing for a while) sends nothing to the sink; a pull consumer's nack() sets a
// record aside, and the watermark passes it only once the sink accepted it.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "aws/base64.h"
#include "kcl/dead_letter.h"
#include "kcl/producer.h"
#include "kcl/pull_consumer.h"
#include "support/bisection.h"
#include "support/worker_test_support.h"

namespace kcl::worker_test {
namespace {

// Counts, per record, how often it was handed over in calls that threw and in calls that
// succeeded; throws whenever a call holds `bad`, and checkpoints each successful call.
struct Tally {
  std::mutex mu;
  std::string bad;
  std::string after_bad;  // the record after it: its success ends the hold-up
  std::map<std::string, int> seen_in_failed;
  std::map<std::string, int> processed;
  std::vector<std::size_t> failed_sizes;  // sizes of the calls that threw, in order
  std::size_t bad_index_in_first = 0;     // where `bad` sat in the first call that threw
  std::chrono::steady_clock::time_point first_failure{};
  std::chrono::steady_clock::time_point resumed{};  // after_bad processed

  std::size_t calls = 0;
};

std::shared_ptr<Script> tallying(std::shared_ptr<Tally> t) {
  auto script = std::make_shared<Script>();
  script->on_records = [t](const std::string&, std::span<const Record> records, Checkpointer& cp,
                           int) {
    {
      std::lock_guard<std::mutex> lock(t->mu);
      ++t->calls;
      std::size_t at = records.size();
      for (std::size_t i = 0; i < records.size(); ++i) {
        if (records[i].data() == t->bad) at = i;
      }
      if (at < records.size()) {
        if (t->failed_sizes.empty()) {
          t->bad_index_in_first = at;
          t->first_failure = std::chrono::steady_clock::now();
        }
        t->failed_sizes.push_back(records.size());
        for (const Record& r : records) {
          if (r.data() != t->bad) ++t->seen_in_failed[std::string(r.data())];
        }
        throw std::runtime_error("cannot parse " + t->bad);
      }
      for (const Record& r : records) {
        ++t->processed[std::string(r.data())];
        if (r.data() == t->after_bad) t->resumed = std::chrono::steady_clock::now();
      }
    }
    Status s = cp.checkpoint();
    if (!s.ok()) throw std::runtime_error("checkpoint: " + s.to_string());
  };
  return script;
}

class WorkerDeadLetterTest : public WorkerTest {
 protected:
  void TearDown() override {
    if (!file_.empty()) std::remove(file_.c_str());
  }
  // A dead-letter stream of one shard and a producer writing to it.
  std::unique_ptr<Producer> dead_letter_stream(const std::string& name) {
    EXPECT_TRUE(kinesis_->create_stream(name, 1).ok());
    EXPECT_TRUE(kinesis_->wait_for_active(name, 30s).ok());
    ProducerConfig pc;
    pc.stream_name = name;
    pc.aws = aws_;
    pc.aggregate = false;
    pc.linger = std::chrono::milliseconds(0);
    auto producer = Producer::create(pc);
    EXPECT_TRUE(producer.ok()) << producer.status();
    return producer.ok() ? std::move(producer).value() : nullptr;
  }
  // The records (partition key, data) of the one shard of `stream`, from its start.
  struct Written {
    std::string partition_key, data;
  };
  std::vector<Written> records_of(const std::string& stream) {
    auto listed = kinesis_->list_shards(stream);
    EXPECT_TRUE(listed.ok() && !listed->empty());
    if (!listed.ok() || listed->empty()) return {};
    auto it =
        kinesis_->get_shard_iterator(stream, listed->at(0).shard_id, kinesis::IteratorPosition{});
    EXPECT_TRUE(it.ok()) << it.status();
    if (!it.ok()) return {};
    auto got = kinesis_->get_records(*it, 100);
    EXPECT_TRUE(got.ok()) << got.status();
    std::vector<Written> out;
    if (got.ok()) {
      for (const auto& r : got->records) {
        out.push_back({std::string(r.partition_key), std::string(r.data)});
      }
    }
    return out;
  }
  WorkerConfig dead_letter_config(std::shared_ptr<DeadLetterSink> sink, int attempts = 3) {
    WorkerConfig c = config("A");
    c.processing.on_processor_error = ProcessorErrorPolicy::kDeadLetter;
    c.processing.max_attempts_before_dead_letter = attempts;
    c.processing.dead_letter_sink = std::move(sink);
    return c;
  }
  std::string temp_file() {
    char tmpl[] = "/tmp/kcl-dead-letter-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    EXPECT_GE(fd, 0);
    ::close(fd);
    file_ = tmpl;
    return file_;
  }
  // The position after which the bad record lies: the checkpoint has passed it when above.
  bool checkpoint_passed(const std::string& shard, const std::string& seq) {
    auto l = lease(shard);
    return l && !l->checkpoint.is_sentinel() && l->checkpoint > ExtendedSequenceNumber(seq);
  }
  // The endpoint shows the shard's one dead letter: `dead_lettered` in /status.json and the
  // counter in /metrics.
  void expect_dead_lettered_published(const std::string& url, const std::string& shard) {
    const auto colon = url.rfind(':');
    httplib::Client http(url.substr(7, colon - 7), std::stoi(url.substr(colon + 1)));
    double in_status = -1;
    EXPECT_TRUE(eventually(
        [&] {
          auto res = http.Get("/status.json");
          if (!res || res->status != 200) return false;
          auto j = nlohmann::json::parse(res->body, nullptr, false);
          if (!j.is_object() || !j.contains("shards")) return false;
          for (const auto& sh : j["shards"]) {
            if (sh.value("shard_id", "") == shard && sh["dead_lettered"].is_number()) {
              in_status = sh["dead_lettered"].get<double>();
            }
          }
          return in_status == 1;
        },
        20s))
        << "dead_lettered in /status.json: " << in_status;
    auto metrics = http.Get("/metrics");
    ASSERT_TRUE(metrics && metrics->status == 200);
    const std::string series = "kcl_records_dead_lettered_total{shard=\"" + shard +
                               "\",sink=\"file\",stream=\"" + stream_ + "\"} 1";
    EXPECT_NE(metrics->body.find(series), std::string::npos) << "no " << series << " in\n"
                                                             << metrics->body.substr(0, 3000);
  }
  std::string file_;
};

TEST_F(WorkerDeadLetterTest, OneBadRecordInTenThousandGoesToTheFileAndEveryGoodOneIsProcessed) {
  create_stream(1);
  constexpr std::size_t kRecords = 10000;
  const std::size_t bad_at = 6789;
  std::vector<std::string> seqs;
  for (std::size_t first = 0; first < kRecords; first += 500) {
    auto s = put(names("r", first, 500));
    ASSERT_EQ(s.size(), 500u);
    seqs.insert(seqs.end(), s.begin(), s.end());
  }
  auto tally = std::make_shared<Tally>();
  tally->bad = data_name("r", bad_at);
  tally->after_bad = data_name("r", bad_at + 1);
  auto sink = make_file_dead_letter_sink(temp_file());
  ASSERT_TRUE(sink.ok()) << sink.status();
  const int attempts = 3;
  WorkerConfig c = dead_letter_config(*sink, attempts);
  c.http_address = "127.0.0.1:0";  // the count in /status.json and /metrics
  Worker w(c, factory("A", tallying(tally)));
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(w.start().ok());
  const std::string shard = shards().at(0).shard_id;
  ASSERT_TRUE(eventually([&] { return checkpoint_passed(shard, seqs[kRecords - 2]); }, 120s))
      << "the checkpoint never reached the end";
  const auto finished = std::chrono::steady_clock::now();
  EXPECT_EQ(w.stats().records_dead_lettered, 1u);
  expect_dead_lettered_published(w.http_url(), shard);
  ASSERT_TRUE(stop(w).ok());

  std::lock_guard<std::mutex> lock(tally->mu);
  // Every good record processed exactly once, the bad one never.
  std::size_t once = 0;
  for (std::size_t i = 0; i < kRecords; ++i) {
    if (i == bad_at) continue;
    const int n = tally->processed[data_name("r", i)];
    if (n == 1) ++once;
    EXPECT_EQ(n, 1) << "record " << i;
  }
  EXPECT_EQ(once, kRecords - 1);
  EXPECT_EQ(tally->processed.count(tally->bad), 0u);
  // Redeliveries: exactly those bisection implies for the failing batch as delivered.
  ASSERT_FALSE(tally->failed_sizes.empty());
  const std::size_t batch = tally->failed_sizes.front();
  int redelivered = 0, records_redelivered = 0;
  for (const auto& [data, n] : tally->seen_in_failed) {
    redelivered += n;
    ++records_redelivered;
  }
  const int implied =
      kcl::testing::implied_redeliveries(batch, tally->bad_index_in_first, attempts);
  EXPECT_EQ(redelivered, implied);
  // The file: one line, the bad record with its error and position.
  std::ifstream in(file_);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 1u);
  auto j = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j["stream"], stream_);
  EXPECT_EQ(j["shard_id"], shard);
  EXPECT_EQ(j["sequence_number"], seqs[bad_at]);
  EXPECT_EQ(j["sub_sequence_number"], 0);
  EXPECT_EQ(j["partition_key"], "pk-" + tally->bad);
  EXPECT_GT(j["approximate_arrival_timestamp"].get<std::int64_t>(), 0);
  EXPECT_NE(j["error"].get<std::string>().find("cannot parse " + tally->bad), std::string::npos)
      << j["error"];
  auto data = aws::base64_decode(j["data"].get<std::string>());
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, tally->bad);
  const int record_attempts = j["attempts"].get<int>();
  EXPECT_EQ(static_cast<std::size_t>(record_attempts), tally->failed_sizes.size());
  const auto held =
      std::chrono::duration_cast<std::chrono::milliseconds>(tally->resumed - tally->first_failure);
  std::printf(
      "[ figures  ] %zu records, 1 bad at %zu; failing batch %zu records, bad at index %zu; "
      "%zu process_records calls (%zu threw); %d good records handed over again in calls that "
      "threw (%d distinct; bisection implies %d); every good record processed once (%zu); "
      "bad record dead-lettered after %d attempts; shard held up %lld ms (first failure to "
      "the record after the bad one processed), of which the retries' backoffs are %d ms "
      "(2 x (50 + 100): the batch's and the record's retries); whole run %lld ms\n",
      kRecords, bad_at, batch, tally->bad_index_in_first, tally->calls, tally->failed_sizes.size(),
      redelivered, records_redelivered, implied, once, record_attempts,
      static_cast<long long>(held.count()), 2 * (50 + 100),
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(finished - started).count()));
}

TEST_F(WorkerDeadLetterTest, StreamSinkWritesThePoisonRecordToASecondStream) {
  create_stream(1);
  const std::string dlq = kcl::testing::unique_name("dlq");
  auto producer = dead_letter_stream(dlq);
  ASSERT_TRUE(producer);
  const auto seqs = put(names("r", 0, 20));
  ASSERT_EQ(seqs.size(), 20u);
  auto tally = std::make_shared<Tally>();
  tally->bad = "r7";
  Worker w(dead_letter_config(make_stream_dead_letter_sink(*producer), 2),
           factory("A", tallying(tally)));
  ASSERT_TRUE(w.start().ok());
  const std::string shard = shards().at(0).shard_id;
  ASSERT_TRUE(eventually([&] { return checkpoint_passed(shard, seqs[18]); }, 60s));
  ASSERT_TRUE(stop(w).ok());
  (void)producer->shutdown();

  const auto got = records_of(dlq);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].partition_key, "pk-r7");
  auto j = nlohmann::json::parse(got[0].data);
  EXPECT_EQ(j["sequence_number"], seqs[7]);
  EXPECT_EQ(j["shard_id"], shard);
  EXPECT_NE(j["error"].get<std::string>().find("cannot parse r7"), std::string::npos);
  auto data = aws::base64_decode(j["data"].get<std::string>());
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, "r7");
  std::printf("[ figures  ] dead-letter stream %s got 1 record: %s\n", dlq.c_str(),
              got[0].data.c_str());
}

// A poison record of 900 KB: its letter (base64) would exceed a record's 1 MiB, so the
// stream sink writes it in parts, which join back into the record's bytes.
TEST_F(WorkerDeadLetterTest, StreamSinkWritesALetterTooLargeForOneRecordInParts) {
  const std::string dlq = kcl::testing::unique_name("dlq");
  auto producer = dead_letter_stream(dlq);
  ASSERT_TRUE(producer);
  auto sink = make_stream_dead_letter_sink(*producer);
  std::string bytes(900 * 1024, 'b');
  for (std::size_t i = 0; i < bytes.size(); i += 7) bytes[i] = static_cast<char>(i % 256);
  Record::Fields f;
  f.shard_id = "shardId-000000000000";
  f.sequence_number = "49590338271490256608559692538361571095921575989136588850";
  f.partition_key = "pk-big";
  f.data = bytes;
  const DeadLetter letter{
      "orders", "shardId-000000000000",          Record(std::move(f)), "too big",
      3,        std::chrono::system_clock::now()};
  const Status accepted = sink->accept(letter);
  ASSERT_TRUE(accepted.ok()) << accepted;
  (void)producer->shutdown();
  const auto got = records_of(dlq);
  ASSERT_EQ(got.size(), 2u);
  std::string joined;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].partition_key, "pk-big");
    auto j = nlohmann::json::parse(got[i].data);
    EXPECT_EQ(j["part"], i + 1);
    EXPECT_EQ(j["parts"], 2);
    joined += j["data"].get<std::string>();
  }
  auto data = aws::base64_decode(joined);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, bytes);
}

TEST_F(WorkerDeadLetterTest, ARefusingSinkHoldsTheCheckpointUntilItAccepts) {
  create_stream(1);
  const auto seqs = put(names("r", 0, 20));
  ASSERT_EQ(seqs.size(), 20u);
  std::atomic<bool> accept{false};
  std::atomic<int> refusals{0};
  std::mutex mu;
  std::vector<std::string> accepted;
  auto sink = make_callback_dead_letter_sink([&](const DeadLetter& letter) {
    if (!accept.load()) {
      refusals.fetch_add(1);
      return Status(StatusCode::kUnavailable, "dead-letter store is down");
    }
    std::lock_guard<std::mutex> lock(mu);
    accepted.emplace_back(letter.record.data());
    return Status::Ok();
  });
  auto tally = std::make_shared<Tally>();
  tally->bad = "r12";
  Worker w(dead_letter_config(sink, 1), factory("A", tallying(tally)));
  ASSERT_TRUE(w.start().ok());
  const std::string shard = shards().at(0).shard_id;
  ASSERT_TRUE(eventually([&] { return refusals.load() >= 4; }, 60s));
  // While the sink refuses: the records before r12 are checkpointed, nothing at or after it.
  // r13, after it, was processed: its success is what made r12 a poison record (not an
  // outage), but no checkpoint names it before r12 is in the sink.
  ASSERT_TRUE(eventually([&] { return checkpoint_passed(shard, seqs[10]); }, 10s));
  EXPECT_FALSE(checkpoint_passed(shard, seqs[11])) << "passed a record its sink refused";
  {
    std::lock_guard<std::mutex> lock(tally->mu);
    EXPECT_EQ(tally->processed.count("r13"), 1u);
  }
  const int refused = refusals.load();
  const auto recovered_at = std::chrono::steady_clock::now();
  accept.store(true);
  ASSERT_TRUE(eventually([&] { return checkpoint_passed(shard, seqs[18]); }, 60s));
  const auto held = std::chrono::steady_clock::now() - recovered_at;
  ASSERT_TRUE(stop(w).ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(accepted, (std::vector<std::string>{"r12"}));
  }
  std::printf(
      "[ figures  ] sink refused %d times (backoff 50..400 ms); checkpoint held before "
      "r12 throughout, passed it %lld ms after the sink recovered\n",
      refused,
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(held).count()));
}

// What the processor depends on is out for a while (every call throws, its database down):
// no record is to blame, so the sink gets nothing and the checkpoint stays; once it is back,
// every record is processed once.
TEST_F(WorkerDeadLetterTest, AnOutageOfWhatTheProcessorNeedsSendsNothingToTheSink) {
  create_stream(1);
  const auto seqs = put(names("r", 0, 30));
  ASSERT_EQ(seqs.size(), 30u);
  std::atomic<bool> down{true};
  std::atomic<int> failed_calls{0};
  std::mutex mu;
  std::map<std::string, int> processed;
  std::vector<std::string> letters;
  auto sink = make_callback_dead_letter_sink([&](const DeadLetter& letter) {
    std::lock_guard<std::mutex> lock(mu);
    letters.emplace_back(letter.record.data());
    return Status::Ok();
  });
  auto script = std::make_shared<Script>();
  script->on_records = [&](const std::string&, std::span<const Record> records, Checkpointer& cp,
                           int) {
    if (down.load()) {
      failed_calls.fetch_add(1);
      throw std::runtime_error("connection refused: the database is down");
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const Record& r : records) ++processed[std::string(r.data())];
    }
    Status st = cp.checkpoint();
    if (!st.ok()) throw std::runtime_error("checkpoint: " + st.to_string());
  };
  Worker w(dead_letter_config(sink, 2), factory("A", script));
  ASSERT_TRUE(w.start().ok());
  const std::string shard = shards().at(0).shard_id;
  ASSERT_TRUE(eventually([&] { return failed_calls.load() >= 40; }, 60s));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(letters.empty()) << letters.size() << " records dead-lettered in the outage";
  }
  EXPECT_FALSE(checkpoint_passed(shard, seqs[0]));
  const int failed = failed_calls.load();
  down.store(false);
  ASSERT_TRUE(eventually([&] { return checkpoint_passed(shard, seqs[28]); }, 60s));
  ASSERT_TRUE(stop(w).ok());
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(letters.empty());
  EXPECT_EQ(w.stats().records_dead_lettered, 0u);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(processed[data_name("r", i)], 1) << i;
  std::printf(
      "[ figures  ] outage: %d calls failed, nothing dead-lettered; 30 records "
      "processed once after it\n",
      failed);
}

TEST_F(WorkerDeadLetterTest, PullNackDeadLettersTheRecordAndTheWatermarkWaitsForTheSink) {
  create_stream(1);
  const auto seqs = put(names("r", 0, 10));
  ASSERT_EQ(seqs.size(), 10u);
  std::atomic<bool> accept{false};
  std::atomic<int> refusals{0};
  std::mutex mu;
  std::vector<DeadLetter> letters;
  PullConsumerConfig pc;
  pc.worker = config("A");
  pc.checkpoint_interval = 100ms;
  pc.worker.processing.dead_letter_sink =
      make_callback_dead_letter_sink([&](const DeadLetter& letter) {
        if (!accept.load()) {
          refusals.fetch_add(1);
          return Status(StatusCode::kUnavailable, "dead-letter store is down");
        }
        std::lock_guard<std::mutex> lock(mu);
        letters.push_back(letter);
        return Status::Ok();
      });
  PullConsumer consumer(pc);
  ASSERT_TRUE(consumer.start().ok());
  std::vector<PulledRecord> taken;
  ASSERT_TRUE(eventually(
      [&] {
        for (PulledRecord& r : consumer.next_batch(10, 100ms)) taken.push_back(std::move(r));
        return taken.size() == 10;
      },
      60s));
  const std::string shard = shards().at(0).shard_id;
  std::future<Status> nacked;
  for (PulledRecord& r : taken) {
    if (r.record().data() == "r4") {
      nacked =
          std::async(std::launch::async, [&r] { return r.nack("schema v9 is not supported"); });
    } else {
      ASSERT_TRUE(r.ack().ok());
    }
  }
  ASSERT_TRUE(eventually([&] { return refusals.load() >= 3; }, 30s));
  // Every other record is acked: the watermark stops before r4 while the sink refuses.
  ASSERT_TRUE(eventually([&] { return checkpoint_passed(shard, seqs[2]); }, 10s));
  EXPECT_FALSE(checkpoint_passed(shard, seqs[3])) << "passed a record its sink refused";
  EXPECT_EQ(nacked.wait_for(0s), std::future_status::timeout) << "nack returned while refused";
  const int refused = refusals.load();
  accept.store(true);
  ASSERT_EQ(nacked.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(nacked.get().ok());
  ASSERT_TRUE(eventually([&] { return checkpoint_passed(shard, seqs[8]); }, 30s));
  EXPECT_EQ(consumer.stats().acked, 10u);
  ASSERT_TRUE(consumer.shutdown().ok());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].record.data(), "r4");
  EXPECT_EQ(letters[0].record.sequence_number(), seqs[4]);
  EXPECT_EQ(letters[0].error, "schema v9 is not supported");
  EXPECT_EQ(letters[0].attempts, 1);
  EXPECT_EQ(letters[0].shard_id, shard);
  std::printf(
      "[ figures  ] pull nack: sink refused %d times; watermark held before r4, then "
      "passed it once accepted\n",
      refused);
}

}  // namespace
}  // namespace kcl::worker_test
