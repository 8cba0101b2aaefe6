// kcl::Producer throughput and CPU per record for 100-byte records, plain and KPL-aggregated,
// against a same-run memcpy of the same bytes (the baseline). The Kinesis service is an
// in-process AwsJsonClient that answers ListShards with one shard and every PutRecords with
// success for all its records (answers built once per record count), so the figures are the
// producer's own cost (queueing,
// aggregation, MD5, JSON and base64 of the request, parsing the answer), with no network.
// Per-shard rate limits are off (they would measure the limit, not the producer). The row
// "plain, no pos." is plain with report_positions = false (as `kcl put` runs it): answers
// parsed without the shard id and sequence number strings.
//
//   build/release/bench/bench_producer_throughput [records, default 200000]
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "aws/aws_json_client.h"
#include "kcl/producer.h"
#include "kinesis/kinesis_client.h"
#include "producer/kpl_aggregator.h"
#include "producer/producer_access.h"

namespace {

class InstantKinesis : public kcl::aws::AwsJsonClient {
 public:
  // One shard over the whole hash key range: every answer names it, so the producer's map
  // is never contradicted (one sender, one call in flight: the producer's serial cost).
  InstantKinesis()
      : list_shards_(R"({"Shards":[{"ShardId":"shardId-000000000000","HashKeyRange":{)"
                     R"("StartingHashKey":"0","EndingHashKey":")" +
                     kcl::producer::hash_key_to_string(~kcl::producer::HashKey{0}) +
                     R"("},"SequenceNumberRange":{"StartingSequenceNumber":"1"}}]})") {}
  kcl::Result<std::string> call(std::string_view operation, std::string body,
                                const kcl::aws::CallOptions&) override {
    if (operation == "ListShards") return list_shards_;
    // One success per record of the request; the answer for each record count is built
    // once (the figures are the producer's cost, not this fake's).
    std::size_t n = 0;
    for (std::size_t at = body.find("\"PartitionKey\""); at != std::string::npos;
         at = body.find("\"PartitionKey\"", at + 14)) {
      ++n;
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::string& out = answers_[n];
    if (out.empty()) {
      out = R"({"FailedRecordCount":0,"Records":[)";
      for (std::size_t i = 0; i < n; ++i) {
        if (i > 0) out += ',';
        out +=
            R"({"ShardId":"shardId-000000000000","SequenceNumber":"49590338271490256608559692538361571095921575989136588898"})";
      }
      out += "]}";
    }
    return out;
  }
  const std::string& endpoint() const override { return endpoint_; }
  const std::string& region() const override { return region_; }

 private:
  std::string list_shards_;
  std::mutex mu_;
  std::map<std::size_t, std::string> answers_;  // by record count
  std::string endpoint_ = "in-process";
  std::string region_ = "us-east-1";
};

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Figures {
  double records_per_second;
  double cpu_ns_per_record;
  unsigned long long calls;
};

Figures run_producer(bool aggregate, bool positions, const std::vector<std::string>& keys,
                     const std::vector<std::string>& data) {
  kcl::ProducerConfig config;
  config.stream_name = "bench";
  config.aggregate = aggregate;
  config.report_positions = positions;
  config.linger = std::chrono::milliseconds(10);
  config.shard_bytes_per_second = 0;
  config.shard_records_per_second = 0;
  auto client = std::make_shared<kcl::kinesis::KinesisClient>(std::make_shared<InstantKinesis>());
  auto made = kcl::producer::ProducerAccess::make(config, client);
  if (!made.ok()) std::abort();
  auto producer = std::move(made).value();
  const auto wall0 = std::chrono::steady_clock::now();
  const double cpu0 = cpu_seconds();
  for (std::size_t i = 0; i < data.size(); ++i) {
    producer->put(keys[i % keys.size()], data[i], "", [](kcl::Result<kcl::PutResult> r) {
      if (!r.ok()) std::abort();
    });
  }
  if (!producer->flush().ok()) std::abort();
  const double cpu = cpu_seconds() - cpu0;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const auto n = static_cast<double>(data.size());
  return {n / wall, cpu * 1e9 / n,
          static_cast<unsigned long long>(producer->stats().put_records_calls)};
}

Figures run_memcpy(const std::vector<std::string>& data) {
  std::vector<char> buffer(data.size() * 100);
  const auto wall0 = std::chrono::steady_clock::now();
  const double cpu0 = cpu_seconds();
  std::size_t at = 0;
  for (const auto& d : data) {
    std::memcpy(buffer.data() + at, d.data(), d.size());
    at += d.size();
  }
  volatile char sink = buffer[buffer.size() / 2];
  (void)sink;
  const double cpu = cpu_seconds() - cpu0;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const auto n = static_cast<double>(data.size());
  return {n / wall, cpu * 1e9 / n, 0};
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t records = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 200000;
  std::vector<std::string> keys;
  for (int i = 0; i < 1000; ++i) keys.push_back("customer-" + std::to_string(i));
  std::vector<std::string> data;
  data.reserve(records);
  for (std::size_t i = 0; i < records; ++i) {
    std::string d = "record " + std::to_string(i) + " ";
    d.resize(100, static_cast<char>('a' + i % 26));
    data.push_back(std::move(d));
  }
  const Figures base = run_memcpy(data);
  // Without positions first: a run that goes first pays for the allocator's fresh memory.
  const Figures plain_no_positions = run_producer(false, false, keys, data);
  const Figures plain = run_producer(false, true, keys, data);
  const Figures agg = run_producer(true, true, keys, data);
  std::printf("%zu records of 100 bytes, 1000 partition keys, 1 shard (in-process service)\n",
              records);
  std::printf("%-15s %14s %16s %12s %16s\n", "run", "records/s", "CPU ns/record", "calls",
              "CPU vs memcpy");
  auto row = [&](const char* name, const Figures& f) {
    std::printf("%-15s %14.0f %16.1f %12llu %15.0fx\n", name, f.records_per_second,
                f.cpu_ns_per_record, f.calls, f.cpu_ns_per_record / base.cpu_ns_per_record);
  };
  row("memcpy", base);
  row("plain", plain);
  row("plain, no pos.", plain_no_positions);
  row("aggregated", agg);
  return 0;
}
