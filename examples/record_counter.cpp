// record_counter: reads a Kinesis stream with a kcl::Worker and counts records per shard.
//
//   record_counter STREAM APPLICATION [CHECKPOINT_EVERY]
//
// - STREAM: the Kinesis stream to read.
// - APPLICATION: the application name; the lease table (in DynamoDB) is named after it.
//   Start the program several times with the same APPLICATION and the shards are shared
//   between the processes; stop one and the others take its shards over.
// - CHECKPOINT_EVERY: checkpoint after this many records of a shard (default 1000).
//
// Region, credentials and endpoints come from the usual places (AWS_REGION, AWS_PROFILE,
// ~/.aws/..., AWS_ENDPOINT_URL for a local emulator). Ctrl-C (SIGINT) or SIGTERM stops it
// gracefully: every shard is checkpointed and its lease handed back, so another process
// continues at once where this one stopped.
#include <signal.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kcl/worker.h"

namespace {

// Counts shared by all shards' processors. Processors of different shards run at the same
// time on the worker's threads, so this is guarded by a mutex.
class Totals {
 public:
  void add(const std::string& shard, std::uint64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    counts_[shard] += n;
  }
  void print() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::uint64_t all = 0;
    for (const auto& [shard, n] : counts_) {
      std::printf("%s: %llu records\n", shard.c_str(), static_cast<unsigned long long>(n));
      all += n;
    }
    std::printf("total: %llu records\n", static_cast<unsigned long long>(all));
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::uint64_t> counts_;
};

// One processor per shard lease this worker holds. The worker calls it from one thread at a
// time: initialize, then process_records for each batch, then exactly one of lease_lost,
// shard_ended or shutdown_requested.
class CountingProcessor final : public kcl::RecordProcessor {
 public:
  CountingProcessor(std::shared_ptr<Totals> totals, std::uint64_t checkpoint_every)
      : totals_(std::move(totals)), checkpoint_every_(checkpoint_every) {}

  void initialize(const kcl::InitializationInput& input) override {
    shard_ = input.shard_id;
    // The stored checkpoint (records after it will come), or TRIM_HORIZON / LATEST /
    // AT_TIMESTAMP for a shard never checkpointed.
    std::printf("%s: starting at %s\n", shard_.c_str(),
                input.starting_position.to_string().c_str());
  }

  void process_records(const kcl::ProcessRecordsInput& input) override {
    // Your per-record work goes here. input.records is in shard order; each record has
    // data, partition_key, sequence_number (and sub_sequence_number for records that came
    // out of a KPL aggregate).
    totals_->add(shard_, input.records.size());
    since_checkpoint_ += input.records.size();

    // Checkpoint every N records: after a restart (or on another worker) reading resumes
    // after the last checkpoint, so records after it are delivered again. Checkpoint only
    // what you have finished with. A checkpoint is a write to DynamoDB: not every record.
    if (since_checkpoint_ >= checkpoint_every_) {
      if (checkpoint(input.checkpointer, "periodic")) since_checkpoint_ = 0;
    }
    // Throwing from here makes the worker deliver the same batch again after a backoff.
  }

  void lease_lost() override {
    // Another worker took the shard over. Do not checkpoint (it would be refused); whatever
    // this processor did after its last checkpoint will be delivered to the new owner again.
    std::printf("%s: lease lost\n", shard_.c_str());
  }

  void shard_ended(kcl::Checkpointer& checkpointer) override {
    // The shard was closed by a split or merge and read to its end. This checkpoint (it
    // records SHARD_END) is required: the child shards start only after it. If it fails,
    // returning without it makes the worker call shard_ended again later.
    checkpoint(checkpointer, "shard end");
  }

  void shutdown_requested(kcl::Checkpointer& checkpointer) override {
    // The worker is stopping gracefully: record how far this shard was processed.
    checkpoint(checkpointer, "shutdown");
  }

 private:
  bool checkpoint(kcl::Checkpointer& checkpointer, const char* why) {
    // checkpoint() with no argument: at the last record delivered to this processor.
    const kcl::Status s = checkpointer.checkpoint();
    if (s.ok()) return true;
    // kLeaseLost: another worker owns the shard now (lease_lost() follows); kUnavailable:
    // DynamoDB was unreachable or throttled, the next checkpoint will try again.
    std::fprintf(stderr, "%s: %s checkpoint failed: %s\n", shard_.c_str(), why,
                 s.to_string().c_str());
    return false;
  }

  std::shared_ptr<Totals> totals_;
  const std::uint64_t checkpoint_every_;
  std::string shard_;
  std::uint64_t since_checkpoint_ = 0;
};

// The worker asks the factory for a processor whenever it starts reading a shard.
class CountingFactory final : public kcl::RecordProcessorFactory {
 public:
  CountingFactory(std::shared_ptr<Totals> totals, std::uint64_t checkpoint_every)
      : totals_(std::move(totals)), checkpoint_every_(checkpoint_every) {}
  std::unique_ptr<kcl::RecordProcessor> create(std::string_view) override {
    return std::make_unique<CountingProcessor>(totals_, checkpoint_every_);
  }

 private:
  std::shared_ptr<Totals> totals_;
  std::uint64_t checkpoint_every_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s STREAM APPLICATION [CHECKPOINT_EVERY]\n", argv[0]);
    return 2;
  }
  std::uint64_t checkpoint_every = 1000;
  if (argc == 4) {
    checkpoint_every = std::strtoull(argv[3], nullptr, 10);
    if (checkpoint_every == 0) {
      std::fprintf(stderr, "CHECKPOINT_EVERY must be a positive number\n");
      return 2;
    }
  }

  // 1. Signals. Block SIGINT and SIGTERM before the worker starts its threads (they inherit
  // the mask), so the signals stay pending until the main thread takes them with
  // sigtimedwait below. No signal handler runs, so nothing async-signal-unsafe can happen.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // 2. Configuration. Only the stream and the application name are required; every other
  // field has a default (see kcl/worker.h, kcl/lease_config.h, kcl/retrieval_config.h).
  kcl::WorkerConfig config;
  config.stream_name = argv[1];
  config.leases.application_name = argv[2];
  // A new application reads from the oldest record still in the stream. (The default,
  // LATEST, would count only records written from now on.) This applies only to shards
  // that have no checkpoint yet; the others resume after their checkpoint.
  config.initial_position = kcl::InitialPosition::trim_horizon();

  auto totals = std::make_shared<Totals>();
  kcl::Worker worker(config, std::make_shared<CountingFactory>(totals, checkpoint_every));

  // 3. Start: validates the configuration, creates the lease table if needed, creates the
  // shards' leases, starts the threads. Fails at once for a bad configuration, missing
  // credentials or a stream that does not exist.
  if (const kcl::Status s = worker.start(); !s.ok()) {
    std::fprintf(stderr, "could not start: %s\n", s.to_string().c_str());
    return 1;
  }
  std::printf("worker %s reading %s; Ctrl-C to stop\n", worker.worker_id().c_str(),
              config.stream_name.c_str());

  // 4. Run until a signal arrives or the worker stops on its own (e.g. the stream was
  // deleted). shutdown() is graceful: processors get shutdown_requested (final checkpoints),
  // then the leases are handed back. wait_for() tells when the worker has stopped.
  kcl::Status why;
  for (;;) {
    if (auto stopped = worker.wait_for(std::chrono::milliseconds(0))) {
      why = *stopped;
      break;
    }
    timespec tick{0, 250 * 1000 * 1000};  // wake up now and then to see if the worker stopped
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      std::printf("stopping (signal %d)...\n", sig);
      why = worker.shutdown();  // blocks until the graceful shutdown is complete
      break;
    }
  }

  totals->print();
  if (!why.ok()) {
    std::fprintf(stderr, "the worker stopped: %s\n", why.to_string().c_str());
    return 1;
  }
  return 0;
}
