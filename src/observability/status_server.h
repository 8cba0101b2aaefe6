// observability/status_server.h: the worker's embedded HTTP endpoint (cpp-httplib).
//
//   GET /metrics      Prometheus text exposition 0.0.4 of a MetricsRegistry
//   GET /healthz      200 {"status":"live"} unless the worker failed (503 + reason)
//   GET /readyz       200 once shards are synced and leases may be held; else 503 + reason
//   GET /status.json  the fleet: every shard of the lease table (owner, checkpoint, lineage,
//                     state) with the figures its owner reports (lag, records/s, last
//                     progress, consumer state), and every worker with its health (live,
//                     ready, warnings, CPU, RSS, threads, version) or why it cannot be reached
//   GET /status.json?scope=local
//                     this worker's own report (fleet_figures.h): what its peers fetch
//   GET /status       a self-refreshing HTML page of the fleet view (no external resources)
//
// The server's own timer thread makes a snapshot every `refresh_interval`; requests only
// read snapshots (never a lock held by a consumer, never a DynamoDB call on a request). This
// worker's own report comes from what it already has (its consumers' states, its metrics
// registry): no read of any table. The fleet view, and with it the one read of the lease
// table, is gathered by the same thread only while someone asks for it (a request in the last
// minute): the lease table, the peers' addresses from `StatusSources::peers` (cached 5 s),
// their reports fetched at once within `peer_timeout` (peer_fetch.h). A worker whose page
// nobody looks at reads no table. A
// request that finds no gathered view younger than two refreshes waits for the next one (up
// to 2 x peer_timeout). Limits: request headers up to 8 KiB (431 beyond), no request bodies,
// read/write timeouts, a fixed number of request threads; anything else is 404/405.
//
// Thread safety: start() and stop() from one thread; everything else is internal.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kcl/lease.h"
#include "kcl/status.h"
#include "metrics/metrics_registry.h"

namespace kcl::observability {

// A shard of this worker flagged stalled (lifecycle/stall_detector.h).
struct StalledShard {
  std::string shard;  // the lease key
  std::string cause;
  std::string detail;
  std::int64_t since_ms = 0;  // wall clock (Unix epoch ms) when what is in its way began
};

// What the worker says about itself.
struct HealthState {
  bool live = true;
  std::string live_reason;  // why not live
  bool ready = false;
  std::string ready_reason;  // why not ready
  // Live and ready, but something keeps failing (e.g. "membership heartbeat failing for
  // 3.2 s, 7 times in a row: ..."); shown on the status page.
  std::vector<std::string> warnings;
  // Shards of this worker that are stalled: /readyz answers 200 "degraded" with them, and
  // /status.json gives each its `stalled` object.
  std::vector<StalledShard> stalled;
};

struct StatusServerConfig {
  // "PORT", ":PORT", "HOST:PORT" or "[IPv6]:PORT". Without a host: 127.0.0.1. Port 0 picks
  // a free port (see StatusServer::port()). Required.
  std::string address;
  // How often the lease table is read and the records/s samples taken. Default 2 s,
  // range 100 ms..1 min.
  std::chrono::milliseconds refresh_interval{2000};
  // How much records/s history the page shows. Default 5 min, range 10 s..1 h.
  std::chrono::seconds history{300};
  // Request threads. Default 8, range 1..64. A client that sends half a request holds one
  // for up to keep-alive wait + io_timeout (about 4 s); more such clients than threads delay
  // other requests by that much per round, never the worker.
  int threads = 8;
  // Read and write timeout per request (also the keep-alive wait, rounded to seconds).
  // Default 2 s, range 100 ms..1 min.
  std::chrono::milliseconds io_timeout{2000};
  // Connect and answer timeout for each peer's report in the fleet view. Default 1 s,
  // range 50 ms..10 s.
  std::chrono::milliseconds peer_timeout{1000};

  std::vector<std::string> validate() const;
};

// Host and port from an address as StatusServerConfig::address describes it.
Result<std::pair<std::string, int>> parse_http_address(std::string_view address);

// A worker and the status endpoint it published ("http://HOST:PORT"; empty: none).
struct PeerAddress {
  std::string worker_id;
  std::string url;
  bool operator==(const PeerAddress&) const = default;
};

// Where the server's data comes from; every function is called on the server's threads.
struct StatusSources {
  std::string application;
  std::string stream;
  std::string worker_id;
  std::shared_ptr<metrics::MetricsRegistry> registry;       // required
  std::function<Result<std::vector<Lease>>()> list_leases;  // required
  std::function<HealthState()> health;                      // required
  // Lease key -> the state of this worker's consumer of it ("processing", ...). Optional:
  // without it, this worker's shards are those the lease table names it the owner of.
  std::function<std::map<std::string, std::string>()> shard_states;
  // The fleet's workers and the status endpoints they published (this one included).
  // Optional: without it, or when it fails, the fleet view has this worker's figures only
  // and says why (`peers_note`, or the error).
  std::function<Result<std::vector<PeerAddress>>()> peers;
  std::string peers_note = "no directory of the workers' status endpoints";
};

// One shard as shown on the page (from the last snapshot).
struct ShardView {
  std::string shard_id;  // the lease key: the shard id, or "<stream id>:<shard id>"
  std::string stream;    // the stream's name, in a multi-stream table; else empty
  // The shard's key in this worker's metric series: the shard id, or "<stream>/<shard id>".
  std::string series_key;
  std::string owner;       // the worker reading it (the old owner during a handoff); empty: free
  std::string handoff_to;  // a graceful handoff to this worker is pending; empty when none
  std::string checkpoint;
  std::vector<std::string> parents;
  std::vector<std::string> children;
  std::string state;  // "waiting on parent", "reading", "handing off", "ended", "unassigned"
};

class StatusServer {
 public:
  StatusServer(StatusServerConfig config, StatusSources sources);
  ~StatusServer();  // stops
  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;

  // Binds and starts serving; returns once listening. Errors: kInvalidArgument for a bad
  // address or configuration, kUnavailable when the port cannot be bound.
  Status start();
  void stop();
  int port() const { return port_; }
  // http://HOST:PORT of the bound address, on this machine (0.0.0.0 as 127.0.0.1, :: as
  // [::1]); what peers are told is WorkerEndpoint's (worker_endpoint.h).
  std::string url() const;

  // The JSON of /status.json (from the last snapshot), for tests and `kcl status`.
  std::string status_json() const;
  // The JSON of /status.json?scope=local (from the last snapshot).
  std::string local_json() const;
  // Takes a snapshot now (the timer does this on its own).
  void refresh();
  // How many times the lease table was read so far: only for a fleet view someone asked for
  // in the last minute, or when the sources give no shard_states (refresh()).
  std::uint64_t table_reads() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// Fleet view built from a lease table listing (shared with `kcl status`): shards sorted by
// id with their state, and the workers with their lease counts.
struct FleetView {
  std::vector<ShardView> shards;
  std::map<std::string, int> workers;  // owner -> leases held
};
FleetView fleet_view(const std::vector<Lease>& leases);

// The page served at /status (HTML, CSS and a small script; polls /status.json).
std::string_view status_page_html();

}  // namespace kcl::observability
