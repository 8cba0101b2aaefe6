// bench_cbor_decode: what a GetRecords answer costs to decode in CBOR against JSON, and
// kcl-cpp's own CBOR decoder against Debian's libcbor (0.8), on the same records.
//
// Two answers, each built in memory from the same records in both encodings (AWS-style
// 56-digit sequence numbers, UUID partition keys, arrival times in milliseconds, random
// data, EncryptionType NONE): "small" = 1,000 records of 100 bytes, "large" = 100 records of
// 10 KB. For each, in the same run:
//   BM_Json_<size>        parse_get_records_response_in_place on the JSON answer (base64
//                         data decoded in place; the records are views into the body)
//   BM_Cbor_<size>        parse_get_records_cbor_in_place on the CBOR answer (the same
//                         records, as views into the body)
//   BM_LibcborStream_<size>  libcbor's streaming decoder (cbor_stream_decode, one call an
//                         item, callbacks with pointers into the buffer) building the same
//                         records as views: the zero-copy way to use libcbor
//   BM_LibcborLoad_<size> libcbor's cbor_load (a tree, every string copied) and a walk of
//                         it into records, then the tree freed
//   BM_MemcpyJson_<size>, BM_MemcpyCbor_<size>  a memcpy of each answer (the floors)
// Each decode gets a fresh copy of its answer outside the timed region (decoding in place
// consumes it). Rates are per CPU second; each benchmark runs 5 times, interleaved at random,
// and the summary uses the median. The summary prints, per size: ns a record for each, each
// CBOR decoder's time over the JSON parser's, and each decoder's time over a memcpy of its
// own answer and of the JSON answer.
//
// Run: build/release/bench/bench_cbor_decode [--benchmark_min_time=0.5]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "aws/base64.h"
#include "aws/cbor.h"
#include "kinesis/epoch_seconds.h"
#include "kinesis/kinesis_cbor.h"
#include "kinesis/kinesis_client.h"
#include "summary_reporter.h"

#ifdef KCL_BENCH_LIBCBOR
#include <cbor.h>
#endif

namespace {

using kcl::aws::cbor::Writer;
using kcl::kinesis::GetRecordsResult;
using kcl::kinesis::KinesisRecord;

struct Answers {
  std::string json;
  std::string cbor;
  int records = 0;
};

Answers make_answers(int count, std::size_t size, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto hex = [&](int n) {
    static const char digits[] = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < n; ++i) s += digits[rng() & 15];
    return s;
  };
  std::string seq_prefix = "4965";
  for (int i = 0; i < 30; ++i) seq_prefix += static_cast<char>('0' + rng() % 10);
  Answers a;
  a.records = count;
  a.json = "{\"Records\":[";
  Writer w(a.cbor);
  w.map(4);
  w.text("Records");
  w.array(static_cast<std::uint64_t>(count));
  std::string data(size, '\0');
  for (int k = 0; k < count; ++k) {
    for (char& c : data) c = static_cast<char>(rng());
    char tail[32];
    std::snprintf(tail, sizeof tail, "%022llu", 1000000000000ULL + 4096ULL * k);
    const std::string seq = seq_prefix + tail;
    const std::string key = hex(8) + "-" + hex(4) + "-" + hex(4) + "-" + hex(4) + "-" + hex(12);
    const std::uint64_t ms = 1717243200123ULL + static_cast<std::uint64_t>(k) * 7 / 10;
    char ts[64];
    std::snprintf(ts, sizeof ts, "%llu.%03llu", static_cast<unsigned long long>(ms / 1000),
                  static_cast<unsigned long long>(ms % 1000));
    if (k) a.json += ',';
    a.json += "{\"SequenceNumber\":\"" + seq + "\",\"ApproximateArrivalTimestamp\":" + ts +
              ",\"Data\":\"" + kcl::aws::base64_encode(data) + "\",\"PartitionKey\":\"" + key +
              "\",\"EncryptionType\":\"NONE\"}";
    w.map(5);
    w.text("SequenceNumber");
    w.text(seq);
    w.text("ApproximateArrivalTimestamp");
    w.tag(kcl::aws::cbor::kTagEpochTime);
    w.uint(ms);
    w.text("Data");
    w.bytes(data);
    w.text("PartitionKey");
    w.text(key);
    w.text("EncryptionType");
    w.text("NONE");
  }
  std::string iterator = "AAAAAAAAAAH";
  for (int i = 0; i < 280; ++i) iterator += static_cast<char>('A' + rng() % 26);
  a.json +=
      "],\"NextShardIterator\":\"" + iterator + "\",\"MillisBehindLatest\":0,\"ChildShards\":[]}";
  w.text("NextShardIterator");
  w.text(iterator);
  w.text("MillisBehindLatest");
  w.uint(0);
  w.text("ChildShards");
  w.array(0);
  return a;
}

const Answers& small_answers() {
  static const Answers a = make_answers(1000, 100, 1);
  return a;
}
const Answers& large_answers() {
  static const Answers a = make_answers(100, 10240, 2);
  return a;
}

std::string fresh(const std::string& body) {
  std::string s;
  s.reserve(body.size() + 64);  // the transport's slack (simdjson's padding)
  s.assign(body);
  return s;
}

template <bool kCbor>
void decode(benchmark::State& state, const Answers& a) {
  const std::string& body = kCbor ? a.cbor : a.json;
  GetRecordsResult out;
  for (auto _ : state) {
    state.PauseTiming();
    out.buffer.reset();
    std::string copy = fresh(body);
    state.ResumeTiming();
    kcl::Status s = kCbor ? kcl::kinesis::parse_get_records_cbor_in_place(std::move(copy), out)
                          : kcl::kinesis::parse_get_records_response_in_place(std::move(copy), out);
    if (!s.ok() || out.records.size() != static_cast<std::size_t>(a.records)) {
      state.SkipWithError(s.to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(out.records.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * a.records);
}

// The CBOR decoder without the benchmark's pause: an answer with definite-length byte-string
// data is not written by the decoding, so the same body is handed back each time.
void decode_cbor_unpaused(benchmark::State& state, const Answers& a) {
  GetRecordsResult out;
  std::string body = fresh(a.cbor);
  for (auto _ : state) {
    kcl::Status s = kcl::kinesis::parse_get_records_cbor_in_place(std::move(body), out);
    if (!s.ok() || out.records.size() != static_cast<std::size_t>(a.records)) {
      state.SkipWithError(s.to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(out.records.data());
    benchmark::ClobberMemory();
    body = std::move(out.buffer->body);
    out.buffer.reset();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * a.cbor.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * a.records);
}

void copy(benchmark::State& state, const Answers& a, bool cbor) {
  const std::string& body = cbor ? a.cbor : a.json;
  std::vector<char> dst(body.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), body.data(), body.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * body.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * a.records);
}

void BM_Json_small(benchmark::State& s) { decode<false>(s, small_answers()); }
void BM_Cbor_small(benchmark::State& s) { decode<true>(s, small_answers()); }
void BM_MemcpyJson_small(benchmark::State& s) { copy(s, small_answers(), false); }
void BM_MemcpyCbor_small(benchmark::State& s) { copy(s, small_answers(), true); }
void BM_Json_large(benchmark::State& s) { decode<false>(s, large_answers()); }
void BM_Cbor_large(benchmark::State& s) { decode<true>(s, large_answers()); }
void BM_MemcpyJson_large(benchmark::State& s) { copy(s, large_answers(), false); }
void BM_MemcpyCbor_large(benchmark::State& s) { copy(s, large_answers(), true); }
void BM_CborUnpaused_small(benchmark::State& s) { decode_cbor_unpaused(s, small_answers()); }
void BM_CborUnpaused_large(benchmark::State& s) { decode_cbor_unpaused(s, large_answers()); }
BENCHMARK(BM_CborUnpaused_small)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CborUnpaused_large)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Json_small)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Cbor_small)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MemcpyJson_small)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MemcpyCbor_small)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Json_large)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Cbor_large)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MemcpyJson_large)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MemcpyCbor_large)->Unit(benchmark::kMicrosecond);

#ifdef KCL_BENCH_LIBCBOR

// ---- libcbor, streaming: callbacks build the records as views into the buffer ----

// Counts the items left in each open container (a map's members twice), so that a record's
// end is known; strings at the record level alternate between member name and value.
struct StreamState {
  std::vector<std::uint64_t> left;
  std::string_view key;
  KinesisRecord rec;
  std::vector<KinesisRecord>* records = nullptr;
  bool in_record() const { return left.size() == 4; }  // top, its map, Records, a record
  bool at_name() const { return left.back() % 2 == 0; }
};

void item_done(StreamState* st) {
  while (!st->left.empty()) {
    if (--st->left.back() > 0) return;
    st->left.pop_back();
    if (st->left.size() == 3) {  // a record's map ended
      st->records->push_back(st->rec);
      st->rec = KinesisRecord{};
    }
  }
}

void on_string(void* ctx, cbor_data data, uint64_t len) {
  auto* st = static_cast<StreamState*>(ctx);
  const std::string_view v(reinterpret_cast<const char*>(data), len);
  if (st->in_record()) {
    if (st->at_name()) {
      st->key = v;
    } else if (st->key == "SequenceNumber") {
      st->rec.sequence_number = v;
    } else if (st->key == "PartitionKey") {
      st->rec.partition_key = v;
    } else if (st->key == "Data") {
      st->rec.data = v;
    }
  }
  item_done(st);
}

void on_uint(void* ctx, uint64_t v) {
  auto* st = static_cast<StreamState*>(ctx);
  if (st->in_record() && st->key == "ApproximateArrivalTimestamp") {
    st->rec.approximate_arrival_timestamp =
        kcl::kinesis::from_epoch_micros(static_cast<std::int64_t>(v) * 1000);
  }
  item_done(st);
}
void on_uint8(void* ctx, uint8_t v) { on_uint(ctx, v); }
void on_uint16(void* ctx, uint16_t v) { on_uint(ctx, v); }
void on_uint32(void* ctx, uint32_t v) { on_uint(ctx, v); }
void on_uint64(void* ctx, uint64_t v) { on_uint(ctx, v); }

void on_container(void* ctx, uint64_t items) {
  auto* st = static_cast<StreamState*>(ctx);
  if (items == 0) {
    item_done(st);
  } else {
    st->left.push_back(items);
  }
}
void on_map(void* ctx, uint64_t members) { on_container(ctx, members * 2); }
void on_tag(void*, uint64_t) {}

cbor_callbacks stream_callbacks() {
  cbor_callbacks cb = cbor_empty_callbacks;
  cb.uint8 = on_uint8;
  cb.uint16 = on_uint16;
  cb.uint32 = on_uint32;
  cb.uint64 = on_uint64;
  cb.string = on_string;
  cb.byte_string = on_string;
  cb.array_start = on_container;
  cb.map_start = on_map;
  cb.tag = on_tag;
  return cb;
}

template <const Answers& (*kAnswers)()>
void BM_LibcborStream(benchmark::State& state) {
  const Answers& a = kAnswers();
  const cbor_callbacks cb = stream_callbacks();
  std::vector<KinesisRecord> records;
  for (auto _ : state) {
    state.PauseTiming();
    std::string body = fresh(a.cbor);
    records.clear();
    state.ResumeTiming();
    StreamState st;
    st.records = &records;
    st.left.push_back(1);  // the top-level item
    const auto* p = reinterpret_cast<cbor_data>(body.data());
    std::size_t pos = 0;
    bool ok = true;
    while (pos < body.size()) {
      const cbor_decoder_result r = cbor_stream_decode(p + pos, body.size() - pos, &cb, &st);
      if (r.status != CBOR_DECODER_FINISHED) {
        ok = false;
        break;
      }
      pos += r.read;
    }
    if (!ok || records.size() != static_cast<std::size_t>(a.records)) {
      state.SkipWithError("libcbor stream decode failed");
      break;
    }
    benchmark::DoNotOptimize(records.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * a.cbor.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * a.records);
}

// ---- libcbor, a tree: cbor_load, then the records read from it ----

std::string_view item_text(const cbor_item_t* item) {
  return std::string_view(reinterpret_cast<const char*>(cbor_string_handle(item)),
                          cbor_string_length(item));
}

template <const Answers& (*kAnswers)()>
void BM_LibcborLoad(benchmark::State& state) {
  const Answers& a = kAnswers();
  std::vector<KinesisRecord> records;
  for (auto _ : state) {
    records.clear();
    cbor_load_result result;
    cbor_item_t* root =
        cbor_load(reinterpret_cast<cbor_data>(a.cbor.data()), a.cbor.size(), &result);
    if (root == nullptr || !cbor_isa_map(root)) {
      state.SkipWithError("cbor_load failed");
      break;
    }
    const cbor_pair* top = cbor_map_handle(root);
    for (std::size_t i = 0; i < cbor_map_size(root); ++i) {
      if (item_text(top[i].key) != "Records") continue;
      cbor_item_t** arr = cbor_array_handle(top[i].value);
      for (std::size_t j = 0; j < cbor_array_size(top[i].value); ++j) {
        KinesisRecord rec;
        const cbor_pair* m = cbor_map_handle(arr[j]);
        for (std::size_t k = 0; k < cbor_map_size(arr[j]); ++k) {
          const std::string_view name = item_text(m[k].key);
          if (name == "SequenceNumber") {
            rec.sequence_number = item_text(m[k].value);
          } else if (name == "PartitionKey") {
            rec.partition_key = item_text(m[k].value);
          } else if (name == "Data") {
            rec.data =
                std::string_view(reinterpret_cast<const char*>(cbor_bytestring_handle(m[k].value)),
                                 cbor_bytestring_length(m[k].value));
          } else if (name == "ApproximateArrivalTimestamp") {
            rec.approximate_arrival_timestamp = kcl::kinesis::from_epoch_micros(
                static_cast<std::int64_t>(cbor_get_int(cbor_move(cbor_tag_item(m[k].value)))) *
                1000);
          }
        }
        records.push_back(rec);
      }
    }
    benchmark::DoNotOptimize(records.data());
    cbor_decref(&root);
    benchmark::ClobberMemory();
    if (records.size() != static_cast<std::size_t>(a.records)) {
      state.SkipWithError("cbor_load walk found the wrong number of records");
      break;
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * a.cbor.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * a.records);
}

void BM_LibcborStream_small(benchmark::State& s) { BM_LibcborStream<small_answers>(s); }
void BM_LibcborStream_large(benchmark::State& s) { BM_LibcborStream<large_answers>(s); }
void BM_LibcborLoad_small(benchmark::State& s) { BM_LibcborLoad<small_answers>(s); }
void BM_LibcborLoad_large(benchmark::State& s) { BM_LibcborLoad<large_answers>(s); }
BENCHMARK(BM_LibcborStream_small)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LibcborStream_large)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LibcborLoad_small)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LibcborLoad_large)->Unit(benchmark::kMicrosecond);

#endif  // KCL_BENCH_LIBCBOR

}  // namespace

int main(int argc, char** argv) {
  const auto rates = kcl::bench::run_benchmarks(argc, argv, 5, [] {
    for (const auto& [name, a] : {std::pair<const char*, const Answers&>{"small", small_answers()},
                                  {"large", large_answers()}}) {
      std::printf("%s: %d records, %zu bytes of JSON, %zu bytes of CBOR\n", name, a.records,
                  a.json.size(), a.cbor.size());
    }
#ifndef KCL_BENCH_LIBCBOR
    std::printf("libcbor: not built in (libcbor-dev not found at configure time)\n");
#endif
  });
  if (!rates) return 1;
  const auto& r = *rates;
  // ns a record from a benchmark's items rate (items per CPU second).
  auto ns = [&](const std::string& bench) -> double {
    auto it = r.find(bench);
    return it == r.end() || it->second.second <= 0 ? 0.0 : 1e9 / it->second.second;
  };
  for (const char* size : {"small", "large"}) {
    const std::string sz = size;
    const double json = ns("BM_Json_" + sz), memcpy_json = ns("BM_MemcpyJson_" + sz),
                 memcpy_cbor = ns("BM_MemcpyCbor_" + sz);
    std::printf(
        "cbor_decode %s: memcpy of the JSON answer %.1f ns a record, of the CBOR "
        "answer %.1f\n",
        size, memcpy_json, memcpy_cbor);
    const std::pair<const char*, const char*> lines[] = {
        {"BM_Json_", "JSON parser"},
        {"BM_Cbor_", "kcl-cpp CBOR decoder"},
        {"BM_CborUnpaused_", "kcl-cpp CBOR, unpaused"},
        {"BM_LibcborStream_", "libcbor stream"},
        {"BM_LibcborLoad_", "libcbor cbor_load"}};
    for (const auto& [prefix, label] : lines) {
      const double t = ns(prefix + sz);
      if (t <= 0) continue;
      const bool cbor = std::string(prefix) != "BM_Json_";
      std::printf(
          "cbor_decode %s: %-22s %8.1f ns a record, %.3fx the JSON parser, %.2fx a "
          "memcpy of its answer, %.2fx a memcpy of the JSON answer\n",
          size, label, t, json > 0 ? t / json : 0.0,
          (cbor ? memcpy_cbor : memcpy_json) > 0 ? t / (cbor ? memcpy_cbor : memcpy_json) : 0.0,
          memcpy_json > 0 ? t / memcpy_json : 0.0);
    }
  }
  return 0;
}
