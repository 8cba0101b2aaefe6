// kcl::Producer against kinesalite (every record read back exactly once, per-key order kept,
// aggregated and not), against a scripted PutRecords server (partial failures, 500s,
// throttles, non-retryable errors), and KPL interoperability with npm aws-kinesis-agg.
#include "kcl/producer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "aws/aws_json_client.h"
#include "aws/base64.h"
#include "aws/credentials.h"
#include "aws/http_transport.h"
#include "kcl/worker.h"
#include "kinesis/kinesis_client.h"
#include "kpl/kpl_format.h"
#include "producer/kpl_aggregator.h"
#include "producer/producer_access.h"
#include "retrieval/kpl_deaggregator.h"
#include "support/captured_log.h"
#include "support/emulators.h"
#include "support/eventually.h"
#include "support/local_http_server.h"
#include "support/thread_names.h"

namespace kcl::producer {
namespace {

using namespace std::chrono_literals;
using testing::shared_emulators;
using testing::unique_name;

// The producer made, or the test run stopped with why it could not be made (every caller
// goes on to use it).
std::unique_ptr<Producer> made(Result<std::unique_ptr<Producer>> r) {
  if (!r.ok()) {
    std::fprintf(stderr, "the producer could not be made: %s\n", r.status().to_string().c_str());
    std::abort();
  }
  return std::move(r).value();
}

std::shared_ptr<kinesis::KinesisClient> make_client(const AwsConfig& config) {
  std::shared_ptr<aws::AwsJsonClient> json = aws::make_aws_json_client(
      aws::kinesis_service(), config, aws::make_curl_transport(config.http),
      aws::make_static_provider(*config.credentials));
  return std::make_shared<kinesis::KinesisClient>(std::move(json));
}

// Runs `node tests/integration/producer/kpl_agg_interop.js mode` with `input` on stdin.
std::vector<std::string> run_node(const std::string& mode, const std::string& input) {
  const std::string dir = std::string(KCL_SOURCE_DIR);
  const std::string in_path = ::testing::TempDir() + "kpl_interop_" + mode + ".txt";
  std::ofstream(in_path) << input;
  const std::string cmd = "cd '" + dir +
                          "' && node tests/integration/producer/kpl_agg_interop.js " + mode +
                          " < '" + in_path + "'";
  std::vector<std::string> lines;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return lines;
  std::string line;
  char buf[65536];
  while (fgets(buf, sizeof buf, p) != nullptr) {
    line += buf;
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
      lines.push_back(line);
      line.clear();
    }
  }
  EXPECT_EQ(pclose(p), 0) << cmd;
  return lines;
}

// Hands each GetRecords answer of every shard of `stream`, read from TRIM_HORIZON, to
// `take` with its shard, shard after shard.
void read_shards(
    kinesis::KinesisClient& client, const std::string& stream,
    const std::function<void(const kinesis::Shard&, std::vector<kinesis::KinesisRecord>&&)>& take) {
  auto shards = client.list_shards(stream);
  EXPECT_TRUE(shards.ok()) << shards.status().message();
  if (!shards.ok()) return;
  for (const auto& shard : *shards) {
    auto it = client.get_shard_iterator(stream, shard.shard_id, kinesis::IteratorPosition{});
    EXPECT_TRUE(it.ok()) << it.status().message();
    if (!it.ok()) continue;
    std::string iterator = *it;
    for (;;) {
      auto batch = client.get_records(iterator, 10000);
      EXPECT_TRUE(batch.ok()) << batch.status().message();
      if (!batch.ok() || batch->records.empty() || !batch->next_shard_iterator) break;
      take(shard, std::move(batch->records));
      iterator = *batch->next_shard_iterator;
    }
  }
}

// Every record of every shard of `stream`, from TRIM_HORIZON, deaggregated by kcl-cpp's
// deaggregator; the raw aggregates' data are appended to `aggregates` when given.
std::vector<Record> read_all(kinesis::KinesisClient& client, const std::string& stream,
                             std::vector<std::string>* aggregates = nullptr) {
  std::vector<Record> out;
  read_shards(client, stream,
              [&](const kinesis::Shard& shard, std::vector<kinesis::KinesisRecord>&& records) {
                if (aggregates != nullptr) {
                  for (const auto& r : records) {
                    if (kpl::has_magic(r.data)) aggregates->emplace_back(r.data);
                  }
                }
                auto stats = retrieval::deaggregate_all(std::move(records), shard.shard_id, out);
                EXPECT_EQ(stats.corrupt, 0u);
              });
  return out;
}

// Every record of `stream`, as kcl-cpp's consumer delivers it: a kcl::Worker (leases in
// dynalite, TRIM_HORIZON, deaggregation, checkpoints) whose processor keeps what it gets,
// until `expected` records came (or two minutes passed).
std::vector<Record> consume_all(const AwsConfig& aws, const std::string& stream,
                                std::size_t expected, RetrievalConfig retrieval = {}) {
  struct Sink {
    std::mutex mu;
    std::vector<Record> records;
  };
  class Keep final : public RecordProcessor {
   public:
    explicit Keep(std::shared_ptr<Sink> sink) : sink_(std::move(sink)) {}
    void initialize(const InitializationInput&) override {}
    void process_records(const ProcessRecordsInput& in) override {
      std::lock_guard<std::mutex> lock(sink_->mu);
      sink_->records.insert(sink_->records.end(), in.records.begin(), in.records.end());
      (void)in.checkpointer.checkpoint();
    }
    void shard_ended(Checkpointer& cp) override { (void)cp.checkpoint(); }
    void shutdown_requested(Checkpointer& cp) override { (void)cp.checkpoint(); }

   private:
    std::shared_ptr<Sink> sink_;
  };
  class Factory final : public RecordProcessorFactory {
   public:
    explicit Factory(std::shared_ptr<Sink> sink) : sink_(std::move(sink)) {}
    std::unique_ptr<RecordProcessor> create(std::string_view) override {
      return std::make_unique<Keep>(sink_);
    }

   private:
    std::shared_ptr<Sink> sink_;
  };
  auto sink = std::make_shared<Sink>();
  WorkerConfig config;
  config.stream_name = stream;
  config.leases.application_name = unique_name("producer-readback");
  config.initial_position = InitialPosition::trim_horizon();
  config.aws = aws;
  config.retrieval = retrieval;
  Worker worker(config, std::make_shared<Factory>(sink));
  EXPECT_TRUE(worker.start().ok());
  const auto until = std::chrono::steady_clock::now() + 120s;
  while (std::chrono::steady_clock::now() < until) {
    {
      std::lock_guard<std::mutex> lock(sink->mu);
      if (sink->records.size() >= expected) break;
    }
    std::this_thread::sleep_for(50ms);
  }
  (void)worker.shutdown();
  std::lock_guard<std::mutex> lock(sink->mu);
  return sink->records;
}

constexpr int kReadBackRecords = 100000;
constexpr int kReadBackKeys = 200;

// Where the producer said each record went: data -> (sequence number, sub-sequence number).
using Positions = std::map<std::string, std::pair<std::string, std::uint64_t>>;

// Puts kReadBackRecords records of 100 bytes ("key-K:I:" padded with x, record I of key K,
// kReadBackKeys keys) through a producer of `config`, flushes and closes it, and checks that
// each record was answered once and none failed. `where` gets each record's position, `stats`
// the producer's figures.
void put_numbered_records(const ProducerConfig& config,
                          std::shared_ptr<kinesis::KinesisClient> client, Positions& where,
                          ProducerStats& stats) {
  std::vector<std::atomic<int>> resolved(kReadBackRecords);
  std::atomic<int> failures{0};
  std::mutex mu;
  auto producer = made(ProducerAccess::make(config, std::move(client)));
  for (int i = 0; i < kReadBackRecords; ++i) {
    const std::string key = "key-" + std::to_string(i % kReadBackKeys);
    std::string data = key + ":" + std::to_string(i / kReadBackKeys) + ":";
    data.resize(100, 'x');
    producer->put(key, data, "", [&, i, data](Result<PutResult> r) {
      resolved[i].fetch_add(1);
      if (!r.ok()) {
        failures.fetch_add(1);
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      where[data] = {r->sequence_number, r->sub_sequence_number};
    });
  }
  ASSERT_TRUE(producer->flush(300s).ok());
  stats = producer->stats();
  producer.reset();
  for (int i = 0; i < kReadBackRecords; ++i) ASSERT_EQ(resolved[i].load(), 1) << "record " << i;
  EXPECT_EQ(failures.load(), 0);
}

// What the consumer read back: each record once, in order per key, under its key, at the
// position the producer answered; in aggregated mode mostly from aggregates.
void expect_read_back_once_in_key_order(std::vector<Record> records, const Positions& where,
                                        bool aggregate) {
  std::stable_sort(records.begin(), records.end(),
                   [](const Record& a, const Record& b) { return a.shard_id() < b.shard_id(); });
  std::map<std::string, int> next_index;  // per key, the next index expected
  std::set<std::string> seen;
  int aggregated = 0;
  for (const auto& r : records) {
    ASSERT_TRUE(seen.insert(std::string(r.data())).second)
        << "read twice: " << r.data().substr(0, 20);
    // Aggregated mode sends a lone record (nothing else queued for its shard) as it is.
    if (!aggregate) {
      ASSERT_FALSE(r.aggregated());
    }
    if (r.aggregated()) ++aggregated;
    const auto colon = r.data().find(':');
    const std::string key(r.data().substr(0, colon));
    EXPECT_EQ(r.partition_key(), key);
    const int index = std::stoi(std::string(r.data().substr(colon + 1)));
    EXPECT_EQ(index, next_index[key]) << "order of key " << key;
    next_index[key] = index + 1;
    // The producer's answer names the same position the consumer reads.
    auto w = where.find(std::string(r.data()));
    ASSERT_NE(w, where.end());
    EXPECT_EQ(w->second.first, r.sequence_number());
    EXPECT_EQ(w->second.second, r.sub_sequence_number());
  }
  EXPECT_EQ(next_index.size(), static_cast<std::size_t>(kReadBackKeys));
  if (aggregate) {
    EXPECT_GT(aggregated, kReadBackRecords * 9 / 10);
  }
}

// npm aws-kinesis-agg reads kcl-cpp's aggregates (the first 20) as kcl-cpp does.
void expect_aws_kinesis_agg_reads_them(std::vector<std::string> aggregates) {
  ASSERT_FALSE(aggregates.empty());
  aggregates.resize(std::min<std::size_t>(aggregates.size(), 20));
  std::string input;
  std::vector<Record> ours;
  for (const std::string& a : aggregates) {
    input += aws::base64_encode(a) + "\n";
    kinesis::KinesisRecord in;
    in.data = a;
    retrieval::deaggregate(in, "shard", ours);
  }
  auto lines = run_node("deagg", input);
  ASSERT_EQ(lines.size(), ours.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto j = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(j["pk"].get<std::string>(), ours[i].partition_key());
    EXPECT_EQ(j["data"].get<std::string>(), aws::base64_encode(ours[i].data()));
  }
}

class ProducerKinesaliteTest : public ::testing::TestWithParam<bool> {};

TEST_P(ProducerKinesaliteTest, HundredThousandRecordsReadBackOnceInKeyOrder) {
  const bool aggregate = GetParam();
  auto& emu = shared_emulators();
  auto client = make_client(emu.aws_config());
  const std::string stream = unique_name("producer");
  ASSERT_TRUE(client->create_stream(stream, 4).ok());
  ASSERT_TRUE(client->wait_for_active(stream, 30s).ok());

  ProducerConfig config;
  config.stream_name = stream;
  config.aggregate = aggregate;
  Positions where;
  ProducerStats stats;
  ASSERT_NO_FATAL_FAILURE(put_numbered_records(config, client, where, stats));
  std::printf("[producer] %d records, aggregate=%d: %llu PutRecords calls, %llu Kinesis records\n",
              kReadBackRecords, aggregate ? 1 : 0,
              static_cast<unsigned long long>(stats.put_records_calls),
              static_cast<unsigned long long>(stats.kinesis_records_sent));
  if (aggregate) {
    EXPECT_LT(stats.kinesis_records_sent, static_cast<std::uint64_t>(kReadBackRecords / 100));
  } else {
    EXPECT_EQ(stats.kinesis_records_sent, static_cast<std::uint64_t>(kReadBackRecords));
    // Ordered mode puts each key once per call: 200 keys over 4 shards.
    EXPECT_LE(stats.put_records_calls, static_cast<std::uint64_t>(kReadBackRecords / 50));
  }

  // Read back by kcl-cpp's consumer (a worker), in shard order per shard.
  auto records = consume_all(emu.aws_config(), stream, kReadBackRecords);
  ASSERT_EQ(records.size(), static_cast<std::size_t>(kReadBackRecords));
  // The raw aggregates, for the interoperability check.
  std::vector<std::string> aggregates;
  (void)read_all(*client, stream, &aggregates);
  ASSERT_NO_FATAL_FAILURE(expect_read_back_once_in_key_order(std::move(records), where, aggregate));
  if (aggregate) {
    ASSERT_NO_FATAL_FAILURE(expect_aws_kinesis_agg_reads_them(std::move(aggregates)));
  }
  (void)client->delete_stream(stream);
}

INSTANTIATE_TEST_SUITE_P(Aggregation, ProducerKinesaliteTest, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "Aggregated" : "Plain"; });

// The data of every record of `stream` a consumer that follows the Java KCL's rule reads:
// each shard's records deaggregated, then every aggregate holding a record outside the
// shard's hash key range dropped (retrieval::drop_aggregates_outside).
std::multiset<std::string> read_by_the_java_rule(kinesis::KinesisClient& client,
                                                 const std::string& stream, std::size_t& dropped) {
  std::multiset<std::string> out;
  read_shards(client, stream,
              [&](const kinesis::Shard& shard, std::vector<kinesis::KinesisRecord>&& batch) {
                const auto range = retrieval::parse_shard_hash_range(
                    shard.hash_key_range.starting_hash_key, shard.hash_key_range.ending_hash_key);
                ASSERT_TRUE(range.has_value()) << shard.shard_id;
                std::vector<Record> records;
                (void)retrieval::deaggregate_all(std::move(batch), shard.shard_id, records);
                dropped += retrieval::drop_aggregates_outside(records, *range);
                for (const Record& r : records) out.emplace(r.data());
              });
  return out;
}

// A split the producer's map has not seen: its aggregate of records from both halves of the
// parent lands in one child. A consumer following the Java KCL's rule drops that copy, so the
// producer must send the records again (as the KPL does): none is lost to such a consumer,
// neither read from the stream by hand nor by a kcl::Worker with drop_aggregates_outside_shard.
TEST(ProducerKinesaliteTest, AnAggregateOnTheWrongSideOfASplitIsSentAgainSoNoneIsLost) {
  auto& emu = shared_emulators();
  auto client = make_client(emu.aws_config());
  const std::string stream = unique_name("producer-split");
  ASSERT_TRUE(client->create_stream(stream, 1).ok());
  ASSERT_TRUE(client->wait_for_active(stream, 30s).ok());
  ProducerConfig config;
  config.stream_name = stream;
  config.aggregate = true;
  config.linger = 20ms;
  auto log = std::make_shared<testing::CapturedLog>(LogLevel::kInfo);
  Dependencies deps;
  deps.logger = log;
  auto producer = made(ProducerAccess::make(config, client, deps));
  // The map now holds the one shard; split it at the middle of the hash key space.
  ASSERT_TRUE(
      client->split_shard(stream, "shardId-000000000000", "170141183460469231731687303715884105728")
          .ok());
  ASSERT_TRUE(client->wait_for_active(stream, 30s).ok());
  constexpr int kRecords = 200;
  std::vector<std::future<Result<PutResult>>> futures;
  for (int i = 0; i < kRecords; ++i) {
    futures.push_back(producer->put("key-" + std::to_string(i), "record-" + std::to_string(i)));
  }
  ASSERT_TRUE(producer->flush(60s).ok());
  for (int i = 0; i < kRecords; ++i) {
    auto r = futures[i].get();
    ASSERT_TRUE(r.ok()) << i << ": " << r.status().message();
    EXPECT_NE(r->shard_id, "shardId-000000000000") << i;
  }
  const ProducerStats stats = producer->stats();
  EXPECT_GE(stats.shard_map_refreshes, 1u);
  EXPECT_GE(stats.records_retried, static_cast<std::uint64_t>(kRecords));
  const std::vector<std::string> lines = log->lines();
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
    return line.find("KPL aggregate(s) written to another shard than the old map said") !=
           std::string::npos;
  })) << ::testing::PrintToString(lines);
  producer.reset();

  std::size_t dropped = 0;
  const std::multiset<std::string> read = read_by_the_java_rule(*client, stream, dropped);
  EXPECT_GE(dropped, 1u) << "the copy on the wrong side of the split is there to be dropped";
  for (int i = 0; i < kRecords; ++i) {
    EXPECT_EQ(read.count("record-" + std::to_string(i)), 1u) << "record-" << i;
  }

  RetrievalConfig retrieval;
  retrieval.drop_aggregates_outside_shard = true;
  const auto records = consume_all(emu.aws_config(), stream, kRecords, retrieval);
  std::multiset<std::string> delivered;
  for (const Record& r : records) delivered.emplace(r.data());
  for (int i = 0; i < kRecords; ++i) {
    EXPECT_EQ(delivered.count("record-" + std::to_string(i)), 1u) << "record-" << i;
  }
  (void)client->delete_stream(stream);
}

TEST(ProducerInteropTest, KclDeaggregatesAggregatesBuiltByAwsKinesisAgg) {
  std::string input;
  std::vector<std::tuple<std::string, std::string, std::string>> sent;
  for (int i = 0; i < 50; ++i) {
    std::string pk = "pk-" + std::to_string(i % 7);
    std::string ehk = i % 5 == 0 ? std::to_string(1000000 + i) : "";
    std::string data =
        "payload " + std::to_string(i) + std::string(static_cast<std::size_t>(i), '\x01');
    nlohmann::json j = {{"pk", pk}, {"data", aws::base64_encode(data)}};
    if (!ehk.empty()) j["ehk"] = ehk;
    input += j.dump() + "\n";
    sent.emplace_back(pk, ehk, data);
  }
  auto lines = run_node("agg", input);
  ASSERT_EQ(lines.size(), 1u);
  auto bytes = aws::base64_decode(lines[0]);
  ASSERT_TRUE(bytes.ok());
  kinesis::KinesisRecord in;
  in.sequence_number = "1";
  in.partition_key = "pk-0";
  in.data = *bytes;
  std::vector<Record> out;
  auto result = retrieval::deaggregate(in, "shardId-0", out);
  ASSERT_EQ(result.outcome, retrieval::DeaggregationOutcome::kDeaggregated) << result.reason;
  ASSERT_EQ(out.size(), sent.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].partition_key(), std::get<0>(sent[i]));
    EXPECT_EQ(out[i].data(), std::get<2>(sent[i]));
    EXPECT_EQ(out[i].sub_sequence_number(), i);
  }
}

// A PutRecords server whose answers are scripted per record: each record (by its data) fails
// its first `fail_times(data)` sends with `error_code(data)`; every `error_every`-th call
// answers HTTP 500 as a whole. Aggregates are deaggregated with kcl-cpp's deaggregator and
// judged by their first sub-record.
class ScriptedKinesis {
 public:
  std::function<int(const std::string&)> fail_times = [](const std::string&) { return 0; };
  std::function<std::string(const std::string&)> error_code = [](const std::string&) {
    return std::string("ProvisionedThroughputExceededException");
  };
  int error_every = 0;
  // The shard every successful record is said to land on.
  std::string answer_shard = "shardId-000000000000";
  std::atomic<int> list_shards_calls{0};

  testing::CannedResponse handle(const testing::ServedRequest& req) {
    const std::string target = req.header("x-amz-target");
    testing::CannedResponse resp;
    resp.headers = {{"Content-Type", "application/x-amz-json-1.1"}};
    if (target.ends_with("ListShards")) {
      ++list_shards_calls;
      resp.body =
          R"({"Shards":[{"ShardId":"shardId-000000000000","HashKeyRange":{)"
          R"("StartingHashKey":"0","EndingHashKey":"340282366920938463463374607431768211455"},)"
          R"("SequenceNumberRange":{"StartingSequenceNumber":"1"}}]})";
      return resp;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    if (error_every > 0 && calls_ % error_every == 0) {
      resp.status = 500;
      resp.body = R"({"__type":"InternalFailure","message":"scripted"})";
      return resp;
    }
    auto body = nlohmann::json::parse(req.body);
    nlohmann::json records = nlohmann::json::array();
    int failed = 0;
    for (const auto& r : body["Records"]) {
      auto data = aws::base64_decode(r["Data"].get<std::string>());
      std::vector<Record> subs;
      const std::string sequence_number = std::to_string(++seq_);
      const std::string partition_key = r["PartitionKey"].get<std::string>();
      kinesis::KinesisRecord kr;
      kr.sequence_number = sequence_number;
      kr.data = *data;
      kr.partition_key = partition_key;
      retrieval::deaggregate(kr, "shardId-000000000000", subs);
      const std::string first(subs.front().data());
      if (sends_[first]++ < fail_times(first)) {
        ++failed;
        records.push_back({{"ErrorCode", error_code(first)}, {"ErrorMessage", "scripted"}});
        continue;
      }
      for (auto& s : subs) accepted_.emplace_back(s.data());
      records.push_back({{"ShardId", answer_shard}, {"SequenceNumber", kr.sequence_number}});
    }
    resp.body = nlohmann::json{{"FailedRecordCount", failed}, {"Records", records}}.dump();
    return resp;
  }
  std::vector<std::string> accepted() {
    std::lock_guard<std::mutex> lock(mu_);
    return accepted_;
  }

 private:
  std::mutex mu_;
  int calls_ = 0;
  std::uint64_t seq_ = 0;
  std::map<std::string, int> sends_;
  std::vector<std::string> accepted_;
};

std::shared_ptr<kinesis::KinesisClient> client_for(const testing::LocalHttpServer& server) {
  AwsConfig config;
  config.region = "us-east-1";
  config.kinesis_endpoint_url = server.url();
  config.credentials = StaticCredentials{"AKIDKCLTESTEXAMPLE", "kcl-test-fake-secret-key", ""};
  config.retry.base_delay = 1ms;
  config.retry.max_backoff = 20ms;
  return make_client(config);
}

// A scripted PutRecords server on loopback and a producer configuration for its stream.
class ScriptedProducerTest : public ::testing::Test {
 protected:
  ScriptedProducerTest() { config.stream_name = "scripted"; }
  ScriptedKinesis script;
  testing::LocalHttpServer server{
      [this](const testing::ServedRequest& r) { return script.handle(r); }};
  ProducerConfig config;
};

class ProducerFaultTest : public ::testing::TestWithParam<bool> {};

TEST_P(ProducerFaultTest, PartialFailuresAnd500sLoseAndDuplicateNothing) {
  ScriptedKinesis script;
  script.fail_times = [](const std::string& d) {
    const auto h = std::hash<std::string>{}(d);
    return h % 3 == 0 ? 2 : (h % 3 == 1 ? 1 : 0);
  };
  script.error_code = [](const std::string& d) {
    return std::hash<std::string>{}(d) % 2 == 0 ? "ProvisionedThroughputExceededException"
                                                : "InternalFailure";
  };
  script.error_every = 4;
  testing::LocalHttpServer server(
      [&](const testing::ServedRequest& r) { return script.handle(r); });
  ProducerConfig config;
  config.stream_name = "scripted";
  config.aggregate = GetParam();
  config.aggregation_max_bytes = 2000;  // several aggregates per call
  config.linger = 5ms;
  config.shard_bytes_per_second = 0;
  config.shard_records_per_second = 0;
  auto producer = made(ProducerAccess::make(config, client_for(server)));
  constexpr int kRecords = 3000;
  std::vector<std::atomic<int>> resolved(kRecords);
  std::atomic<int> ok{0};
  for (int i = 0; i < kRecords; ++i) {
    producer->put("k" + std::to_string(i % 10), "record-" + std::to_string(i), "",
                  [&, i](Result<PutResult> r) {
                    resolved[i].fetch_add(1);
                    if (r.ok()) ok.fetch_add(1);
                  });
  }
  ASSERT_TRUE(producer->flush(120s).ok());
  const auto stats = producer->stats();
  producer.reset();
  for (int i = 0; i < kRecords; ++i) ASSERT_EQ(resolved[i].load(), 1) << "record " << i;
  EXPECT_EQ(ok.load(), kRecords);
  EXPECT_GT(stats.records_retried, 0u);
  EXPECT_GT(stats.throttled, 0u);
  auto accepted = script.accepted();
  std::set<std::string> unique(accepted.begin(), accepted.end());
  EXPECT_EQ(unique.size(), accepted.size()) << "duplicates written";
  EXPECT_EQ(accepted.size(), static_cast<std::size_t>(kRecords));
  // Per key order: the server saw each key's records in put order.
  std::map<std::string, int> last;
  for (const auto& d : accepted) {
    const int i = std::stoi(d.substr(7));
    const std::string key = "k" + std::to_string(i % 10);
    auto it = last.find(key);
    if (it != last.end()) {
      EXPECT_LT(it->second, i) << key;
    }
    last[key] = i;
  }
}

INSTANTIATE_TEST_SUITE_P(Aggregation, ProducerFaultTest, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "Aggregated" : "Plain"; });

TEST(ProducerFaultTest, ExhaustedBudgetAndNonRetryableErrorsCarryTheServiceCode) {
  ScriptedKinesis script;
  script.fail_times = [](const std::string& d) { return d.starts_with("ok") ? 0 : 1000; };
  script.error_code = [](const std::string& d) {
    return d.starts_with("kms") ? "KMSAccessDeniedException"
                                : "ProvisionedThroughputExceededException";
  };
  testing::LocalHttpServer server(
      [&](const testing::ServedRequest& r) { return script.handle(r); });
  ProducerConfig config;
  config.stream_name = "scripted";
  config.aggregate = false;
  config.linger = 1ms;
  config.max_attempts = 3;
  auto producer = made(ProducerAccess::make(config, client_for(server)));
  auto throttled = producer->put("a", "throttled");
  auto kms = producer->put("b", "kms");
  auto fine = producer->put("c", "ok");
  auto bad_key = producer->put("", "x");
  auto bad_ehk = producer->put("d", "x", "12a");
  // 256 characters as AWS counts them (UTF-16), not bytes: 100 CJK characters (300 bytes)
  // are a good key, 257 ASCII ones are not.
  std::string cjk;
  for (int i = 0; i < 100; ++i) cjk += "\xe7\x95\x8c";  // U+754C
  auto wide_key = producer->put(cjk, "ok-wide");
  auto long_key = producer->put(std::string(257, 'k'), "x");
  auto t = throttled.get();
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("ProvisionedThroughputExceededException"), std::string::npos);
  EXPECT_NE(t.status().message().find("after 3 attempts"), std::string::npos)
      << t.status().message();
  auto k = kms.get();
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("KMSAccessDeniedException"), std::string::npos);
  EXPECT_NE(k.status().message().find("after 1 attempts"), std::string::npos)
      << k.status().message();
  auto f = fine.get();
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->shard_id, "shardId-000000000000");
  EXPECT_EQ(bad_key.get().status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_ehk.get().status().code(), StatusCode::kInvalidArgument);
  auto w = wide_key.get();
  EXPECT_TRUE(w.ok()) << w.status().message();
  auto l = long_key.get();
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("got 257"), std::string::npos) << l.status().message();
  EXPECT_EQ(script.accepted(), (std::vector<std::string>{"ok", "ok-wide"}));
}

// The callback that gets the record back: a failed record comes back whole (data, keys), a
// written one too, each once; a key that is not UTF-8 fails that record alone, before it is
// sent, and the records around it are written.
TEST_F(ScriptedProducerTest, ARecordCallbackGetsEachRecordBackOnceWithItsOutcome) {
  script.fail_times = [](const std::string& d) { return d.starts_with("fails") ? 1000 : 0; };
  script.error_code = [](const std::string&) { return std::string("KMSAccessDeniedException"); };
  config.linger = 1ms;
  config.aggregate = false;
  auto producer = made(ProducerAccess::make(config, client_for(server)));
  std::mutex mu;
  std::map<std::string, std::pair<int, UserRecord>> back;  // by data: times, the record
  std::map<std::string, Status> outcome;
  auto keep = [&](Result<PutResult> r, UserRecord record) {
    std::lock_guard<std::mutex> lock(mu);
    const std::string data = record.data;
    outcome[data] = r.ok() ? Status::Ok() : r.status();
    ++back[data].first;
    back[data].second = std::move(record);
  };
  producer->put("k1", "written", "", keep);
  producer->put("k2", "fails", "12345", keep);
  producer->put(std::string("\xff\xfe", 2), "bad key", "", keep);
  producer->put("k3", "written too", "", keep);
  ASSERT_TRUE(producer->flush(30s).ok());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(back.size(), 4u);
  for (const auto& [data, times] : back) EXPECT_EQ(times.first, 1) << data;
  EXPECT_TRUE(outcome["written"].ok());
  EXPECT_TRUE(outcome["written too"].ok());
  EXPECT_EQ(back["written"].second.partition_key, "k1");
  EXPECT_NE(outcome["fails"].message().find("KMSAccessDeniedException"), std::string::npos);
  EXPECT_EQ(back["fails"].second.partition_key, "k2");
  EXPECT_EQ(back["fails"].second.explicit_hash_key, "12345");
  EXPECT_EQ(outcome["bad key"].code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outcome["bad key"].message().find("UTF-8"), std::string::npos);
  EXPECT_EQ(back["bad key"].second.partition_key, std::string("\xff\xfe", 2));
  EXPECT_EQ(script.accepted(), (std::vector<std::string>{"written", "written too"}));
}

TEST_F(ScriptedProducerTest, FailFastWhenTheBufferIsFull) {
  config.linger = 60s;  // nothing leaves the buffer until flush
  config.max_buffered_records = 10;
  config.block_when_full = false;
  auto producer = made(ProducerAccess::make(config, client_for(server)));
  std::vector<std::future<Result<PutResult>>> futures;
  for (int i = 0; i < 11; ++i) futures.push_back(producer->put("k", "r" + std::to_string(i)));
  auto rejected = futures.back().get();
  EXPECT_EQ(rejected.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(rejected.status().message().find("buffer full"), std::string::npos);
  ASSERT_TRUE(producer->flush(30s).ok());
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(futures[static_cast<std::size_t>(i)].get().ok());
}

// A callback that puts a failed record again while the buffer is full runs on the thread
// that answers the records making room: waiting there would wait for itself (with one
// request thread, for ever). The record is taken at once instead.
TEST_F(ScriptedProducerTest, APutFromACallbackWhileTheBufferIsFullDoesNotWaitForItself) {
  script.fail_times = [](const std::string& d) { return d == "x" ? 1000 : 0; };
  script.error_code = [](const std::string&) { return std::string("KMSAccessDeniedException"); };
  config.linger = 1ms;
  config.aggregate = false;
  config.max_concurrent_requests = 1;
  config.max_buffered_records = 2;
  auto producer = made(ProducerAccess::make(config, client_for(server)));
  std::atomic<int> again{0};
  Producer* p = producer.get();
  producer->put("k", "x", "", [&, p](Result<PutResult> r, UserRecord) {
    if (!r.ok() && again.fetch_add(1) == 0) (void)p->put("k", "again");
  });
  producer->put("k", "y");
  ASSERT_TRUE(producer->flush(30s).ok()) << "the request thread waited for itself";
  EXPECT_EQ(again.load(), 1);
  auto accepted = script.accepted();
  std::sort(accepted.begin(), accepted.end());
  EXPECT_EQ(accepted, (std::vector<std::string>{"again", "y"}));
}

// One partition key, its second record naming its shard by an explicit hash key (the same
// shard): still one key, so the two never share a call and a retry of the first keeps it
// ahead of the second.
TEST_F(ScriptedProducerTest, AKeysOrderHoldsWhenOneOfItsRecordsHasAnExplicitHashKey) {
  script.fail_times = [](const std::string& d) { return d == "first" ? 1 : 0; };
  config.linger = 50ms;
  config.aggregate = false;
  auto producer = made(ProducerAccess::make(config, client_for(server)));
  const std::string ehk = producer::hash_key_to_string(producer::partition_key_hash("k"));
  auto first = producer->put("k", "first");
  auto second = producer->put("k", "second", ehk);
  ASSERT_TRUE(first.get().ok());
  ASSERT_TRUE(second.get().ok());
  EXPECT_EQ(script.accepted(), (std::vector<std::string>{"first", "second"}));
}

TEST_F(ScriptedProducerTest, ItsThreadsAreNamedAndGoneAfterShutdown) {
  config.max_concurrent_requests = 3;
  auto producer = made(ProducerAccess::make(config, client_for(server)));
  auto named = [](const std::string& name, int count) {
    return testing::eventually([&] { return testing::thread_names()[name] == count; });
  };
  // No sender thread: the request threads plan in turn.
  EXPECT_TRUE(named("kcl-put-call", 3)) << testing::thread_names()["kcl-put-call"];
  EXPECT_EQ(testing::thread_names().count("kcl-put-send"), 0u);
  ASSERT_TRUE(producer->shutdown().ok());
  EXPECT_EQ(testing::thread_names().count("kcl-put-send"), 0u);
  EXPECT_EQ(testing::thread_names().count("kcl-put-call"), 0u);
}

TEST_F(ScriptedProducerTest, ARecordOnAnUnexpectedShardRefreshesTheShardMap) {
  script.answer_shard = "shardId-000000000009";
  config.linger = 1ms;
  auto producer = made(ProducerAccess::make(config, client_for(server)));
  auto r = producer->put("k", "v").get();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->shard_id, "shardId-000000000009");
  EXPECT_TRUE(testing::eventually([&] { return script.list_shards_calls.load() >= 2; }, 30s))
      << script.list_shards_calls.load() << " ListShards calls";
}

// report_positions = false: a written record resolves without its shard and sequence number,
// and a record the service put on a shard the map did not predict still refreshes the map.
TEST_F(ScriptedProducerTest, WithoutPositionsARecordResolvesAndAStaleMapStillRefreshes) {
  script.answer_shard = "shardId-000000000009";
  config.linger = 1ms;
  config.report_positions = false;
  auto producer = made(ProducerAccess::make(config, client_for(server)));
  auto r = producer->put("k", "v").get();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->shard_id.empty());
  EXPECT_TRUE(r->sequence_number.empty());
  EXPECT_EQ(r->attempts, 1);
  EXPECT_TRUE(testing::eventually([&] { return script.list_shards_calls.load() >= 2; }, 30s))
      << script.list_shards_calls.load() << " ListShards calls";
  EXPECT_EQ(script.accepted(), std::vector<std::string>{"v"});
}

TEST_F(ScriptedProducerTest, ClosingWithoutTimeToSendCancelsWhatIsLeftOnce) {
  config.linger = 60s;
  config.close_timeout = 0ms;
  std::vector<std::future<Result<PutResult>>> futures;
  {
    auto producer = made(ProducerAccess::make(config, client_for(server)));
    for (int i = 0; i < 5; ++i) futures.push_back(producer->put("k", "r" + std::to_string(i)));
  }
  for (auto& f : futures) {
    auto r = f.get();
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().message();
    }
  }
}

TEST(ProducerKinesaliteTest, CreateWritesWithTheAwsConfigAndReportsWhatStopsIt) {
  auto& emu = shared_emulators();
  auto client = make_client(emu.aws_config());
  const std::string stream = unique_name("producer-public");
  ASSERT_TRUE(client->create_stream(stream, 1).ok());
  ASSERT_TRUE(client->wait_for_active(stream, 30s).ok());
  ProducerConfig config;
  config.stream_name = stream;
  config.aws = emu.aws_config();
  {
    auto producer = Producer::create(config);
    ASSERT_TRUE(producer.ok()) << producer.status();
    auto r = (*producer)->put("k", "hello").get();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(r->sequence_number.empty());
    EXPECT_TRUE((*producer)->shutdown().ok());
  }
  auto records = read_all(*client, stream);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].data(), "hello");

  // Bad configuration: every problem listed, no exception.
  ProducerConfig bad;
  bad.max_attempts = 0;
  auto refused = Producer::create(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("stream_name is required"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("max_attempts"), std::string::npos) << refused.status();
  // A stream that does not exist: kNotFound naming it.
  ProducerConfig missing = config;
  missing.stream_name = unique_name("no-such-stream");
  auto absent = Producer::create(missing);
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound) << absent.status();
  EXPECT_NE(absent.status().message().find(missing.stream_name), std::string::npos)
      << absent.status();
  (void)client->delete_stream(stream);
}

// Counts the metric points by name and tag value.
class CountingSink final : public MetricsSink {
 public:
  void count(std::string_view name, double value, MetricTags tags) override {
    std::lock_guard<std::mutex> lock(mu_);
    counts_[key(name, tags)] += value;
  }
  void gauge(std::string_view, double, MetricTags) override {}
  void timing(std::string_view name, std::chrono::nanoseconds, MetricTags tags) override {
    std::lock_guard<std::mutex> lock(mu_);
    counts_[key(name, tags)] += 1;
  }
  double get(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_[key];
  }

 private:
  static std::string key(std::string_view name, MetricTags tags) {
    std::string k(name);
    for (const MetricTag& t : tags) k += " " + std::string(t.value);
    return k;
  }
  std::mutex mu_;
  std::map<std::string, double> counts_;
};

// shutdown() refuses what is put after it, sends what was buffered first, and says so the
// same way each time; begin_shutdown() returns one future; metrics and log lines go to the
// injected sink and logger: whole calls failing are logged once per series, not per retry.
TEST_F(ScriptedProducerTest, ShutdownMetricsAndOneLogLinePerSeriesOfFailingCalls) {
  script.error_every = 2;  // every second PutRecords call fails as a whole (500)
  config.linger = 1ms;
  config.max_attempts = 10;
  auto sink = std::make_shared<CountingSink>();
  auto logger = std::make_shared<testing::CapturedLog>(LogLevel::kInfo);
  Dependencies deps;
  deps.metrics = sink;
  deps.logger = logger;
  auto producer = made(ProducerAccess::make(config, client_for(server), deps));
  std::vector<std::future<Result<PutResult>>> futures;
  for (int i = 0; i < 20; ++i) {
    futures.push_back(producer->put("k" + std::to_string(i), "r" + std::to_string(i)));
    if (i % 5 == 4) {
      ASSERT_TRUE(producer->flush(30s).ok());
    }
  }
  std::shared_future<Status> stopped = producer->begin_shutdown();
  EXPECT_TRUE(stopped.get().ok()) << stopped.get();
  EXPECT_TRUE(producer->shutdown().ok());
  for (auto& f : futures) EXPECT_TRUE(f.get().ok());
  auto late = producer->put("k", "after").get();
  EXPECT_EQ(late.status().code(), StatusCode::kCancelled) << late.status();

  EXPECT_EQ(sink->get("producer.records_succeeded"), 20);
  EXPECT_GE(sink->get("producer.put_records_calls failed"), 1);
  EXPECT_GE(sink->get("producer.put_records_calls ok"), 1);
  EXPECT_EQ(sink->get("producer.put_records_time ok") +
                sink->get("producer.put_records_time failed") +
                sink->get("producer.put_records_time partial"),
            static_cast<double>(producer->stats().put_records_calls));
  int failing = 0, recovered = 0;
  for (const std::string& line : logger->lines()) {
    if (line.find("PutRecords to stream 'scripted' failed") != std::string::npos) ++failing;
    if (line.find("PutRecords to stream 'scripted' recovered") != std::string::npos) ++recovered;
  }
  EXPECT_GE(failing, 1);
  EXPECT_EQ(failing, recovered) << "each series of failing calls ends with one recovery line";
}

// A put() callback runs on a producer thread, which shutdown() waits for: there it begins
// the stop and says so instead of hanging.
TEST_F(ScriptedProducerTest, ShutdownInsideACallbackBeginsTheStop) {
  config.linger = 1ms;
  auto producer = made(ProducerAccess::make(config, client_for(server)));
  std::promise<Status> inside;
  producer->put("k", "v", "", [&](Result<PutResult> r) {
    EXPECT_TRUE(r.ok());
    inside.set_value(producer->shutdown());
  });
  const Status s = inside.get_future().get();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(producer->begin_shutdown().get().ok());
}

}  // namespace
}  // namespace kcl::producer
