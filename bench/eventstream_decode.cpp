// bench_eventstream_decode: how fast a SubscribeToShard event stream becomes records, beside
// memcpy of the same bytes and beside the polling path (the same records as GetRecords JSON).
//
// Builds, in memory, 100 SubscribeToShardEvent messages of 100 records each (100-byte
// records, base64 in the JSON payload, AWS-style sequence numbers; about 3 MB of stream) and
// measures in the same run:
//   BM_EventStreamFrames       the event-stream decoder alone (fed 64 KB at a time, as a
//                              socket delivers): frames, CRCs, headers, payload out
//   BM_EventStreamRecords      frames + each event's JSON into records (reused result)
//   BM_GetRecordsRecords       the same 10,000 records as one GetRecords response, parsed in
//                              place into a reused result (the polling path)
//   BM_Memcpy                  a memcpy of the stream's bytes (the floor)
// and ends with one line per variant: MB/s, records/s, ratio to memcpy.
//
// Run: build/release/bench/bench_eventstream_decode [--benchmark_min_time=2]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "aws/base64.h"
#include "eventstream/event_stream.h"
#include "kinesis/kinesis_client.h"
#include "summary_reporter.h"

namespace {

constexpr int kEvents = 100;
constexpr int kRecordsPerEvent = 100;
constexpr int kRecords = kEvents * kRecordsPerEvent;

std::string records_json(int first, int count, std::mt19937_64& rng) {
  std::string json = "[";
  std::string data(100, 'x');
  for (int i = first; i < first + count; ++i) {
    if (i > first) json += ',';
    for (char& c : data) c = static_cast<char>(rng());
    char seq[80];
    std::snprintf(seq, sizeof seq, "4965%030d%022llu", 7, 1000000000000ULL + 4096ULL * i);
    json += "{\"SequenceNumber\":\"";
    json += seq;
    json += "\",\"ApproximateArrivalTimestamp\":1717243200.123,\"Data\":\"";
    json += kcl::aws::base64_encode(data);
    json += "\",\"PartitionKey\":\"key-" + std::to_string(i % 97) + "\"}";
  }
  return json + "]";
}

struct Inputs {
  std::string stream;       // the event stream
  std::string get_records;  // the same records as one GetRecords answer
};

const Inputs& inputs() {
  static const Inputs in = [] {
    Inputs r;
    std::mt19937_64 rng(20261125);
    std::string all = "[";
    for (int e = 0; e < kEvents; ++e) {
      const std::string recs = records_json(e * kRecordsPerEvent, kRecordsPerEvent, rng);
      kcl::eventstream::Message m;
      auto header = [&](const char* name, const char* value) {
        kcl::eventstream::Header h;
        h.name = name;
        h.value.type = kcl::eventstream::HeaderType::kString;
        h.value.bytes = value;
        m.headers.push_back(std::move(h));
      };
      header(":message-type", "event");
      header(":event-type", "SubscribeToShardEvent");
      header(":content-type", "application/json");
      m.payload = "{\"Records\":" + recs + ",\"ContinuationSequenceNumber\":\"4965" +
                  std::to_string(e) + "\",\"MillisBehindLatest\":0}";
      r.stream += kcl::eventstream::encode(m);
      if (e) all += ',';
      all += recs.substr(1, recs.size() - 2);
    }
    r.get_records =
        "{\"Records\":" + all + "],\"NextShardIterator\":\"AAAA\",\"MillisBehindLatest\":0}";
    return r;
  }();
  return in;
}

void BM_EventStreamFrames(benchmark::State& state) {
  const std::string& s = inputs().stream;
  std::vector<kcl::eventstream::Message> out;
  for (auto _ : state) {
    kcl::eventstream::Decoder d;
    out.clear();
    for (std::size_t at = 0; at < s.size(); at += 65536) {
      if (!d.feed(std::string_view(s).substr(at, 65536), out).ok()) {
        state.SkipWithError("decode failed");
        return;
      }
    }
    if (out.size() != kEvents) state.SkipWithError("wrong message count");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * s.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRecords));
}
BENCHMARK(BM_EventStreamFrames)->Unit(benchmark::kMillisecond);

void BM_EventStreamRecords(benchmark::State& state) {
  const std::string& s = inputs().stream;
  std::vector<kcl::eventstream::Message> out;
  kcl::kinesis::GetRecordsResult result;
  for (auto _ : state) {
    kcl::eventstream::Decoder d;
    std::size_t records = 0;
    for (std::size_t at = 0; at < s.size(); at += 65536) {
      out.clear();
      if (!d.feed(std::string_view(s).substr(at, 65536), out).ok()) {
        state.SkipWithError("decode failed");
        return;
      }
      for (auto& m : out) {
        if (!kcl::kinesis::parse_subscribe_to_shard_event_in_place(std::move(m.payload), result)
                 .ok()) {
          state.SkipWithError("parse failed");
          return;
        }
        records += result.records.size();
      }
    }
    if (records != kRecords) state.SkipWithError("wrong record count");
    benchmark::DoNotOptimize(result.records.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * s.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRecords));
}
BENCHMARK(BM_EventStreamRecords)->Unit(benchmark::kMillisecond);

void BM_GetRecordsRecords(benchmark::State& state) {
  const std::string& json = inputs().get_records;
  kcl::kinesis::GetRecordsResult result;
  for (auto _ : state) {
    // The body is decoded in place (consumed): a fresh copy each time, outside the timing.
    state.PauseTiming();
    std::string body;
    body.reserve(json.size() + 64);
    body.assign(json);
    state.ResumeTiming();
    if (!kcl::kinesis::parse_get_records_response_in_place(std::move(body), result).ok() ||
        result.records.size() != kRecords) {
      state.SkipWithError("parse failed");
      return;
    }
    benchmark::DoNotOptimize(result.records.data());
  }
  // Rated on the event stream's size, so the ratios compare the same records.
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * inputs().stream.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRecords));
}
BENCHMARK(BM_GetRecordsRecords)->Unit(benchmark::kMillisecond);

void BM_Memcpy(benchmark::State& state) {
  const std::string& s = inputs().stream;
  std::vector<char> dst(s.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), s.data(), s.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * s.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRecords));
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("event stream: %zu bytes, %d events, %d records\n", inputs().stream.size(), kEvents,
              kRecords);
  kcl::bench::SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  const auto& r = reporter.rates();
  auto copy = r.find("BM_Memcpy");
  const double memcpy_rate = copy != r.end() ? copy->second.first : 0;
  const std::pair<const char*, const char*> lines[] = {
      {"BM_EventStreamFrames", "eventstream_decode (frames only)"},
      {"BM_EventStreamRecords", "eventstream_decode (frames + records)"},
      {"BM_GetRecordsRecords", "get_records_decode (same records, polling)"}};
  for (const auto& [bench, label] : lines) {
    auto it = r.find(bench);
    if (it == r.end()) continue;
    std::printf("%s: %.0f MB/s, %.0f records/s, ratio to memcpy %.3f\n", label,
                it->second.first / 1e6, it->second.second,
                memcpy_rate > 0 ? it->second.first / memcpy_rate : 0.0);
  }
  return 0;
}
