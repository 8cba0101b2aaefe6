#include "observability/fleet_figures.h"

#include <algorithm>

namespace kcl::observability {

using json = nlohmann::json;

namespace {

// Reads `key` into `out` when present and not null; a value of the wrong type throws
// (parse_local_report turns that into an error naming the field).
template <typename T>
void read(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it != j.end() && !it->is_null()) it->get_to(out);
}

template <typename T>
void read(const json& j, const char* key, std::optional<T>& out) {
  auto it = j.find(key);
  if (it != j.end() && !it->is_null()) out = it->get<T>();
}

template <typename T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

}  // namespace

void to_json(json& j, const ShardFigures& f) {
  j = json{{"shard_id", f.shard_id},
           {"millis_behind", or_null(f.millis_behind)},
           {"records_per_second", f.records_per_second},
           {"last_progress_ms", or_null(f.last_progress_ms)},
           {"consumer_state", f.consumer_state},
           {"dead_lettered", f.dead_lettered},
           {"stalled", f.stalled ? json{{"cause", f.stalled->cause},
                                        {"detail", f.stalled->detail},
                                        {"since_ms", f.stalled->since_ms}}
                                 : json(nullptr)}};
}

void from_json(const json& j, ShardFigures& f) {
  read(j, "shard_id", f.shard_id);
  read(j, "millis_behind", f.millis_behind);
  read(j, "records_per_second", f.records_per_second);
  read(j, "last_progress_ms", f.last_progress_ms);
  read(j, "consumer_state", f.consumer_state);
  read(j, "dead_lettered", f.dead_lettered);
  if (auto it = j.find("stalled"); it != j.end() && it->is_object()) {
    StalledShard s;
    s.shard = f.shard_id;
    read(*it, "cause", s.cause);
    read(*it, "detail", s.detail);
    read(*it, "since_ms", s.since_ms);
    f.stalled = std::move(s);
  }
}

void to_json(json& j, const ProcessFigures& p) {
  j = json{{"cpu_seconds", p.cpu_seconds},
           {"cpu_percent", or_null(p.cpu_percent)},
           {"rss_bytes", p.rss_bytes},
           {"threads", p.threads},
           {"uptime_ms", p.uptime_ms}};
}

void from_json(const json& j, ProcessFigures& p) {
  read(j, "cpu_seconds", p.cpu_seconds);
  read(j, "cpu_percent", p.cpu_percent);
  read(j, "rss_bytes", p.rss_bytes);
  read(j, "threads", p.threads);
  read(j, "uptime_ms", p.uptime_ms);
}

void to_json(json& j, const WorkerHealth& h) {
  j = json{{"worker_id", h.worker_id}, {"version", h.version},   {"live", h.live},
           {"ready", h.ready},         {"warnings", h.warnings}, {"process", h.process}};
}

void from_json(const json& j, WorkerHealth& h) {
  read(j, "worker_id", h.worker_id);
  read(j, "version", h.version);
  read(j, "live", h.live);
  read(j, "ready", h.ready);
  read(j, "warnings", h.warnings);
  read(j, "process", h.process);
}

void to_json(json& j, const LocalReport& r) {
  j = json{{"scope", "local"},
           {"generated_at_ms", r.generated_at_ms},
           {"worker", r.worker},
           {"shards", r.shards}};
}

void from_json(const json& j, LocalReport& r) {
  read(j, "generated_at_ms", r.generated_at_ms);
  read(j, "worker", r.worker);
  read(j, "shards", r.shards);
}

Result<LocalReport> parse_local_report(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status(StatusCode::kInternal, "the peer's report is not a JSON object");
  }
  const auto scope = j.find("scope");
  if (scope == j.end() || *scope != "local") {
    return Status(StatusCode::kInternal,
                  "the peer's report has no \"scope\":\"local\" (an older kcl-cpp?)");
  }
  try {
    return j.get<LocalReport>();
  } catch (const json::exception& e) {
    return Status(StatusCode::kInternal, std::string("the peer's report: ") + e.what());
  }
}

namespace {

// A report that covers a shard, and whose it is.
struct Source {
  const ShardFigures* figures = nullptr;
  const std::string* worker = nullptr;
  std::int64_t generated_at_ms = 0;
};

struct Reports {
  std::vector<std::pair<const std::string*, const LocalReport*>> all;  // worker id, report
  std::map<std::string, std::map<std::string, Source>> by_worker;      // worker -> shard -> src
};

Reports index_reports(const std::string& self_id, const LocalReport* self,
                      const std::vector<PeerReport>& peers) {
  Reports r;
  if (self) r.all.emplace_back(&self_id, self);
  for (const auto& p : peers) {
    if (p.report && p.worker_id != self_id) r.all.emplace_back(&p.worker_id, &*p.report);
  }
  for (const auto& [id, rep] : r.all) {
    for (const auto& f : rep->shards) r.by_worker[*id][f.shard_id] = {&f, id, rep->generated_at_ms};
  }
  return r;
}

// The owner's figures; else (the lease just moved) the newest report that has the shard.
Source source_for(const Reports& reports, const ShardView& s) {
  if (auto w = reports.by_worker.find(s.owner); w != reports.by_worker.end()) {
    if (auto it = w->second.find(s.shard_id); it != w->second.end()) return it->second;
  }
  Source best;
  for (const auto& [worker, shards] : reports.by_worker) {
    auto it = shards.find(s.shard_id);
    if (it != shards.end() && it->second.generated_at_ms > best.generated_at_ms) best = it->second;
  }
  return best;
}

json shard_json(const ShardView& s, const Source& src, std::int64_t now_ms) {
  json j = {{"shard_id", s.shard_id}, {"owner", s.owner},       {"checkpoint", s.checkpoint},
            {"parents", s.parents},   {"children", s.children}, {"state", s.state}};
  if (!s.handoff_to.empty()) j["handoff_to"] = s.handoff_to;
  if (!s.stream.empty()) j["stream"] = s.stream;
  ShardFigures none;
  none.shard_id = s.shard_id;
  json figures = src.figures ? json(*src.figures) : json(none);
  for (auto& [k, v] : figures.items()) {
    if (k != "shard_id") j[k] = std::move(v);
  }
  j["figures_from"] = src.worker ? json(*src.worker) : json(nullptr);
  j["figures_age_ms"] =
      src.figures ? json(std::max<std::int64_t>(0, now_ms - src.generated_at_ms)) : json(nullptr);
  return j;
}

json worker_json(const std::string& id, int leases, bool self, const PeerReport* peer,
                 const LocalReport* report, std::int64_t now_ms) {
  json w = {{"worker_id", id}, {"leases", leases}, {"self", self}};
  w["status_url"] = peer && !peer->url.empty() ? json(peer->url) : json(nullptr);
  w["reachable"] = report != nullptr;
  if (report) {
    w["health"] = report->worker;
    w["age_ms"] = std::max<std::int64_t>(0, now_ms - report->generated_at_ms);
  } else {
    w["health"] = nullptr;
    w["error"] = peer ? peer->error : "no status endpoint known for this worker";
  }
  return w;
}

}  // namespace

json fleet_json(const FleetView& view, const std::string& self_id, const LocalReport* self,
                const std::vector<PeerReport>& peers, const FleetSources& sources) {
  const Reports reports = index_reports(self_id, self, peers);
  json out;
  json shards = json::array();
  std::size_t with_figures = 0;
  for (const auto& s : view.shards) {
    const Source src = source_for(reports, s);
    if (src.figures) ++with_figures;
    shards.push_back(shard_json(s, src, sources.now_ms));
  }
  // Every worker that holds a lease, every peer of the directory, and this one.
  std::map<std::string, int> leases = view.workers;
  if (self) leases.emplace(self_id, 0);
  std::map<std::string, const PeerReport*> by_id;
  for (const auto& p : peers) {
    by_id[p.worker_id] = &p;
    leases.emplace(p.worker_id, 0);
  }
  json workers = json::array();
  std::size_t reachable = 0;
  std::int64_t oldest = 0;
  for (const auto& [id, n] : leases) {
    const PeerReport* peer = by_id.count(id) ? by_id[id] : nullptr;
    const bool is_self = self != nullptr && id == self_id;
    const LocalReport* rep = is_self ? self : (peer && peer->report ? &*peer->report : nullptr);
    if (rep) {
      ++reachable;
      oldest = std::max(oldest, sources.now_ms - rep->generated_at_ms);
    }
    workers.push_back(worker_json(id, n, is_self, peer, rep, sources.now_ms));
  }
  out["shards"] = std::move(shards);
  out["workers"] = std::move(workers);
  out["fleet"] = {{"directory", sources.directory},
                  {"workers", leases.size()},
                  {"workers_reachable", reachable},
                  {"shards", view.shards.size()},
                  {"shards_with_figures", with_figures},
                  {"oldest_report_ms", std::max<std::int64_t>(0, oldest)}};
  return out;
}

}  // namespace kcl::observability
