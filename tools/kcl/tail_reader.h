// TailReader: reads every shard of a stream without leases, in lineage order: a child shard
// is read once every parent in the listing has been read to its end. For `kcl tail`.
//
// Each shard is read by the library's records source (retrieval::ShardFetcher, the same
// polling source a worker's shard consumer uses, or the fan-out source when one is given: at most 5
// calls per second per shard, the shared backoff on throttling, a new iterator after an expired
// one, KPL deaggregation); this class only decides which shards to read and runs their steps when
// they are due.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "cli_common.h"
#include "kcl/retrieval_config.h"
#include "kinesis/kinesis_client.h"
#include "retrieval/records_source.h"

namespace kcl::cli {

struct TailOptions {
  std::string stream;
  StartPosition from = StartPosition::trim_horizon();
  long long max_records = 0;  // 0 = no limit
  bool stop_at_end = false;   // stop once every shard is caught up
  std::chrono::milliseconds idle_pause{250};
  // Polling: each shard's GetRecords read rate (RetrievalConfig::max_read_bytes_per_second).
  std::size_t read_rate = RetrievalConfig{}.max_read_bytes_per_second;
  // Makes each shard's records source; empty = polling (retrieval::ShardFetcher).
  retrieval::RecordsSourceFactory source_factory;
  // Called before the read waits for its next step (nothing more is due now): flush what was
  // emitted, so a reader of the output sees each record without waiting for the run's end.
  // False stops the read (the output is gone: a quiet stream ends as well as a busy one).
  std::function<bool()> before_wait;
};

class TailReader {
 public:
  // `emit` receives each record (deaggregated); returning false stops the read.
  using Emit = std::function<bool(const Record&)>;
  TailReader(kinesis::KinesisClient& client, TailOptions options, Emit emit);
  // Runs until max_records, stop_at_end, stop_requested() or an error.
  Status run();
  long long emitted() const { return emitted_; }
  long long corrupt_aggregates() const;

 private:
  struct Reading {
    std::shared_ptr<retrieval::RecordsSource> source;
    Clock::MonoTime next_step{};
    bool caught_up = false;
  };
  Status refresh_shards();
  void start_ready_shards();
  void start_shard(const kinesis::Shard& shard, bool first_generation);
  // Emits what the shard's source has queued; false when the read should stop.
  bool emit_queued(Reading& r);

  kinesis::KinesisClient& client_;
  TailOptions o_;
  Emit emit_;
  RetrievalConfig retrieval_;
  std::map<std::string, kinesis::Shard> shards_;
  std::set<std::string> finished_;
  std::set<std::string> started_;
  std::map<std::string, Reading> active_;
  long long emitted_ = 0;
  long long corrupt_done_ = 0;  // corrupt aggregates of sources already finished
  bool stop_ = false;
};

}  // namespace kcl::cli
