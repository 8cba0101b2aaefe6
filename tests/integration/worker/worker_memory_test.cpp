// Memory is bounded by configuration, not by traffic: a worker holding 100 shards whose
// processors all stall on their first batch reads each shard only up to the prefetch bound
// (RetrievalConfig::max_prefetch_bytes, checked before each call, so one response past it),
// then makes no more GetRecords calls, and its resident memory grows by no more than that
// bound for every shard, plus the batch stuck in each processor, plus a fixed allowance for
// the worker itself (its threads, connections and parsers). The stream holds several times
// what the bound lets in, so a worker that read on would break both checks.
#include <fstream>
#include <string>

#include "support/worker_test_support.h"

namespace kcl::worker_test {
namespace {

// Counts GetRecords attempts (the AWS client reports every attempt as "aws.requests").
class CallCounter final : public MetricsSink {
 public:
  void count(std::string_view name, double value, MetricTags tags) override {
    if (name != "aws.requests") return;
    for (const MetricTag& t : tags) {
      if (t.key == "operation" && t.value == "GetRecords") {
        get_records_.fetch_add(static_cast<std::uint64_t>(value));
      }
    }
  }
  void gauge(std::string_view, double, MetricTags) override {}
  void timing(std::string_view, std::chrono::nanoseconds, MetricTags) override {}
  std::uint64_t get_records() const { return get_records_.load(); }

 private:
  std::atomic<std::uint64_t> get_records_{0};
};

// This process's resident memory (VmRSS), in bytes; 0 when /proc is not there.
std::size_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6)) * 1024;
  }
  return 0;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMemoryIsMeasurable = false;  // shadow memory and quarantine
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kMemoryIsMeasurable = false;
#else
constexpr bool kMemoryIsMeasurable = true;
#endif
#else
constexpr bool kMemoryIsMeasurable = true;
#endif

class WorkerMemoryTest : public WorkerTest {
 public:
  void open_gate() {
    {
      std::lock_guard<std::mutex> lock(gate_mu_);
      gate_open_ = true;
    }
    gate_cv_.notify_all();
  }

 protected:
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  bool gate_open_ = false;
};

TEST_F(WorkerMemoryTest, AHundredShardsWithStalledProcessorsHoldNoMoreThanThePrefetchBound) {
  constexpr int kShards = 100;
  constexpr std::size_t kRecordsPerShard = 60;
  constexpr std::size_t kRecordSize = 4096;
  constexpr int kPerCall = 4;
  constexpr std::size_t kBound = 32 * 1024;
  // A response: the records' base64 in JSON, with the sequence numbers and keys around it.
  constexpr std::size_t kResponse = kPerCall * (kRecordSize * 4 / 3 + 512);
  create_stream(kShards);
  const std::vector<kinesis::Shard> all = shards();
  ASSERT_EQ(all.size(), static_cast<std::size_t>(kShards));

  // kRecordsPerShard records of 1 KiB into every shard (explicit hash keys), 500 per call.
  std::vector<kinesis::PutRecordsEntry> entries;
  const std::string filler(kRecordSize - 16, 'x');
  for (std::size_t i = 0; i < kRecordsPerShard; ++i) {
    for (const kinesis::Shard& s : all) {
      entries.push_back({std::to_string(i) + filler, "pk", s.hash_key_range.starting_hash_key});
      entries.back().data.resize(kRecordSize, 'x');
      if (entries.size() == 500) {
        put_entries(entries);
        entries.clear();
      }
    }
  }
  if (!entries.empty()) put_entries(entries);

  auto script = std::make_shared<Script>();
  script->on_records = [this](const std::string&, std::span<const Record>, Checkpointer&, int) {
    std::unique_lock<std::mutex> lock(gate_mu_);
    gate_cv_.wait(lock, [&] { return gate_open_; });  // stalled until the test ends
  };
  WorkerConfig c = config("w1");
  c.retrieval.max_records_per_call = kPerCall;
  c.retrieval.max_prefetch_bytes = kBound;
  c.retrieval.min_call_interval = 1ms;
  // A thread for every stalled processor and some for the fetch tasks.
  c.processing.thread_pool_size = kShards + 8;
  c.processing.shutdown_timeout = 1000ms;
  auto counter = std::make_shared<CallCounter>();
  Dependencies deps;
  deps.metrics = counter;

  const std::size_t rss_before = resident_bytes();
  Worker w(c, factory("w1", script), deps);
  // Declared after the worker, so destroyed before it: the stalled processors return before
  // the worker's destructor waits for them, also when an ASSERT below ends the test early.
  struct GateOpener {
    WorkerMemoryTest* test;
    ~GateOpener() { test->open_gate(); }
  } opener{this};
  ASSERT_TRUE(w.start().ok());
  // Every shard's processor holds its first batch.
  ASSERT_TRUE(log_->wait_until(
      [&](const std::vector<Event>& ev) {
        return EventLog::count(ev, EventKind::kProcessRecords) >= static_cast<std::size_t>(kShards);
      },
      120s));
  // Then reading stops: the count of calls stays put over a second (each shard would need
  // kRecordsPerShard / kPerCall = 24 calls to read everything).
  std::uint64_t calls = counter->get_records();
  const bool settled = eventually(
      [&] {
        std::this_thread::sleep_for(1s);
        const std::uint64_t now = counter->get_records();
        const bool still = now == calls;
        calls = now;
        return still;
      },
      60s);
  const std::size_t rss_after = resident_bytes();
  EXPECT_TRUE(settled) << "GetRecords calls went on with every processor stalled";

  // Per shard: the call that fed the processor, then calls until the batches waiting hold
  // the bound (checked before each call, so the last one goes past it), and one more for
  // a call that failed and was made again.
  const std::uint64_t max_calls_per_shard = 2 + (kBound + kResponse - 1) / kResponse;
  const std::uint64_t unbounded_calls = kShards * (kRecordsPerShard / kPerCall);
  EXPECT_LE(calls, kShards * max_calls_per_shard)
      << "a worker with stalled processors kept reading (reading everything takes "
      << unbounded_calls << " calls)";

  // Memory: per shard the documented bound (max_prefetch_bytes plus the response that went
  // past it) and the batch stuck in the processor, with a response's worth of allocator
  // slack; and a fixed allowance for the worker's 100+ threads (stacks, allocator arenas),
  // its connections and parsers. Measured: about 18 MB in all with the bound, 47 MB when
  // the whole stream is read.
  const std::size_t per_shard = kBound + 3 * kResponse;
  const std::size_t fixed = std::size_t{16} << 20;
  const std::size_t stream_json = kShards * kRecordsPerShard * kRecordSize * 4 / 3;
  const double grew_mb = (static_cast<double>(rss_after) - static_cast<double>(rss_before)) / 1e6;
  std::printf(
      "100 stalled shards: %llu GetRecords calls (%llu to read everything); resident memory "
      "grew %.1f MB (prefetch bound %.1f MB for all shards with the batches in the processors "
      "and in flight, fixed allowance %.1f MB; the stream's records as JSON: %.1f MB)\n",
      static_cast<unsigned long long>(calls), static_cast<unsigned long long>(unbounded_calls),
      grew_mb, static_cast<double>(kShards * per_shard) / 1e6, static_cast<double>(fixed) / 1e6,
      static_cast<double>(stream_json) / 1e6);
  if (kMemoryIsMeasurable && rss_before > 0) {
    EXPECT_LE(rss_after, rss_before + kShards * per_shard + fixed);
  }

  open_gate();
  EXPECT_TRUE(stop(w, 60s).ok());
}

}  // namespace
}  // namespace kcl::worker_test
