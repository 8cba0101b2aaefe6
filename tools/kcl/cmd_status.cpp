// kcl status --app A --stream S: the fleet at a glance, from the lease table: every shard
// with its state (waiting on parent, reading, ended, unassigned), owner, checkpoint and
// lineage, and the workers with their lease counts. A coloured table on a terminal, JSON
// (one object) otherwise or with --json; --watch redraws every few seconds.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "commands.h"
#include "leases/dynamodb_lease_store.h"
#include "observability/status_server.h"

namespace kcl::cli {

namespace {
struct StatusFlags {
  std::string app;
  std::string stream;
  std::string table;
  bool json = false;
  bool watch = false;
  int interval_s = 2;
};

std::string ids(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& id : v) out += (out.empty() ? "" : ",") + id;
  return out.empty() ? "-" : out;
}

const char* colour_of(const std::string& state) {
  if (state == "reading") return "\033[32m";
  if (state == "ended") return "\033[90m";
  if (state == "waiting on parent") return "\033[33m";
  return "\033[31m";  // unassigned
}

int show(const StatusFlags& f, leases::DynamoDbLeaseStore& store, const std::string& table,
         bool tty) {
  auto all = store.list_leases();
  if (!all.ok()) {
    return report_error("status", all.status().with_context("reading lease table " + table + ": "));
  }
  observability::FleetView view = observability::fleet_view(*all);
  if (f.json || !tty) {
    nlohmann::json out{{"application", f.app}, {"stream", f.stream}, {"table", table}};
    out["shards"] = nlohmann::json::array();
    for (const auto& s : view.shards) {
      nlohmann::json shard{{"shard_id", s.shard_id},
                           {"state", s.state},
                           {"owner", s.owner.empty() ? nlohmann::json() : nlohmann::json(s.owner)},
                           {"checkpoint", s.checkpoint},
                           {"parents", s.parents},
                           {"children", s.children}};
      if (!s.handoff_to.empty()) shard["handoff_to"] = s.handoff_to;
      out["shards"].push_back(std::move(shard));
    }
    out["workers"] = nlohmann::json::array();
    for (const auto& [w, n] : view.workers)
      out["workers"].push_back({{"worker_id", w}, {"leases", n}});
    std::cout << out.dump() << std::endl;
    return 0;
  }
  if (f.watch) std::printf("\033[H\033[2J");  // home, clear
  std::printf("\033[1mapplication %s  stream %s  table %s\033[0m\n\n", f.app.c_str(),
              f.stream.c_str(), table.c_str());
  std::printf("\033[1m%-40s %s\033[0m\n", "WORKER", "LEASES");
  for (const auto& [w, n] : view.workers) std::printf("%-40s %d\n", w.c_str(), n);
  std::printf("\n\033[1m%-22s %-18s %-32s %-30s %-30s %s\033[0m\n", "SHARD", "STATE", "OWNER",
              "PARENTS", "CHILDREN", "CHECKPOINT");
  for (const auto& s : view.shards) {
    std::string owner = s.owner.empty() ? "-" : s.owner;
    if (!s.handoff_to.empty()) owner += " -> " + s.handoff_to;
    std::printf("%-22s %s%-18s\033[0m %-32s %-30s %-30s %s\n", s.shard_id.c_str(),
                colour_of(s.state), s.state.c_str(), owner.c_str(), ids(s.parents).c_str(),
                ids(s.children).c_str(), s.checkpoint.c_str());
  }
  std::fflush(stdout);
  return 0;
}

int run_status(const GlobalOptions& g, const StatusFlags& f) {
  auto ddb = make_dynamodb(g);
  if (!ddb.ok()) return report_error("status", ddb.status());
  LeaseConfig config;
  config.application_name = f.app;
  config.table_name = f.table;
  config.worker_id = "kcl-status-cli";
  leases::DynamoDbLeaseStore store(std::shared_ptr<dynamodb::DynamoDbClient>(std::move(*ddb)),
                                   config);
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  if (!f.watch) return show(f, store, config.effective_table_name(), tty);
  install_stop_signals();
  while (!stop_requested()) {
    if (int rc = show(f, store, config.effective_table_name(), tty); rc != 0) return rc;
    for (int i = 0; i < f.interval_s * 10 && !stop_requested(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return 0;
}
}  // namespace

void add_status_command(CLI::App& parent, const GlobalOptions& global, int& exit_code) {
  auto f = std::make_shared<StatusFlags>();
  auto* cmd = parent.add_subcommand(
      "status",
      "The fleet of application --app from its lease table: every shard's state (waiting on "
      "parent, reading, ended, unassigned), owner, lineage and checkpoint, and the workers with "
      "their lease counts. A coloured table on a terminal, JSON otherwise.");
  cmd->add_option("--app", f->app, "Application name")->required();
  cmd->add_option("--stream", f->stream, "Stream name (shown in the header)")->required();
  cmd->add_option("--table", f->table, "Lease table name (default: the application name)");
  cmd->add_flag("--json", f->json, "One JSON object, also on a terminal");
  cmd->add_flag("--watch", f->watch, "Redraw until interrupted");
  cmd->add_option("--interval", f->interval_s, "Seconds between redraws with --watch (default 2)")
      ->check(CLI::Range(1, 3600));
  cmd->callback([&global, &exit_code, f] { exit_code = run_status(global, *f); });
}

}  // namespace kcl::cli
