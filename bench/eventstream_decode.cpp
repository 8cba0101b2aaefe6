// bench_eventstream_decode: how fast a SubscribeToShard event stream becomes records, beside
// memcpy of the same bytes and beside the polling path (the same records as GetRecords JSON).
//
// Two record shapes, each 100 SubscribeToShardEvent messages of 100 records (built in memory
// by records_fixture.h, as bench_get_records_decode's records are):
//   kb     records of ~1 KB (900-1148 B of data, as bench_get_records_decode): ~14.7 MB of
//          stream, so the ratios to memcpy compare with that benchmark's
//   small  records of 100 B: ~3 MB of stream, which stays in cache (memcpy runs at cache
//          speed, so its ratios are lower for the same speed)
// For each shape, in the same run:
//   BM_EventStreamFrames   the event-stream decoder alone (fed 64 KB at a time, as a socket
//                          delivers): frames, CRCs, headers, each frame in a buffer of its own
//   BM_EventStreamRecords  frames + each event's JSON into records, in place in the frame
//                          (a reused result)
//   BM_EventStreamBatches  frames + each event's records straight from the parser into a
//                          batch of kcl::Records (retrieval::BatchBuilder as a RecordSink),
//                          each batch released after its event: the fan-out source's path
//   BM_EventStreamViaVector the same batches, each event parsed into a vector of records
//                          first and those then handed to the builder (the fan-out source's
//                          path until 2026-11-26): the baseline for BM_EventStreamBatches
//   BM_GetRecordsRecords   the same records as one GetRecords response, parsed in place into a
//                          reused result (the polling path from the body on, as
//                          bench_get_records_decode measures it)
//   BM_GetRecordsCopied    the same, with the copy that gets the body out of the transport's
//                          receive buffer into a recycled body (what the event-stream decoder
//                          does for each frame, so these two compare like for like)
//   BM_Memcpy              a memcpy of the stream's bytes (the floor)
// and ends with one line per variant and shape: MB/s, records/s, ratio to memcpy. Each
// benchmark runs 5 times, interleaved at random with the others, and those lines use the
// median of each (see summary_reporter.h); --benchmark_repetitions=N sets another count.
//
// Run: build/release/bench/bench_eventstream_decode [--benchmark_min_time=2]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "aws/http_transport.h"
#include "eventstream/event_stream.h"
#include "kinesis/kinesis_client.h"
#include "records_fixture.h"
#include "retrieval/resume.h"
#include "summary_reporter.h"

namespace {

constexpr int kEvents = 100;
constexpr int kRecordsPerEvent = 100;
constexpr int kRecords = kEvents * kRecordsPerEvent;

enum Shape { kKb = 0, kSmall = 1 };

struct Inputs {
  std::string stream;       // the event stream
  std::string get_records;  // the same records as one GetRecords answer
};

Inputs make_inputs(Shape shape) {
  Inputs r;
  kcl::bench::RecordsFixture fixture(20261125, shape == kKb ? 900 : 100, shape == kKb ? 1148 : 100);
  std::string all;
  for (int e = 0; e < kEvents; ++e) {
    const std::string recs = fixture.next(kRecordsPerEvent);
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
    m.set_payload("{\"Records\":[" + recs + "],\"ContinuationSequenceNumber\":\"4965" +
                  std::to_string(e) + "\",\"MillisBehindLatest\":0}");
    r.stream += kcl::eventstream::encode(m);
    if (e) all += ',';
    all += recs;
  }
  r.get_records =
      "{\"Records\":[" + all + "],\"NextShardIterator\":\"AAAA\",\"MillisBehindLatest\":0}";
  return r;
}

const Inputs& inputs(Shape shape) {
  static const Inputs kb = make_inputs(kKb);
  static const Inputs small = make_inputs(kSmall);
  return shape == kKb ? kb : small;
}

void BM_EventStreamFrames(benchmark::State& state, Shape shape) {
  const std::string& s = inputs(shape).stream;
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
BENCHMARK_CAPTURE(BM_EventStreamFrames, kb, kKb)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EventStreamFrames, small, kSmall)->Unit(benchmark::kMillisecond);

// Decodes the stream as the fan-out source does, fed 64 KB at a time (large frames come from,
// and go back to, the body recycler), and hands each event to `per_event`, which returns how
// many records it yielded or -1 on failure. Sets the rates.
template <typename PerEvent>
void decode_events(benchmark::State& state, Shape shape, PerEvent per_event) {
  const std::string& s = inputs(shape).stream;
  std::vector<kcl::eventstream::Message> out;
  for (auto _ : state) {
    kcl::eventstream::Decoder d(kcl::eventstream::Decoder::kDefaultMaxMessageBytes,
                                &kcl::aws::response_body_recycler());
    long records = 0;
    for (std::size_t at = 0; at < s.size(); at += 65536) {
      out.clear();
      if (!d.feed(std::string_view(s).substr(at, 65536), out).ok()) {
        state.SkipWithError("decode failed");
        return;
      }
      for (auto& m : out) {
        const long n = per_event(m);
        if (n < 0) {
          state.SkipWithError("parse failed");
          return;
        }
        records += n;
      }
    }
    if (records != kRecords) state.SkipWithError("wrong record count");
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * s.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRecords));
}

void BM_EventStreamRecords(benchmark::State& state, Shape shape) {
  kcl::kinesis::GetRecordsResult result;
  decode_events(state, shape, [&](kcl::eventstream::Message& m) -> long {
    if (!kcl::kinesis::parse_subscribe_to_shard_event_in_place(std::move(m.frame), m.payload_offset,
                                                               m.payload_size, result)
             .ok()) {
      return -1;
    }
    benchmark::DoNotOptimize(result.records.data());
    return static_cast<long>(result.records.size());
  });
}
BENCHMARK_CAPTURE(BM_EventStreamRecords, kb, kKb)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EventStreamRecords, small, kSmall)->Unit(benchmark::kMillisecond);

// Frames into batches of kcl::Records, as the fan-out source makes them: each event's records
// from the parser straight into the batch, or (`via_vector`) through a vector of parsed
// records first.
void event_stream_batches(benchmark::State& state, Shape shape, bool via_vector) {
  kcl::kinesis::GetRecordsResult event;
  bool resume_filter = false;
  decode_events(state, shape, [&](kcl::eventstream::Message& m) -> long {
    kcl::retrieval::FetchedBatch batch;
    kcl::retrieval::BatchBuilder builder(event, "shardId-000000000001", batch, kRecordsPerEvent);
    if (!kcl::kinesis::parse_subscribe_to_shard_event_in_place(std::move(m.frame), m.payload_offset,
                                                               m.payload_size, event,
                                                               via_vector ? nullptr : &builder)
             .ok()) {
      return -1;
    }
    for (const kcl::kinesis::KinesisRecord& record : event.records) builder.add(record);
    event.records.clear();
    builder.finish(event, kcl::StartPosition::trim_horizon(), resume_filter);
    benchmark::DoNotOptimize(batch.records.data());
    return static_cast<long>(batch.records.size());
  });
}
void BM_EventStreamBatches(benchmark::State& state, Shape shape) {
  event_stream_batches(state, shape, false);
}
void BM_EventStreamViaVector(benchmark::State& state, Shape shape) {
  event_stream_batches(state, shape, true);
}
BENCHMARK_CAPTURE(BM_EventStreamBatches, kb, kKb)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EventStreamBatches, small, kSmall)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EventStreamViaVector, kb, kKb)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EventStreamViaVector, small, kSmall)->Unit(benchmark::kMillisecond);

// The polling path on the same records. `with_copy`: the body is received (timed) as the
// transport receives one, into a body a finished answer gave back, in the pieces a socket
// delivers; otherwise a fresh copy is made outside the timing (the body decoded in place is
// consumed).
void get_records_records(benchmark::State& state, Shape shape, bool with_copy) {
  const std::string& json = inputs(shape).get_records;
  kcl::kinesis::GetRecordsResult result;
  for (auto _ : state) {
    if (!with_copy) state.PauseTiming();
    std::string body =
        kcl::aws::response_body_recycler().take(json.size() + kcl::aws::HttpResponse::kBodySlack);
    for (std::size_t at = 0; at < json.size(); at += 65536) {
      body.append(std::string_view(json).substr(at, 65536));
    }
    if (!with_copy) state.ResumeTiming();
    if (!kcl::kinesis::parse_get_records_response_in_place(std::move(body), result).ok() ||
        result.records.size() != kRecords) {
      state.SkipWithError("parse failed");
      return;
    }
    benchmark::DoNotOptimize(result.records.data());
  }
  // Rated on the event stream's size, so the ratios compare the same records.
  state.SetBytesProcessed(
      static_cast<std::int64_t>(state.iterations() * inputs(shape).stream.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRecords));
}
void BM_GetRecordsRecords(benchmark::State& state, Shape shape) {
  get_records_records(state, shape, false);
}
void BM_GetRecordsCopied(benchmark::State& state, Shape shape) {
  get_records_records(state, shape, true);
}
BENCHMARK_CAPTURE(BM_GetRecordsRecords, kb, kKb)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GetRecordsRecords, small, kSmall)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GetRecordsCopied, kb, kKb)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GetRecordsCopied, small, kSmall)->Unit(benchmark::kMillisecond);

void BM_Memcpy(benchmark::State& state, Shape shape) {
  const std::string& s = inputs(shape).stream;
  std::vector<char> dst(s.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), s.data(), s.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * s.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kRecords));
}
BENCHMARK_CAPTURE(BM_Memcpy, kb, kKb)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Memcpy, small, kSmall)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  const auto rates = kcl::bench::run_benchmarks(argc, argv, 5, [] {
    for (Shape shape : {kKb, kSmall}) {
      std::printf("%s: event stream of %zu bytes, %d events, %d records\n",
                  shape == kKb ? "kb" : "small", inputs(shape).stream.size(), kEvents, kRecords);
    }
  });
  if (!rates) return 1;
  const auto& r = *rates;
  for (const char* shape : {"kb", "small"}) {
    const std::string tail = std::string("/") + shape;
    auto copy = r.find("BM_Memcpy" + tail);
    const double memcpy_rate = copy != r.end() ? copy->second.first : 0;
    const std::pair<const char*, const char*> lines[] = {
        {"BM_EventStreamFrames", "eventstream_decode (frames only)"},
        {"BM_EventStreamRecords", "eventstream_decode (frames + records)"},
        {"BM_EventStreamBatches", "eventstream_decode (frames + batches, the fan-out path)"},
        {"BM_EventStreamViaVector", "eventstream_decode (frames + batches through a vector)"},
        {"BM_GetRecordsRecords", "get_records_decode (same records, polling)"},
        {"BM_GetRecordsCopied", "get_records_decode (same records, polling, with its copy)"}};
    for (const auto& [bench, label] : lines) {
      auto it = r.find(bench + tail);
      if (it == r.end()) continue;
      std::printf("%s, %s records: %.0f MB/s, %.0f records/s, ratio to memcpy %.3f\n", label, shape,
                  it->second.first / 1e6, it->second.second,
                  memcpy_rate > 0 ? it->second.first / memcpy_rate : 0.0);
    }
  }
  return 0;
}
