#include "observability/status_server.h"

// Debian builds cpp-httplib as a library: its compiled limits apply (request line and each
// header up to 8 KiB; larger is refused with 414 / 400 and the connection closed).
#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <set>

#include "leases/stream_identifier.h"

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

// This worker's per-shard series from the registry: records processed so far and the lag.
struct ShardSeries {
  std::map<std::string, double> totals;
  std::map<std::string, double> lag;
};

ShardSeries shard_series(const metrics::MetricsRegistry& registry) {
  ShardSeries out;
  for (const auto& s : registry.snapshot()) {
    std::string shard, stream;
    for (const auto& [k, v] : s.labels) {
      if (k == "shard") shard = v;
      if (k == "stream") stream = v;
    }
    if (shard.empty()) continue;
    if (!stream.empty()) shard = stream + "/" + shard;  // ShardView::series_key
    if (s.family == "kcl_records_processed_total") out.totals[shard] += s.value;
    if (s.family == "kcl_millis_behind_latest") out.lag[shard] = s.value;
  }
  return out;
}

json workers_json(const FleetView& view, const std::string& self) {
  json workers = json::array();
  for (const auto& [w, n] : view.workers) {
    workers.push_back({{"worker_id", w}, {"leases", n}, {"self", w == self}});
  }
  return workers;
}

// /healthz and /readyz: 200 or 503 with {"status": ..., "reason": why not}.
void health_response(httplib::Response& res, bool ok, const char* good, const char* bad,
                     const std::string& reason) {
  json body = {{"status", ok ? good : bad}};
  if (!ok) body["reason"] = reason;
  res.status = ok ? 200 : 503;
  res.set_content(body.dump(), "application/json");
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
  res.set_content(body.dump(), "application/json");
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
    res.set_content(body.dump(), "application/json");
  });
  srv.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content(R"({"error":"internal error"})", "application/json");
      });
}

}  // namespace

struct StatusServer::Impl {
  StatusServerConfig config;
  StatusSources sources;
  httplib::Server server;
  std::thread listener;
  std::thread refresher;

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;

  // Records/s history per shard of this worker (refresher thread only).
  std::map<std::string, double> last_totals;
  std::map<std::string, std::deque<double>> rates;
  std::chrono::steady_clock::time_point last_sample{};

  mutable std::mutex snap_mu;  // guards `snapshot` (a pointer swap; readers copy the pointer)
  std::shared_ptr<const std::string> snapshot = std::make_shared<const std::string>("{}");

  std::shared_ptr<const std::string> current() const {
    std::lock_guard<std::mutex> lock(snap_mu);
    return snapshot;
  }

  void refresh() {
    const auto now = std::chrono::steady_clock::now();
    const ShardSeries series = shard_series(*sources.registry);
    sample_rates(now, series.totals);

    json out;
    out["application"] = sources.application;
    out["stream"] = sources.stream;
    out["worker_id"] = sources.worker_id;
    out["refresh_interval_ms"] = config.refresh_interval.count();
    out["generated_at_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    HealthState h = sources.health();
    out["health"] = {{"live", h.live}, {"ready", h.ready}, {"warnings", h.warnings}};
    auto leases = sources.list_leases();
    if (!leases.ok()) {
      out["error"] = "reading the lease table: " + leases.status().to_string();
      out["shards"] = json::array();
      out["workers"] = json::array();
    } else {
      FleetView view = fleet_view(*leases);
      report_unheld(view);
      out["shards"] = shards_json(view, series.lag, h.stalled);
      out["workers"] = workers_json(view, sources.worker_id);
    }
    auto text = std::make_shared<const std::string>(out.dump());
    std::lock_guard<std::mutex> lock(snap_mu);
    snapshot = std::move(text);
  }

  // Records/s per shard since the last sample, keeping `history` worth of samples.
  void sample_rates(std::chrono::steady_clock::time_point now,
                    const std::map<std::string, double>& totals) {
    const std::size_t keep = static_cast<std::size_t>(std::max<long long>(
        2,
        config.history.count() * 1000 / std::max<long long>(1, config.refresh_interval.count())));
    if (last_sample != std::chrono::steady_clock::time_point{}) {
      double secs = std::chrono::duration<double>(now - last_sample).count();
      for (const auto& [shard, total] : totals) {
        double before = last_totals.count(shard) ? last_totals[shard] : 0;
        auto& q = rates[shard];
        q.push_back(secs > 0 ? (total - before) / secs : 0);
        while (q.size() > keep) q.pop_front();
      }
    }
    last_totals = totals;
    last_sample = now;
  }

  // Leases no worker holds (not ended), as the gauge kcl_leases_unheld: the same figure on
  // every worker (the whole table), for the "leases unheld" alert.
  void report_unheld(const FleetView& view) const {
    double unheld = 0;
    for (const auto& s : view.shards) unheld += s.owner.empty() && s.state != "ended" ? 1 : 0;
    sources.registry->gauge("fleet.leases_unheld", unheld, {});
  }

  // Every shard; lag, records/s and a stall for this worker's own.
  json shards_json(const FleetView& view, const std::map<std::string, double>& lag,
                   const std::vector<StalledShard>& stalled) const {
    std::map<std::string, const StalledShard*> stalled_by_key;
    for (const StalledShard& s : stalled) stalled_by_key[s.shard] = &s;
    json shards = json::array();
    for (const auto& s : view.shards) {
      json j = {{"shard_id", s.shard_id},     {"owner", s.owner},
                {"checkpoint", s.checkpoint}, {"parents", s.parents},
                {"children", s.children},     {"state", s.state},
                {"millis_behind", nullptr},   {"records_per_second", json::array()},
                {"stalled", nullptr}};
      if (auto it = stalled_by_key.find(s.shard_id); it != stalled_by_key.end()) {
        j["stalled"] = stalled_json(*it->second);
      }
      if (!s.handoff_to.empty()) j["handoff_to"] = s.handoff_to;
      if (!s.stream.empty()) j["stream"] = s.stream;
      if (s.owner == sources.worker_id) {
        if (auto it = lag.find(s.series_key); it != lag.end()) j["millis_behind"] = it->second;
        if (auto it = rates.find(s.series_key); it != rates.end()) {
          j["records_per_second"] = std::vector<double>(it->second.begin(), it->second.end());
        }
      }
      shards.push_back(std::move(j));
    }
    return shards;
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
    srv.Get("/status.json", [this](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-store");
      res.set_content(*current(), "application/json");
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
      lock.unlock();
      refresh();
      lock.lock();
      stop_cv.wait_for(lock, config.refresh_interval, [&] { return stopping; });
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
  if (host == "0.0.0.0") host = "127.0.0.1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(port_);
}

std::string StatusServer::status_json() const { return *impl_->current(); }

void StatusServer::refresh() { impl_->refresh(); }

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
  im.listener = std::thread([&srv] { srv.listen_after_bind(); });
  im.refresher = std::thread([&im] { im.refresh_loop(); });
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
