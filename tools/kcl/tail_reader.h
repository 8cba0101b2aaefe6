// TailReader: reads every shard of a stream without leases, in lineage order: a child shard
// is read once every parent in the listing has been read to its end. For `kcl tail`.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>

#include "cli_common.h"
#include "kinesis/kinesis_client.h"

namespace kcl::cli {

struct TailOptions {
  std::string stream;
  StartPosition from;
  long long max_records = 0;  // 0 = no limit
  bool stop_at_end = false;   // stop once every shard is caught up
  std::chrono::milliseconds idle_pause{250};
};

class TailReader {
 public:
  // `emit` receives each record (deaggregated); returning false stops the read.
  using Emit = std::function<bool(const Record&)>;
  TailReader(kinesis::KinesisClient& client, TailOptions options, Emit emit);
  // Runs until max_records, stop_at_end, stop_requested() or an error.
  Status run();
  long long emitted() const { return emitted_; }
  long long corrupt_aggregates() const { return corrupt_; }

 private:
  struct Reading {
    std::string iterator;
    std::string last_sequence;  // of the last record emitted (for ExpiredIterator)
    bool caught_up = false;
    std::chrono::steady_clock::time_point next_call{};
  };
  Status refresh_shards();
  Status start_ready_shards();
  Status start_shard(const kinesis::Shard& shard, bool first_generation);
  Result<bool> poll(const std::string& shard_id, Reading& r);  // true: keep going

  kinesis::KinesisClient& client_;
  TailOptions o_;
  Emit emit_;
  std::map<std::string, kinesis::Shard> shards_;
  std::set<std::string> finished_;
  std::set<std::string> started_;
  std::map<std::string, Reading> active_;
  long long emitted_ = 0;
  long long corrupt_ = 0;
  bool stop_ = false;
};

}  // namespace kcl::cli
