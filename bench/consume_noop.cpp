// bench_consume_noop: the library alone, for bench/consume_e2e.py. A kcl::Worker whose
// processor touches every byte of each record's data (a byte sum) and checkpoints each
// batch, reading STREAM from TRIM_HORIZON until EXPECTED records were delivered; then a
// graceful shutdown. Endpoints and credentials come from the environment (AWS_ENDPOINT_URL*,
// AWS_ACCESS_KEY_ID, ...). Prints one JSON line: records, checksum, seconds.
//
//   bench_consume_noop STREAM APPLICATION EXPECTED
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "kcl/worker.h"

namespace {

std::atomic<std::uint64_t> g_records{0};
std::atomic<std::uint64_t> g_checksum{0};

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
    g_records.fetch_add(in.records.size(), std::memory_order_relaxed);
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
  if (argc != 4) {
    std::fprintf(stderr, "usage: bench_consume_noop STREAM APPLICATION EXPECTED\n");
    return 2;
  }
  const std::uint64_t expected = std::strtoull(argv[3], nullptr, 10);
  kcl::WorkerConfig config;
  config.stream_name = argv[1];
  config.leases.application_name = argv[2];
  config.initial_position = kcl::InitialPosition::trim_horizon();
  kcl::Worker worker(config, std::make_shared<Factory>());
  const auto start = std::chrono::steady_clock::now();
  if (kcl::Status s = worker.start(); !s.ok()) {
    std::fprintf(stderr, "bench_consume_noop: %s\n", s.to_string().c_str());
    return 1;
  }
  while (g_records.load() < expected) {
    if (auto stopped = worker.wait_for(std::chrono::milliseconds(20))) {
      std::fprintf(stderr, "bench_consume_noop: stopped early: %s\n", stopped->to_string().c_str());
      return 1;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  kcl::Status stopped = worker.shutdown().get();
  std::printf("{\"records\":%llu,\"checksum\":%llu,\"seconds\":%.3f,\"stopped\":\"%s\"}\n",
              static_cast<unsigned long long>(g_records.load()),
              static_cast<unsigned long long>(g_checksum.load()), seconds,
              stopped.ok() ? "ok" : "error");
  return stopped.ok() ? 0 : 1;
}
