// The JSON lines `kcl consume` and `kcl tail` print (tools/kcl/record_lines.h): a batch of
// 10,000 records of 100 B, shaped as kinesalite gives them (a 20-character shard id, 56-digit
// sequence numbers, short partition keys), written into a LineBuffer (what both commands
// use) and into a std::string, beside a memcpy of the same text (the baseline).
//
//   build/release/bench/bench_record_lines
#include "record_lines.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "kcl/record.h"

namespace {

constexpr int kRecords = 10000;

std::vector<kcl::Record> batch() {
  std::vector<kcl::Record> records;
  const auto arrival = std::chrono::system_clock::time_point(std::chrono::seconds(1796000000));
  for (int i = 0; i < kRecords; ++i) {
    kcl::Record r;
    r.set_shard_id("shardId-000000000001");
    std::string sequence = "49680676604854159137722578388757824695185720204612075522";
    sequence.replace(sequence.size() - 6, 6, std::to_string(100000 + i));
    r.set_sequence_number(sequence);
    r.set_partition_key(std::to_string(i * 13));
    r.set_approximate_arrival_timestamp(arrival + std::chrono::milliseconds(i / 10));
    r.set_data(std::string(100, static_cast<char>('a' + i % 26)));
    records.push_back(std::move(r));
  }
  return records;
}

// Buffer: kcl::cli::LineBuffer or std::string.
template <class Buffer>
void BM_Lines(benchmark::State& state) {
  const auto records = batch();
  kcl::cli::RecordLines lines;
  Buffer out;
  for (auto _ : state) {
    out.clear();
    for (const kcl::Record& r : records) lines.append(out, r, false);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kRecords);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(out.size()));
}
BENCHMARK_TEMPLATE(BM_Lines, kcl::cli::LineBuffer);
BENCHMARK_TEMPLATE(BM_Lines, std::string);

// The baseline: copying the text the lines make, as one block.
void BM_Memcpy(benchmark::State& state) {
  const auto records = batch();
  kcl::cli::RecordLines lines;
  std::string text;
  for (const kcl::Record& r : records) lines.append(text, r, false);
  std::string copy(text.size(), '\0');
  for (auto _ : state) {
    std::memcpy(copy.data(), text.data(), text.size());
    benchmark::DoNotOptimize(copy.data());
  }
  state.SetItemsProcessed(state.iterations() * kRecords);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_Memcpy);

}  // namespace

BENCHMARK_MAIN();
