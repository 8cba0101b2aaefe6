#include "observability/status_server.h"

// Debian builds cpp-httplib as a library: its compiled limits apply (request line and each
// header up to 8 KiB; larger is refused with 414 / 400 and the connection closed).
#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "base/thread_name.h"
#include "kcl/version.h"
#include "leases/stream_identifier.h"
#include "observability/fleet_figures.h"
#include "observability/local_figures.h"
#include "observability/peer_fetch.h"
#include "observability/process_figures.h"

namespace kcl::observability {

using json = nlohmann::json;

Result<std::pair<std::string, int>> parse_http_address(std::string_view address) {
  std::string host = "127.0.0.1";
  std::string_view port_text = address;
  if (!address.empty() && address.front() == '[') {
    auto close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return Status(StatusCode::kInvalidArgument,
                    "http address '" + std::string(address) + "': expected [IPv6]:PORT");
    }
    host = std::string(address.substr(1, close - 1));
    port_text = address.substr(close + 2);
  } else if (auto colon = address.rfind(':'); colon != std::string_view::npos) {
    if (colon > 0) host = std::string(address.substr(0, colon));
    port_text = address.substr(colon + 1);
  }
  int port = -1;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port < 0 || port > 65535) {
    return Status(StatusCode::kInvalidArgument,
                  "http address '" + std::string(address) +
                      "': the port must be a number 0..65535 (forms: PORT, HOST:PORT, "
                      "[IPv6]:PORT)");
  }
  return std::make_pair(host, port);
}

std::vector<std::string> StatusServerConfig::validate() const {
  std::vector<std::string> out;
  if (auto p = parse_http_address(address); !p.ok()) out.push_back(p.status().message());
  if (refresh_interval < std::chrono::milliseconds(100) ||
      refresh_interval > std::chrono::minutes(1)) {
    out.push_back("refresh_interval must be between 100 ms and 1 min");
  }
  if (history < std::chrono::seconds(10) || history > std::chrono::hours(1)) {
    out.push_back("history must be between 10 s and 1 h");
  }
  if (threads < 1 || threads > 64) out.push_back("threads must be between 1 and 64");
  if (io_timeout < std::chrono::milliseconds(100) || io_timeout > std::chrono::minutes(1)) {
    out.push_back("io_timeout must be between 100 ms and 1 min");
  }
  if (peer_timeout < std::chrono::milliseconds(50) || peer_timeout > std::chrono::seconds(10)) {
    out.push_back("peer_timeout must be between 50 ms and 10 s");
  }
  return out;
}

FleetView fleet_view(const std::vector<Lease>& leases) {
  FleetView view;
  std::map<std::string, const Lease*> by_key;
  for (const Lease& l : leases) by_key[l.lease_key] = &l;
  for (const auto& [key, l] : by_key) {
    ShardView s;
    s.shard_id = key;
    s.stream = leases::lease_stream_name(*l);
    const std::string_view shard = leases::lease_shard_id(*l);
    s.series_key = s.stream.empty() ? key : s.stream + "/" + std::string(shard);
    const std::string_view stream_id = leases::lease_stream_identifier(*l);
    s.owner = l->actual_owner().value_or("");
    if (l->checkpoint_owner) s.handoff_to = l->lease_owner.value_or("");
    s.checkpoint = l->checkpoint.to_string();
    s.parents = l->parent_shard_ids;
    s.children = l->child_shard_ids;
    bool parents_done = true;
    for (const auto& p : l->parent_shard_ids) {
      // Parent ids are shard ids of the lease's own stream.
      auto it = by_key.find(stream_id.empty() ? p : leases::multi_stream_lease_key(stream_id, p));
      // A parent without a lease was trimmed (or never had one): not waited on.
      if (it != by_key.end() && !it->second->checkpoint.is_shard_end()) parents_done = false;
    }
    if (l->checkpoint.is_shard_end()) {
      s.state = "ended";
    } else if (!parents_done) {
      s.state = "waiting on parent";
    } else if (!s.handoff_to.empty()) {
      s.state = "handing off";
    } else if (!s.owner.empty()) {
      s.state = "reading";
    } else {
      s.state = "unassigned";
    }
    if (!s.owner.empty()) ++view.workers[s.owner];
    view.shards.push_back(std::move(s));
  }
  return view;
}

namespace {

// A JSON document as text. Whatever the worker shows may hold text from elsewhere (a
// processor's checkpoint argument in a stall's detail, a table's name): bytes that are not
// UTF-8 become U+FFFD instead of an exception, which on the refresh thread would end the
// process.
std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The key of a shard's series in this worker's metrics: the shard id, or "<stream>/<shard id>"
// for a multi-stream lease key (as ShardView::series_key).
std::string series_key_of(const std::string& lease_key) {
  Lease l;
  l.lease_key = lease_key;
  const std::string stream = leases::lease_stream_name(l);
  return stream.empty() ? lease_key : stream + "/" + std::string(leases::lease_shard_id(l));
}

// /healthz and /readyz: 200 or 503 with {"status": ..., "reason": why not}.
void health_response(httplib::Response& res, bool ok, const char* good, const char* bad,
                     const std::string& reason) {
  json body = {{"status", ok ? good : bad}};
  if (!ok) body["reason"] = reason;
  res.status = ok ? 200 : 503;
  res.set_content(json_text(body), "application/json");
}

json stalled_json(const StalledShard& s) {
  return {{"cause", s.cause}, {"detail", s.detail}, {"since_ms", s.since_ms}};
}

// /readyz: 503 while not ready; ready but with stalled shards, 200 "degraded" naming them.
void readiness_response(httplib::Response& res, const HealthState& h) {
  if (!h.ready || h.stalled.empty()) {
    health_response(res, h.ready, "ready", "not ready", h.ready_reason);
    return;
  }
  json stalled = json::array();
  for (const StalledShard& s : h.stalled) {
    json j = stalled_json(s);
    j["shard"] = s.shard;
    stalled.push_back(std::move(j));
  }
  json body = {{"status", "degraded"},
               {"reason", std::to_string(h.stalled.size()) + " shard(s) stalled"},
               {"stalled", std::move(stalled)}};
  res.status = 200;
  res.set_content(json_text(body), "application/json");
}

void set_io_limits(httplib::Server& srv, const StatusServerConfig& config) {
  const int threads = config.threads;
  srv.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  const auto io = config.io_timeout;
  srv.set_read_timeout(io.count() / 1000, (io.count() % 1000) * 1000);
  srv.set_write_timeout(io.count() / 1000, (io.count() % 1000) * 1000);
  srv.set_keep_alive_timeout(std::max<time_t>(1, static_cast<time_t>(io.count() / 1000)));
  srv.set_keep_alive_max_count(100);
  srv.set_payload_max_length(1024);  // GET only: no request bodies to speak of
}

void set_error_handlers(httplib::Server& srv) {
  srv.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    // cpp-httplib calls this for every status >= 400, also for the 503s our handlers wrote.
    if (!res.body.empty()) return;
    json body = {{"error", res.status == 404   ? "not found"
                           : res.status == 405 ? "method not allowed (GET only)"
                           : res.status == 431 ? "request headers too large"
                                               : "bad request"},
                 {"status", res.status},
                 {"paths", {"/metrics", "/healthz", "/readyz", "/status", "/status.json"}}};
    res.set_content(json_text(body), "application/json");
  });
  srv.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content(R"({"error":"internal error"})", "application/json");
      });
}

}  // namespace

struct StatusServer::Impl {
  using SteadyTime = std::chrono::steady_clock::time_point;

  StatusServerConfig config;
  StatusSources sources;
  httplib::Server server;
  std::thread listener;
  std::thread refresher;

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;  // guarded by stop_mu
  bool wake = false;      // guarded by stop_mu: a request wants a fleet view now

  // One refresh at a time (the refresher's, or refresh() called by a test); guards the
  // refresher's state below.
  std::mutex refresh_mu;
  std::unique_ptr<LocalFigures> figures;
  ProcessSampler process;
  std::vector<PeerAddress> directory;
  std::string directory_note;
  SteadyTime directory_at{};

  // Until when (steady clock, ms since its epoch) the refresher gathers the fleet view.
  std::atomic<std::int64_t> fleet_wanted_until{0};
  std::atomic<std::uint64_t> table_reads{0};  // reads of the lease table so far

  mutable std::mutex snap_mu;  // guards the snapshots (pointer swaps; readers copy them)
  std::condition_variable snap_cv;
  std::shared_ptr<const std::string> snapshot = std::make_shared<const std::string>("{}");
  std::shared_ptr<const std::string> local_snapshot = std::make_shared<const std::string>("{}");
  SteadyTime gathered_at{};  // when the last gathered fleet view was made

  static std::int64_t steady_ms(SteadyTime t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  }
  static std::int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  std::shared_ptr<const std::string> current(bool local) const {
    std::lock_guard<std::mutex> lock(snap_mu);
    return local ? local_snapshot : snapshot;
  }

  // The fleet view for a request: one gathered no longer ago than two refreshes, waiting for
  // the next refresh when there is none (the first request after a quiet minute).
  std::shared_ptr<const std::string> fleet_for_request() {
    const auto now = std::chrono::steady_clock::now();
    fleet_wanted_until.store(steady_ms(now + std::chrono::minutes(1)));
    std::unique_lock<std::mutex> lock(snap_mu);
    if (gathered_at + 2 * config.refresh_interval < now) {
      {
        std::lock_guard<std::mutex> s(stop_mu);
        wake = true;
      }
      stop_cv.notify_all();
      snap_cv.wait_for(lock, 2 * config.peer_timeout + config.refresh_interval,
                       [&] { return gathered_at >= now; });
    }
    return snapshot;
  }

  // The shards this worker reads: its consumers when the worker says (no read of the table),
  // else the lease table's.
  std::vector<OwnShard> own_shards(const FleetView& view) const {
    std::vector<OwnShard> own;
    if (sources.shard_states) {
      for (const auto& [key, state] : sources.shard_states()) {
        own.push_back({key, series_key_of(key), state});
      }
      return own;
    }
    for (const auto& s : view.shards) {
      if (s.owner == sources.worker_id) own.push_back({s.shard_id, s.series_key, ""});
    }
    return own;
  }

  LocalReport local_report(const HealthState& h, const FleetView& view, SteadyTime now,
                           std::int64_t now_ms) {
    LocalReport r;
    r.generated_at_ms = now_ms;
    r.worker.worker_id = sources.worker_id;
    r.worker.version = std::string(kcl::version());
    r.worker.live = h.live;
    r.worker.ready = h.ready;
    r.worker.warnings = h.warnings;
    r.worker.process = process.sample();
    r.shards = figures->sample(*sources.registry, own_shards(view), now, now_ms);
    std::map<std::string, const StalledShard*> stalled;
    for (const StalledShard& s : h.stalled) stalled[s.shard] = &s;
    for (ShardFigures& f : r.shards) {
      if (auto it = stalled.find(f.shard_id); it != stalled.end()) {
        f.stalled = *it->second;
        stalled.erase(it);
      }
    }
    // A stall this worker sees on a shard it does not read (a lease held by no live worker):
    // reported with no other figure, so any worker's view shows it.
    for (const auto& [key, s] : stalled) {
      ShardFigures f;
      f.shard_id = key;
      f.stalled = *s;
      r.shards.push_back(std::move(f));
    }
    return r;
  }

  // The peers' addresses, read at most every 5 s; the last list when a read fails.
  const std::vector<PeerAddress>& peer_directory(SteadyTime now) {
    if (!sources.peers) {
      directory_note = sources.peers_note;
      return directory;
    }
    if (directory_at != SteadyTime{} && now - directory_at < std::chrono::seconds(5)) {
      return directory;
    }
    directory_at = now;
    auto read = sources.peers();
    if (read.ok()) {
      directory = std::move(read).value();
      directory_note = sources.peers_note;
    } else {
      directory_note = sources.peers_note +
                       " (reading it failed, the last list is used: " + read.status().to_string() +
                       ")";
    }
    return directory;
  }

  // The other workers' reports; this worker's own entry (its published address, no report).
  std::vector<PeerReport> gather_peers(SteadyTime now) {
    std::vector<PeerAddress> others;
    PeerReport self;
    self.worker_id = sources.worker_id;
    for (const auto& p : peer_directory(now)) {
      if (p.worker_id != sources.worker_id) others.push_back(p);
      if (p.worker_id == sources.worker_id) self.url = p.url;
    }
    auto reports = fetch_peer_reports(others, config.peer_timeout);
    reports.push_back(std::move(self));
    return reports;
  }

  json header(const HealthState& h, std::int64_t now_ms, const char* scope) const {
    return {{"scope", scope},
            {"application", sources.application},
            {"stream", sources.stream},
            {"worker_id", sources.worker_id},
            {"refresh_interval_ms", config.refresh_interval.count()},
            {"generated_at_ms", now_ms},
            {"health", {{"live", h.live}, {"ready", h.ready}, {"warnings", h.warnings}}}};
  }

  // Reads the lease table only for a fleet view someone asked for in the last minute, or
  // when this worker's own shards are known from nowhere else (no shard_states): a worker
  // whose page nobody looks at reads nothing (its figures come from its consumers and its
  // metrics registry).
  void refresh() {
    std::lock_guard<std::mutex> one_at_a_time(refresh_mu);
    const auto now = std::chrono::steady_clock::now();
    const std::int64_t now_ms = wall_ms();
    const HealthState h = sources.health();
    const bool gather = fleet_wanted_until.load() > steady_ms(now);
    std::optional<Result<std::vector<Lease>>> leases;
    if (gather || !sources.shard_states) {
      leases = sources.list_leases();
      table_reads.fetch_add(1);
    }
    const bool listed = leases && leases->ok();
    const FleetView view = listed ? fleet_view(**leases) : FleetView{};
    const LocalReport local = local_report(h, view, now, now_ms);

    json local_out = header(h, now_ms, "local");
    local_out.update(json(local));
    FleetSources fs;
    fs.now_ms = now_ms;
    std::vector<PeerReport> peers;
    if (gather) {
      peers = gather_peers(now);
      fs.directory = directory_note;
    } else {
      fs.directory = "not gathered (nobody asked for the fleet view in the last minute)";
    }
    json out = header(h, now_ms, "fleet");
    if (leases && !leases->ok()) {
      out["error"] = "reading the lease table: " + leases->status().to_string();
    }
    out.update(fleet_json(view, sources.worker_id, &local, peers, fs));
    auto text = std::make_shared<const std::string>(json_text(out));
    auto local_text = std::make_shared<const std::string>(json_text(local_out));
    {
      std::lock_guard<std::mutex> lock(snap_mu);
      snapshot = std::move(text);
      local_snapshot = std::move(local_text);
      if (gather) gathered_at = now;
    }
    snap_cv.notify_all();
  }

  void add_routes() {
    httplib::Server& srv = server;
    srv.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(sources.registry->prometheus_text(), "text/plain; version=0.0.4");
    });
    srv.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
      HealthState h = sources.health();
      health_response(res, h.live, "live", "failed", h.live_reason);
    });
    srv.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
      readiness_response(res, sources.health());
    });
    srv.Get("/status.json", [this](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Cache-Control", "no-store");
      const bool local = req.get_param_value("scope") == "local";
      res.set_content(local ? *current(true) : *fleet_for_request(), "application/json");
    });
    auto page = [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(status_page_html()), "text/html; charset=utf-8");
    };
    srv.Get("/status", page);
    srv.Get("/", page);
  }

  void refresh_loop() {
    std::unique_lock<std::mutex> lock(stop_mu);
    while (!stopping) {
      wake = false;
      lock.unlock();
      refresh();
      lock.lock();
      stop_cv.wait_for(lock, config.refresh_interval, [&] { return stopping || wake; });
    }
  }
};

StatusServer::StatusServer(StatusServerConfig config, StatusSources sources)
    : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  impl_->sources = std::move(sources);
}

StatusServer::~StatusServer() { stop(); }

std::string StatusServer::url() const {
  auto hp = parse_http_address(impl_->config.address);
  std::string host = hp.ok() ? hp->first : "127.0.0.1";
  // A wildcard address is reached here through loopback.
  if (host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(port_);
}

std::string StatusServer::status_json() const { return *impl_->current(false); }

std::string StatusServer::local_json() const { return *impl_->current(true); }

void StatusServer::refresh() { impl_->refresh(); }

std::uint64_t StatusServer::table_reads() const { return impl_->table_reads.load(); }

Status StatusServer::start() {
  auto problems = impl_->config.validate();
  if (!impl_->sources.registry || !impl_->sources.list_leases || !impl_->sources.health) {
    problems.push_back("the status server needs a registry, a lease listing and a health source");
  }
  if (!problems.empty()) {
    std::string msg = "http endpoint configuration: ";
    for (std::size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
    return Status(StatusCode::kInvalidArgument, msg);
  }
  auto [host, port] = parse_http_address(impl_->config.address).value();
  Impl& im = *impl_;
  im.figures = std::make_unique<LocalFigures>(
      static_cast<std::size_t>(im.config.history.count() * 1000 /
                               std::max<long long>(1, im.config.refresh_interval.count())));
  httplib::Server& srv = im.server;
  set_io_limits(srv, im.config);
  im.add_routes();
  set_error_handlers(srv);

  if (port == 0) {
    port_ = srv.bind_to_any_port(host);
  } else {
    port_ = srv.bind_to_port(host, port) ? port : -1;
  }
  if (port_ <= 0) {
    return Status(StatusCode::kUnavailable,
                  "http endpoint: cannot listen on " + impl_->config.address +
                      " (address in use or not available on this machine)");
  }
  im.refresh();
  im.listener = base::named_thread("kcl-status-http", [&srv] { srv.listen_after_bind(); });
  im.refresher = base::named_thread("kcl-status-scan", [&im] { im.refresh_loop(); });
  return Status::Ok();
}

void StatusServer::stop() {
  if (!impl_) return;
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mu);
    impl_->stopping = true;
  }
  impl_->stop_cv.notify_all();
  impl_->server.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
  if (impl_->refresher.joinable()) impl_->refresher.join();
}

}  // namespace kcl::observability
