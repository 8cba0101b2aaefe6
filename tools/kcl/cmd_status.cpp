// kcl status --app A --stream S: the fleet at a glance: every shard of the lease table with
// its state (waiting on parent, reading, handing off, ended, unassigned), owner, checkpoint
// and lineage, and -- from the status endpoints the workers published in the coordination
// table -- each shard's lag, records/s, last progress and consumer state, and each worker's
// health. --endpoint URL asks one worker's /status.json for the same view instead (no AWS
// access). A coloured table on a terminal (shards grouped by worker, laggiest first), JSON
// (one object) otherwise or with --json; --watch redraws every few seconds, and keeps
// watching through failed fetches (a worker's endpoint restarting): the failure is shown
// once, then with its count while it repeats (a banner over the last view on a terminal,
// lines on stderr otherwise), and the view comes back when the fetch does.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "base/failure_series.h"
#include "commands.h"
#include "coordination/dynamodb_coordination_store.h"
#include "leases/dynamodb_lease_store.h"
#include "observability/fleet_figures.h"
#include "observability/peer_fetch.h"

namespace kcl::cli {

namespace {
using json = nlohmann::json;

struct StatusFlags {
  std::string app;
  std::string stream;
  std::string table;
  std::string endpoint;
  bool json = false;
  bool watch = false;
  int interval_s = 2;
  int timeout_ms = 1000;
};

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The workers' published status endpoints, from the coordination table (leader-based
// assignment); a note saying why there are none otherwise.
std::vector<observability::PeerAddress> directory(
    const std::shared_ptr<dynamodb::DynamoDbClient>& client, const LeaseConfig& config,
    leases::DynamoDbLeaseStore& store, std::string& note) {
  coordination::DynamoDbCoordinationStore coordination(
      client, config, [&store] { return store.uses_entity_types(); });
  Status resolved = coordination.resolve_table();
  auto view = resolved.ok() ? coordination.read_all(coordination::Consistency::kEventual)
                            : Result<coordination::CoordinationView>(resolved);
  std::vector<observability::PeerAddress> out;
  if (!view.ok()) {
    note = view.status().code() == StatusCode::kNotFound
               ? "none: no coordination table (worker-takes assignment publishes no endpoints)"
               : "none: reading the coordination table: " + view.status().to_string();
    return out;
  }
  note = "the workers' entries in the coordination table";
  for (const auto& w : view->workers) out.push_back({w.worker_id, w.status_url});
  return out;
}

// The fleet view gathered here: the lease table, and each worker's own report.
Result<json> fleet_from_tables(const GlobalOptions& g, const StatusFlags& f) {
  auto ddb = make_dynamodb(g);
  if (!ddb.ok()) return ddb.status();
  LeaseConfig config;
  config.application_name = f.app;
  config.table_name = f.table;
  config.worker_id = "kcl-status-cli";
  std::shared_ptr<dynamodb::DynamoDbClient> client(std::move(*ddb));
  leases::DynamoDbLeaseStore store(client, config);
  const std::string table = config.effective_table_name();
  auto all = store.list_leases();
  if (!all.ok()) return all.status().with_context("reading lease table " + table + ": ");
  observability::FleetSources sources;
  const auto peers = directory(client, config, store, sources.directory);
  const auto reports =
      observability::fetch_peer_reports(peers, std::chrono::milliseconds(f.timeout_ms));
  sources.now_ms = wall_ms();
  json out{{"scope", "fleet"},
           {"application", f.app},
           {"stream", f.stream},
           {"table", table},
           {"generated_at_ms", sources.now_ms}};
  out.update(
      observability::fleet_json(observability::fleet_view(*all), "", nullptr, reports, sources));
  for (json& s : out["shards"]) {
    if (s["owner"] == "") s["owner"] = nullptr;  // free
  }
  return out;
}

Result<json> fleet_from_endpoint(const StatusFlags& f) {
  std::string url = f.endpoint;
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (url.rfind("http://", 0) != 0) url = "http://" + url;
  auto body =
      observability::http_get(url, "/status.json", std::chrono::milliseconds(f.timeout_ms) * 3);
  if (!body.ok()) return body.status();
  json doc = json::parse(*body, nullptr, false);
  if (!doc.is_object() || !doc.contains("shards")) {
    return Status(StatusCode::kInternal, url + "/status.json is not a kcl-cpp status view");
  }
  return doc;
}

std::string ids(const json& v) {
  std::string out;
  if (v.is_array()) {
    for (const auto& id : v) out += (out.empty() ? "" : ",") + id.get<std::string>();
  }
  return out.empty() ? "-" : out;
}

std::string text_or_dash(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>().empty() ? "-" : v.get<std::string>();
  return v.dump();
}

const char* colour_of(const std::string& state) {
  if (state == "reading") return "\033[32m";
  if (state == "ended") return "\033[90m";
  if (state == "waiting on parent") return "\033[33m";
  if (state == "handing off") return "\033[34m";
  return "\033[31m";  // unassigned
}

void print_workers(const json& doc) {
  std::printf("\033[1m%-36s %6s %-22s %6s %9s %7s %-8s %8s  %s\033[0m\n", "WORKER", "LEASES",
              "HEALTH", "CPU%", "RSS", "THREADS", "VERSION", "AGE", "ENDPOINT");
  for (const json& w : doc["workers"]) {
    const json& h = w.value("health", json());
    std::string health = "unreachable";
    char cpu[16] = "-", rss[24] = "-", threads[16] = "-", age[24] = "-";
    if (h.is_object()) {
      health = std::string(h.value("live", false) ? "live" : "FAILED") + "," +
               (h.value("ready", false) ? "ready" : "not ready");
      const json& p = h.value("process", json::object());
      if (p.contains("cpu_percent") && p["cpu_percent"].is_number()) {
        std::snprintf(cpu, sizeof cpu, "%.0f", p["cpu_percent"].get<double>());
      }
      std::snprintf(rss, sizeof rss, "%lldMiB", p.value("rss_bytes", 0LL) / 1048576);
      std::snprintf(threads, sizeof threads, "%d", p.value("threads", 0));
      std::snprintf(age, sizeof age, "%.1fs", w.value("age_ms", 0LL) / 1000.0);
    }
    const std::string where = w.value("reachable", false)
                                  ? text_or_dash(w.value("status_url", json()))
                                  : w.value("error", std::string("-"));
    std::printf(
        "%-36s %6d %-22s %6s %9s %7s %-8s %8s  %s\n", w.value("worker_id", std::string()).c_str(),
        w.value("leases", 0), health.c_str(), cpu, rss, threads,
        h.is_object() ? h.value("version", std::string("-")).c_str() : "-", age, where.c_str());
  }
}

// Shards grouped by owner (free ones last), laggiest first within each group.
std::vector<const json*> shard_order(const json& doc) {
  std::vector<const json*> out;
  for (const json& s : doc["shards"]) out.push_back(&s);
  auto owner = [](const json* s) { return text_or_dash(s->value("owner", json())); };
  auto lag = [](const json* s) {
    const json& m = s->value("millis_behind", json());
    return m.is_number() ? m.get<double>() : -1.0;
  };
  std::stable_sort(out.begin(), out.end(), [&](const json* a, const json* b) {
    const std::string oa = owner(a), ob = owner(b);
    if (oa != ob) return oa == "-" ? false : ob == "-" ? true : oa < ob;
    return lag(a) > lag(b);
  });
  return out;
}

void print_shard(const json& s, std::int64_t now_ms) {
  const std::string state = s.value("state", std::string());
  std::string owner = text_or_dash(s.value("owner", json()));
  if (s.contains("handoff_to")) owner += " -> " + s["handoff_to"].get<std::string>();
  char lag[24] = "-", rate[24] = "-", progress[24] = "-";
  if (s.value("millis_behind", json()).is_number()) {
    std::snprintf(lag, sizeof lag, "%.0fms", s["millis_behind"].get<double>());
  }
  const json& r = s.value("records_per_second", json::array());
  if (!r.empty()) std::snprintf(rate, sizeof rate, "%.1f", r.back().get<double>());
  if (s.value("last_progress_ms", json()).is_number()) {
    std::snprintf(progress, sizeof progress, "%.1fs ago",
                  static_cast<double>(now_ms - s["last_progress_ms"].get<std::int64_t>()) / 1000);
  }
  std::printf("%-22s %s%-18s\033[0m %-28s %10s %9s %12s %-12s %-20s %-20s %s\n",
              s.value("shard_id", std::string()).c_str(), colour_of(state), state.c_str(),
              owner.c_str(), lag, rate, progress,
              text_or_dash(s.value("consumer_state", json())).c_str(),
              ids(s.value("parents", json())).c_str(), ids(s.value("children", json())).c_str(),
              s.value("checkpoint", std::string()).c_str());
}

// `banner` (red, above the rest): why this view is not a fresh one.
void print_table(const json& doc, bool clear, const std::string& banner = {}) {
  if (clear) std::printf("\033[H\033[2J");  // home, clear
  if (!banner.empty()) std::printf("\033[1;31m%s\033[0m\n\n", banner.c_str());
  const json& fleet = doc.value("fleet", json::object());
  std::printf(
      "\033[1mapplication %s  stream %s\033[0m  %d/%d workers reporting, %d/%d shards "
      "with figures (peers from %s)\n\n",
      doc.value("application", std::string()).c_str(), doc.value("stream", std::string()).c_str(),
      fleet.value("workers_reachable", 0), fleet.value("workers", 0),
      fleet.value("shards_with_figures", 0), fleet.value("shards", 0),
      fleet.value("directory", std::string("-")).c_str());
  print_workers(doc);
  std::printf("\n\033[1m%-22s %-18s %-28s %10s %9s %12s %-12s %-20s %-20s %s\033[0m\n", "SHARD",
              "STATE", "OWNER", "BEHIND", "REC/S", "PROGRESS", "CONSUMER", "PARENTS", "CHILDREN",
              "CHECKPOINT");
  const std::int64_t now = doc.value("generated_at_ms", wall_ms());
  for (const json* s : shard_order(doc)) print_shard(*s, now);
  std::fflush(stdout);
}

Result<json> fetch_view(const GlobalOptions& g, const StatusFlags& f) {
  return f.endpoint.empty() ? fleet_from_tables(g, f) : fleet_from_endpoint(f);
}

void draw(const json& doc, const StatusFlags& f, bool tty, const std::string& banner = {}) {
  if (f.json || !tty) {
    std::cout << doc.dump() << std::endl;
  } else {
    print_table(doc, f.watch, banner);
  }
}

int show(const GlobalOptions& g, const StatusFlags& f, bool tty) {
  auto doc = fetch_view(g, f);
  if (!doc.ok()) return report_error("status", doc.status());
  draw(*doc, f, tty);
  return 0;
}

// --watch: a fetch that fails (an endpoint restarting, a throttled read) does not end the
// watch; it is said once, then with its count while it repeats (base::FailureSeries: the
// 1st, 3rd, each power of ten), and its end is said too. On a terminal the table is redrawn
// with the failure above the last view; otherwise the lines go to stderr and stdout gets a
// view only when there is one. A bad configuration (kInvalidArgument) ends it at once.
int watch(const GlobalOptions& g, const StatusFlags& f, bool tty) {
  const bool table = tty && !f.json;
  base::FailureSeries fetches("fetching the fleet view");
  std::optional<json> last;
  std::string last_at;
  while (!stop_requested()) {
    auto doc = fetch_view(g, f);
    const auto now = std::chrono::steady_clock::now();
    if (doc.ok()) {
      if (auto line = fetches.succeeded(now); line && !table) say("status", *line);
      draw(*doc, f, tty);
      last = std::move(doc).value();
      last_at = format_iso8601(std::chrono::system_clock::now());
    } else if (doc.status().code() == StatusCode::kInvalidArgument) {
      return report_error("status", doc.status());
    } else {
      const auto line = fetches.failed(doc.status(), now);
      if (!table) {
        if (line) say("status", *line + " (still watching)", LogLevel::kWarn);
      } else {
        const auto since = std::chrono::duration_cast<std::chrono::milliseconds>(
            now - fetches.since().value_or(now));
        char head[96];
        std::snprintf(head, sizeof head, "failed %llu time(s) in a row over %.1f s: ",
                      static_cast<unsigned long long>(fetches.consecutive()),
                      static_cast<double>(since.count()) / 1000.0);
        const std::string banner = "kcl status: fetching the fleet view " + std::string(head) +
                                   doc.status().to_string() + "; still watching" +
                                   (last ? " (the view below is from " + last_at + ")" : "");
        if (last) {
          print_table(*last, true, banner);
        } else {
          std::printf("\033[H\033[2J\033[1;31m%s\033[0m\n", banner.c_str());
          std::fflush(stdout);
        }
      }
    }
    // Its reader is gone (`kcl status --watch | head`): nothing more to draw for.
    if (!std::cout || std::ferror(stdout) != 0) return 0;
    for (int i = 0; i < f.interval_s * 10 && !stop_requested(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return 0;
}

int run_status(const GlobalOptions& g, const StatusFlags& f) {
  if (f.endpoint.empty() && (f.app.empty() || f.stream.empty())) {
    return report_error("status", Status(StatusCode::kInvalidArgument,
                                         "--app and --stream are required without --endpoint"));
  }
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  if (!f.watch) return show(g, f, tty);
  install_stop_signals();
  return watch(g, f, tty);
}
}  // namespace

void add_status_command(CLI::App& parent, const GlobalOptions& global, int& exit_code) {
  auto f = std::make_shared<StatusFlags>();
  auto* cmd = parent.add_subcommand(
      "status",
      "The fleet of application --app: every shard of its lease table with its state (waiting "
      "on parent, reading, handing off, ended, unassigned), owner, lineage and checkpoint, "
      "with the lag (MillisBehindLatest), records/s, last progress and consumer state its "
      "owner reports; and every worker with its health (live/ready, CPU, RSS, threads, "
      "version). Figures come from the status endpoints the workers published in the "
      "coordination table (workers run with --http; leader-based assignment); or ask one "
      "worker with --endpoint. Shards grouped by worker, laggiest first, in a coloured table "
      "on a terminal; JSON otherwise.");
  cmd->add_option("--app", f->app, "Application name (required without --endpoint)");
  cmd->add_option("--stream", f->stream, "Stream name (shown in the header)");
  cmd->add_option("--table", f->table, "Lease table name (default: the application name)");
  cmd->add_option("--endpoint", f->endpoint,
                  "Ask this worker's endpoint (HOST:PORT or http://HOST:PORT, as given to "
                  "--http) for its fleet view instead of reading the tables");
  cmd->add_option("--timeout-ms", f->timeout_ms,
                  "Per-worker timeout when fetching figures (default 1000)")
      ->check(CLI::Range(50, 60000));
  cmd->add_flag("--json", f->json, "One JSON object, also on a terminal");
  cmd->add_flag("--watch", f->watch,
                "Redraw until interrupted; a failed fetch (a worker's endpoint restarting) is "
                "shown, with its count while it repeats, and the watch goes on");
  cmd->add_option("--interval", f->interval_s, "Seconds between redraws with --watch (default 2)")
      ->check(CLI::Range(1, 3600));
  cmd->callback([&global, &exit_code, f] { exit_code = run_status(global, *f); });
}

}  // namespace kcl::cli
