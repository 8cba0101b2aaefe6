// bench_consume_noop: the library alone, for bench/consume_e2e.py. A kcl::Worker whose
// processor touches every byte of each record's data (a byte sum) and checkpoints each
// batch, reading STREAM from TRIM_HORIZON until EXPECTED records were delivered; then a
// graceful shutdown. Endpoints and credentials come from the environment (AWS_ENDPOINT_URL*,
// AWS_ACCESS_KEY_ID, ...). Prints one JSON line: records, checksum, seconds. PER_CALL, when
// given, sets RetrievalConfig::max_records_per_call and max_prefetch_records (smaller
// responses: less memory per shard, more calls).
//
//   bench_consume_noop STREAM APPLICATION EXPECTED [PER_CALL]
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "kcl/worker.h"

namespace {

std::atomic<std::uint64_t> g_records{0};
std::atomic<std::uint64_t> g_checksum{0};
std::uint64_t g_expected = 0;
// Signalled once g_records reaches g_expected: the main thread sleeps until then rather than
// polling (its wake-ups would be counted as the library's CPU).
std::mutex g_mu;
std::condition_variable g_done;

class TouchingProcessor final : public kcl::RecordProcessor {
 public:
  void initialize(const kcl::InitializationInput&) override {}
  void process_records(const kcl::ProcessRecordsInput& in) override {
    // A sum of every byte: reads all the data (the compiler vectorises it), without a
    // multiply chain per byte that would measure the processor rather than the library.
    std::uint64_t sum = 0;
    for (const kcl::Record& r : in.records) {
      for (unsigned char c : r.data()) sum += c;
    }
    g_checksum.fetch_add(sum, std::memory_order_relaxed);
    (void)in.checkpointer.checkpoint();
    const std::uint64_t n = in.records.size();
    if (g_records.fetch_add(n, std::memory_order_relaxed) + n >= g_expected) {
      std::lock_guard<std::mutex> lock(g_mu);
      g_done.notify_all();
    }
  }
  void shard_ended(kcl::Checkpointer& cp) override { (void)cp.checkpoint(); }
  void shutdown_requested(kcl::Checkpointer& cp) override { (void)cp.checkpoint(); }
};

class Factory final : public kcl::RecordProcessorFactory {
 public:
  std::unique_ptr<kcl::RecordProcessor> create(std::string_view) override {
    return std::make_unique<TouchingProcessor>();
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: bench_consume_noop STREAM APPLICATION EXPECTED [PER_CALL]\n");
    return 2;
  }
  const std::uint64_t expected = std::strtoull(argv[3], nullptr, 10);
  g_expected = expected;
  kcl::WorkerConfig config;
  config.stream_name = argv[1];
  config.leases.application_name = argv[2];
  config.initial_position = kcl::InitialPosition::trim_horizon();
  if (argc == 5) {
    const unsigned long per_call = std::strtoul(argv[4], nullptr, 10);
    config.retrieval.max_records_per_call = static_cast<int>(per_call);
    config.retrieval.max_prefetch_records = per_call;
  }
  kcl::Worker worker(config, std::make_shared<Factory>());
  const auto start = std::chrono::steady_clock::now();
  if (kcl::Status s = worker.start(); !s.ok()) {
    std::fprintf(stderr, "bench_consume_noop: %s\n", s.to_string().c_str());
    return 1;
  }
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(g_mu);
      if (g_done.wait_for(lock, std::chrono::seconds(1),
                          [&] { return g_records.load() >= expected; })) {
        break;
      }
    }
    if (auto stopped = worker.wait_for(std::chrono::milliseconds(0))) {
      std::fprintf(stderr, "bench_consume_noop: stopped early: %s\n", stopped->to_string().c_str());
      return 1;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  kcl::Status stopped = worker.shutdown();
  std::printf("{\"records\":%llu,\"checksum\":%llu,\"seconds\":%.3f,\"stopped\":\"%s\"}\n",
              static_cast<unsigned long long>(g_records.load()),
              static_cast<unsigned long long>(g_checksum.load()), seconds,
              stopped.ok() ? "ok" : "error");
  return stopped.ok() ? 0 : 1;
}
