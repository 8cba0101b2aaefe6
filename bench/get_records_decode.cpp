// bench_get_records_decode: how fast a GetRecords response becomes records.
//
// Builds one realistic GetRecords response in memory (10,000 records of about 1 KB of random
// bytes each, AWS-style 56-digit sequence numbers, UUID partition keys, epoch-seconds
// timestamps; about 14 MB of JSON) and measures, in the same run:
//   BM_ParseGetRecords         parse_get_records_response(string_view) into a reused result:
//                              a padded copy of the body into a fresh buffer + parse
//   BM_ParseGetRecordsInPlace  parse_get_records_response_in_place: the body (as the HTTP
//                              transport hands it over) becomes the records' buffer, Data
//                              decoded in place; the result object reused (as the fetcher
//                              does). The body decoded in place is gone, so each iteration
//                              gets a fresh copy of it outside the timed region.
//   BM_ParseGetRecordsFresh    the same into a fresh result object each time (what
//                              KinesisClient::get_records(iterator, limit) does)
//   BM_Memcpy                  a memcpy of the same bytes (the floor)
// and ends with a line per parse variant:
//   get_records_decode: X MB/s, Y records/s, ratio to memcpy Z
// Rates are per CPU second of the benchmark thread (Google Benchmark's default), so they
// stay meaningful on a busy machine; MB = 10^6 bytes of JSON response. Each benchmark runs 5
// times, interleaved at random with the others, and the summary lines use the median of
// each (see summary_reporter.h); --benchmark_repetitions=N sets another count.
//
// Run: build/release/bench/bench_get_records_decode [--benchmark_min_time=2]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kinesis/kinesis_client.h"
#include "records_fixture.h"
#include "summary_reporter.h"

namespace {

using kcl::bench::RecordsFixture;

constexpr int kRecords = 10000;

std::string make_response() {
  RecordsFixture records(20240601, 900, 1148);  // ~1 KB of data a record
  std::string json = "{\"Records\":[" + records.next(kRecords);
  json += "],\"NextShardIterator\":\"AAAAAAAAAAH" + records.letters(280);
  json += "\",\"MillisBehindLatest\":0,\"ChildShards\":[]}";
  return json;
}

const std::string& response() {
  static const std::string r = make_response();
  return r;
}

void BM_ParseGetRecords(benchmark::State& state) {
  const std::string& json = response();
  kcl::kinesis::GetRecordsResult out;
  for (auto _ : state) {
    kcl::Status s = kcl::kinesis::parse_get_records_response(json, out);
    if (!s.ok() || out.records.size() != kRecords) {
      state.SkipWithError(s.to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(out.records.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * json.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRecords));
  state.counters["payload_MB/s"] = benchmark::Counter(
      static_cast<double>(out.payload_bytes) * static_cast<double>(state.iterations()) / 1e6,
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ParseGetRecords)->Unit(benchmark::kMillisecond);

// A body as the transport hands it over: the response with simdjson's padding of capacity.
std::string fresh_body(const std::string& json) {
  std::string body;
  body.reserve(json.size() + 64);
  body.assign(json);
  return body;
}

void BM_ParseGetRecordsInPlace(benchmark::State& state) {
  const std::string& json = response();
  kcl::kinesis::GetRecordsResult out;
  for (auto _ : state) {
    state.PauseTiming();
    out.buffer.reset();  // the previous batch's records are gone (freed by their consumer)
    std::string body = fresh_body(json);
    state.ResumeTiming();
    kcl::Status s = kcl::kinesis::parse_get_records_response_in_place(std::move(body), out);
    if (!s.ok() || out.records.size() != kRecords) {
      state.SkipWithError(s.to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(out.records.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * json.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRecords));
}
BENCHMARK(BM_ParseGetRecordsInPlace)->Unit(benchmark::kMillisecond);

// As KinesisClient::get_records(iterator, limit) uses it: a fresh result per response (its
// records vector allocated and grown each time).
void BM_ParseGetRecordsFresh(benchmark::State& state) {
  const std::string& json = response();
  for (auto _ : state) {
    state.PauseTiming();
    std::string body = fresh_body(json);
    state.ResumeTiming();
    kcl::kinesis::GetRecordsResult out;
    kcl::Status s = kcl::kinesis::parse_get_records_response_in_place(std::move(body), out);
    if (!s.ok() || out.records.size() != kRecords) {
      state.SkipWithError(s.to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(out.records.data());
    benchmark::ClobberMemory();
    state.PauseTiming();
    out = {};  // freeing the body is its consumer's cost, not the decoder's
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * json.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRecords));
}
BENCHMARK(BM_ParseGetRecordsFresh)->Unit(benchmark::kMillisecond);

void BM_Memcpy(benchmark::State& state) {
  const std::string& json = response();
  std::vector<char> dst(json.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), json.data(), json.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * json.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRecords));
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  const auto rates = kcl::bench::run_benchmarks(argc, argv, 5, [] {
    std::printf("response: %zu bytes of JSON, %d records\n", response().size(), kRecords);
  });
  if (!rates) return 1;
  const auto& r = *rates;
  auto copy = r.find("BM_Memcpy");
  const double memcpy_rate = copy != r.end() ? copy->second.first : 0;
  const std::pair<const char*, const char*> lines[] = {
      {"BM_ParseGetRecords", "get_records_decode"},
      {"BM_ParseGetRecordsInPlace", "get_records_decode (in place, reused result)"},
      {"BM_ParseGetRecordsFresh", "get_records_decode (in place, fresh result)"}};
  for (const auto& [bench, label] : lines) {
    auto it = r.find(bench);
    if (it == r.end()) continue;
    std::printf("%s: %.0f MB/s, %.0f records/s, ratio to memcpy %.3f\n", label,
                it->second.first / 1e6, it->second.second,
                memcpy_rate > 0 ? it->second.first / memcpy_rate : 0.0);
  }
  return 0;
}
