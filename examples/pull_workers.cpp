// pull_workers: reads a Kinesis stream with a kcl::PullConsumer and completes records on a
// pool of threads, in whatever order they finish; each record is acknowledged when done, and
// each shard's checkpoint follows the oldest record not yet acknowledged.
//
//   pull_workers STREAM APPLICATION [--threads N] [--work-us N] [--print] [--stop-after N]
//                [--fan-out]
//
// - STREAM, APPLICATION: as for record_counter (the lease table is named after APPLICATION;
//   start the program several times with the same APPLICATION to share the shards).
// - --threads N: threads completing records (default 8).
// - --work-us N: each record takes a random 0..N microseconds of "work" (default 1000), so
//   records finish out of order.
// - --print: one line per record completed on stdout: "<shard> <sequence> <sub-sequence>".
// - --stop-after N: stop gracefully once N records were completed (default: run until
//   SIGINT or SIGTERM).
// - --fan-out: read with enhanced fan-out (a stream consumer named after APPLICATION)
//   instead of polling; everything else is the same.
//
// Region, credentials and endpoints come from the usual places (AWS_REGION, AWS_PROFILE,
// ~/.aws/..., AWS_ENDPOINT_URL for a local emulator). SIGINT or SIGTERM stops it gracefully:
// no more records are taken, the records in flight are finished and acknowledged, each
// shard's checkpoint is written and the leases are handed back. At the end it prints the
// records completed, the wall time and the process's CPU time per record on stderr.
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kcl/pull_consumer.h"

namespace {

// Records handed from the pulling thread to the completing threads.
class WorkQueue {
 public:
  void push(std::vector<kcl::PulledRecord>&& batch) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& r : batch) items_.push_back(std::move(r));
    cv_.notify_all();
  }
  // The next record; nothing once closed and empty.
  std::optional<kcl::PulledRecord> pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return std::nullopt;
    kcl::PulledRecord r = std::move(items_.front());
    items_.pop_front();
    return r;
  }
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<kcl::PulledRecord> items_;
  bool closed_ = false;
};

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s STREAM APPLICATION [--threads N] [--work-us N] [--print] "
               "[--stop-after N] [--fan-out]\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage(argv[0]);
  int threads = 8;
  long work_us = 1000;
  bool print = false;
  bool fan_out = false;
  std::uint64_t stop_after = 0;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    auto number = [&](long lo) -> long {
      if (i + 1 >= argc) return -1;
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      return (*end != '\0' || v < lo) ? -1 : v;
    };
    if (a == "--threads") {
      threads = static_cast<int>(number(1));
      if (threads < 1) return usage(argv[0]);
    } else if (a == "--work-us") {
      work_us = number(0);
      if (work_us < 0) return usage(argv[0]);
    } else if (a == "--stop-after") {
      const long n = number(1);
      if (n < 1) return usage(argv[0]);
      stop_after = static_cast<std::uint64_t>(n);
    } else if (a == "--print") {
      print = true;
    } else if (a == "--fan-out") {
      fan_out = true;
    } else {
      return usage(argv[0]);
    }
  }

  // Block SIGINT and SIGTERM before any thread starts (threads inherit the mask); the main
  // thread takes them with sigtimedwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  kcl::PullConsumerConfig config;
  config.worker.stream_name = argv[1];
  config.worker.leases.application_name = argv[2];
  config.worker.initial_position = kcl::InitialPosition::trim_horizon();
  if (fan_out) config.worker.retrieval.mode = kcl::RetrievalMode::kFanOut;
  kcl::PullConsumer consumer(config);
  if (const kcl::Status s = consumer.start(); !s.ok()) {
    std::fprintf(stderr, "could not start: %s\n", s.to_string().c_str());
    return 1;
  }
  std::fprintf(stderr, "worker %s pulling from %s with %d threads; Ctrl-C to stop\n",
               consumer.worker_id().c_str(), config.worker.stream_name.c_str(), threads);
  const auto started = std::chrono::steady_clock::now();
  const double cpu_at_start = cpu_seconds();

  // The completing threads: a record's "work" takes a random time, so they finish (and are
  // acknowledged) out of order.
  WorkQueue queue;
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> refused{0};
  std::mutex print_mu;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) * 7919u + 1u);
      while (auto r = queue.pop()) {
        if (work_us > 0) {
          std::this_thread::sleep_for(
              std::chrono::microseconds(std::uniform_int_distribution<long>(0, work_us)(rng)));
        }
        const kcl::Record& rec = r->record();
        if (print) {
          std::lock_guard<std::mutex> lock(print_mu);
          std::printf("%.*s %.*s %llu\n", static_cast<int>(rec.shard_id().size()),
                      rec.shard_id().data(), static_cast<int>(rec.sequence_number().size()),
                      rec.sequence_number().data(),
                      static_cast<unsigned long long>(rec.sub_sequence_number()));
          std::fflush(stdout);
        }
        // kLeaseLost: another worker owns the shard now and delivers the record again.
        if (r->ack().ok()) {
          completed.fetch_add(1);
        } else {
          refused.fetch_add(1);
        }
      }
    });
  }

  // The pulling thread: takes records in batches and hands them to the pool.
  std::atomic<bool> stop_pulling{false};
  std::thread puller([&] {
    while (!stop_pulling.load()) {
      auto batch = consumer.next_batch(256, std::chrono::milliseconds(200));
      if (!batch.empty()) queue.push(std::move(batch));
    }
  });

  kcl::Status why;
  for (;;) {
    if (auto stopped = consumer.wait_for(std::chrono::milliseconds(0))) {
      why = *stopped;
      break;
    }
    if (stop_after > 0 && completed.load() >= stop_after) break;
    timespec tick{0, 100 * 1000 * 1000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) break;
  }
  // Graceful stop: no more pulling; shutdown() waits for the records in flight (the pool
  // keeps finishing them), checkpoints and hands the leases back.
  stop_pulling.store(true);
  puller.join();
  if (why.ok()) why = consumer.shutdown();
  queue.close();
  for (auto& th : pool) th.join();

  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const double cpu = cpu_seconds() - cpu_at_start;
  const std::uint64_t n = completed.load();
  std::fprintf(stderr,
               "completed %llu records (%llu acks refused after a lease moved) in %.2f s: "
               "%.0f records/s, %.2f us CPU per record\n",
               static_cast<unsigned long long>(n), static_cast<unsigned long long>(refused.load()),
               wall, n > 0 ? static_cast<double>(n) / wall : 0.0,
               n > 0 ? cpu * 1e6 / static_cast<double>(n) : 0.0);
  if (!why.ok()) {
    std::fprintf(stderr, "stopped: %s\n", why.to_string().c_str());
    return 1;
  }
  return 0;
}
