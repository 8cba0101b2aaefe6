// KPL deaggregation throughput, against a same-run memcpy of the same bytes.
//
// Input: 1000 aggregates, each of 100 sub-records of 100 random bytes with distinct partition
// keys (about 11.8 KB per aggregate, 11.8 MB in all). Reported per benchmark: MB/s of
// aggregate bytes and records/s of sub-records; at the end, each one's speed as a fraction of
// the memcpy baseline from this same run.
//
//   cmake --build build-kpl --target bench_kpl_deaggregate && build-kpl/bench/bench_kpl_deaggregate
#include <benchmark/benchmark.h>
#include <openssl/evp.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kpl/kpl_format.h"
#include "kpl/protobuf_wire.h"
#include "retrieval/kpl_deaggregator.h"

namespace {

using kcl::retrieval::deaggregate;
namespace pb = kcl::kpl::pb;
namespace agg_field = kcl::kpl::aggregated_record;
namespace rec_field = kcl::kpl::record;

constexpr int kAggregates = 1000;
constexpr int kSubRecords = 100;
constexpr std::size_t kDataBytes = 100;
constexpr std::string_view kShard = "shardId-000000000042";

// OpenSSL's one-call MD5, for BM_Md5Only.
std::string md5(std::string_view bytes) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), d, &n, EVP_md5(), nullptr);
  return std::string(reinterpret_cast<const char*>(d), n);
}

struct Input {
  // What the records' views point into (as a GetRecords answer's buffer would be).
  std::shared_ptr<kcl::kinesis::RecordsBuffer> buffer =
      std::make_shared<kcl::kinesis::RecordsBuffer>();
  std::vector<kcl::kinesis::KinesisRecord> records;
  std::size_t bytes = 0;
  std::size_t sub_records = 0;
};

const Input& input() {
  static const Input in = [] {
    Input r;
    r.buffer->shard_id = kShard;
    std::mt19937_64 rng(42);
    for (int a = 0; a < kAggregates; ++a) {
      std::string aggregate;
      kcl::kpl::append_magic(aggregate);
      for (int i = 0; i < kSubRecords; ++i) {
        pb::append_bytes_field(aggregate, agg_field::kPartitionKeyTable,
                               "pk-" + std::to_string(a) + "-" + std::to_string(i));
      }
      for (int i = 0; i < kSubRecords; ++i) {
        std::string data(kDataBytes, '\0');
        for (char& c : data) c = static_cast<char>(rng());
        std::string rec;
        pb::append_varint_field(rec, rec_field::kPartitionKeyIndex, static_cast<std::uint64_t>(i));
        pb::append_bytes_field(rec, rec_field::kData, data);
        pb::append_bytes_field(aggregate, agg_field::kRecords, rec);
      }
      kcl::kpl::append_digest(aggregate);
      kcl::kinesis::KinesisRecord k;
      auto& kept = r.buffer->unescaped;
      k.sequence_number = kept.emplace_back("4959033827149025660855969253836157109592157598913658" +
                                            std::to_string(1000 + a));
      k.partition_key = "outer";
      k.data = kept.emplace_back(std::move(aggregate));
      r.bytes += k.data.size();
      r.sub_records += kSubRecords;
      r.records.push_back(std::move(k));
    }
    return r;
  }();
  return in;
}

void set_counters(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(input().bytes));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(input().sub_records));
}

// Baseline: copy every aggregate's bytes once.
void BM_MemcpyBaseline(benchmark::State& state) {
  const Input& in = input();
  std::string buffer(in.records.front().data.size() * 2, '\0');
  for (auto _ : state) {
    for (const auto& r : in.records) {
      std::memcpy(buffer.data(), r.data.data(), r.data.size());
      benchmark::DoNotOptimize(buffer.data());
      benchmark::ClobberMemory();
    }
  }
  set_counters(state);
}
BENCHMARK(BM_MemcpyBaseline);

// The MD5 check alone, to show its share of the work.
void BM_Md5Only(benchmark::State& state) {
  const Input& in = input();
  for (auto _ : state) {
    for (const auto& r : in.records) {
      std::string d = md5(std::string_view(r.data).substr(4, r.data.size() - 20));
      benchmark::DoNotOptimize(d.data());
    }
  }
  set_counters(state);
}
BENCHMARK(BM_Md5Only);

// Full deaggregation into kcl::Record values (MD5, parse, one Record per sub-record).
void BM_Deaggregate(benchmark::State& state) {
  const Input& in = input();
  const std::shared_ptr<const void> owner = in.buffer;
  std::vector<kcl::Record> out;
  out.reserve(kSubRecords);
  std::size_t produced = 0;
  for (auto _ : state) {
    for (const auto& r : in.records) {
      out.clear();
      auto res = deaggregate(r, in.buffer->shard_id, owner, out);
      produced += res.records_appended;
      benchmark::DoNotOptimize(out.data());
    }
  }
  if (produced != static_cast<std::size_t>(state.iterations()) * in.sub_records) {
    state.SkipWithError("deaggregation produced the wrong number of records");
  }
  set_counters(state);
}
BENCHMARK(BM_Deaggregate);

// Collects bytes_per_second per benchmark, then prints each against the baseline.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      // With --benchmark_repetitions, the median stands for the benchmark.
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.error_occurred || !(median || run.run_type == Run::RT_Iteration)) continue;
      auto bytes = run.counters.find("bytes_per_second");
      auto items = run.counters.find("items_per_second");
      if (bytes == run.counters.end() || items == run.counters.end()) continue;
      const std::string name = run.run_name.function_name;
      if (median || !medians_.count(name))
        results_[name] = {bytes->second.value, items->second.value};
      if (median) medians_.insert(name);
    }
  }

  void PrintSummary() const {
    auto base = results_.find("BM_MemcpyBaseline");
    if (base == results_.end()) return;
    std::printf("\n%-22s %12s %16s %14s\n", "benchmark", "MB/s", "records/s", "vs memcpy");
    for (const auto& [name, r] : results_) {
      std::printf("%-22s %12.1f %16.0f %13.4fx\n", name.c_str(), r.bytes_per_second / 1e6,
                  r.items_per_second, r.bytes_per_second / base->second.bytes_per_second);
    }
  }

 private:
  struct Rates {
    double bytes_per_second;
    double items_per_second;
  };
  std::map<std::string, Rates> results_;
  std::set<std::string> medians_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const Input& in = input();
  std::printf("input: %d aggregates x %d sub-records x %zu bytes = %zu bytes of aggregates\n",
              kAggregates, kSubRecords, kDataBytes, in.bytes);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintSummary();
  benchmark::Shutdown();
  return 0;
}
