// observability/fleet_figures.h: what one worker tells the others about itself, and how the
// fleet view is put together from those reports.
//
// Each worker serves its own report at /status.json?scope=local: its health (live, ready,
// warnings, process CPU, RSS, threads, version) and the figures of the shards it reads (lag,
// records/s, last progress, consumer state). A worker asked for the fleet view fetches its
// peers' reports (peer_fetch.h) and merges them with the lease table's listing (fleet_json):
// every shard gets the figures of the worker that reported it (its owner first), every worker
// its health, or why it could not be reached.
//
// Every struct serialises all of its fields (to_json) and reads them back leniently
// (from_json: a missing field keeps its default, so reports of older and newer workers mix).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "observability/status_server.h"

namespace kcl::observability {

// One shard's figures, from the worker reading it.
struct ShardFigures {
  std::string shard_id;                    // the lease key
  std::optional<double> millis_behind;     // MillisBehindLatest of the last batch
  std::vector<double> records_per_second;  // samples, oldest first
  // Wall clock (epoch ms) when this worker last saw records processed on the shard.
  std::optional<std::int64_t> last_progress_ms;
  std::string consumer_state;  // "processing", "initializing", ...; empty when not known
  // Records of the shard handed to the dead-letter sink by this worker so far.
  double dead_lettered = 0;
  // Set while the worker flags the shard stalled (its `shard` is the lease key).
  std::optional<StalledShard> stalled;
};

// The worker process, as /proc shows it.
struct ProcessFigures {
  double cpu_seconds = 0;             // user + system since the process started
  std::optional<double> cpu_percent;  // of one core, since the previous sample
  std::int64_t rss_bytes = 0;
  int threads = 0;
  std::int64_t uptime_ms = 0;  // since the status server started
};

struct WorkerHealth {
  std::string worker_id;
  std::string version;  // kcl-cpp's
  bool live = true;
  bool ready = false;
  std::vector<std::string> warnings;
  ProcessFigures process;
};

// What /status.json?scope=local serves.
struct LocalReport {
  std::int64_t generated_at_ms = 0;
  WorkerHealth worker;
  std::vector<ShardFigures> shards;  // the shards this worker reads
};

// A peer as the fleet view knows it: from the directory, and what fetching its report gave.
struct PeerReport {
  std::string worker_id;
  std::string url;  // its status endpoint; empty when it published none
  std::optional<LocalReport> report;
  std::string error;  // why there is no report
};

void to_json(nlohmann::json& j, const ShardFigures& f);
void from_json(const nlohmann::json& j, ShardFigures& f);
void to_json(nlohmann::json& j, const ProcessFigures& p);
void from_json(const nlohmann::json& j, ProcessFigures& p);
void to_json(nlohmann::json& j, const WorkerHealth& h);
void from_json(const nlohmann::json& j, WorkerHealth& h);
void to_json(nlohmann::json& j, const LocalReport& r);
void from_json(const nlohmann::json& j, LocalReport& r);

// A local report from the text of /status.json?scope=local; kInternal naming what is wrong.
Result<LocalReport> parse_local_report(std::string_view text);

// How the fleet view found its peers, for the page ("coordination table", or a note saying
// why only this worker's figures are shown).
struct FleetSources {
  std::string directory;
  std::int64_t now_ms = 0;
};

// The "shards", "workers" and "fleet" members of the fleet view: the lease table's listing
// with every shard's figures from the report that covers it (the owner's first, else the
// newest that has it) and every worker's health. `self` is this worker's own report (null
// when the view is not a worker's, e.g. `kcl status`); `peers` the others (a peer named here
// that owns nothing is listed too).
nlohmann::json fleet_json(const FleetView& view, const std::string& self_id,
                          const LocalReport* self, const std::vector<PeerReport>& peers,
                          const FleetSources& sources);

}  // namespace kcl::observability
