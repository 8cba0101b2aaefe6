// kcl leases --app A: the lease table of an application, one lease a line, then the leader
// and the workers of its coordination table (leader-based assignment).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "coordination/dynamodb_coordination_store.h"
#include "leases/dynamodb_lease_store.h"

namespace kcl::cli {

namespace {
struct LeasesFlags {
  std::string app;
  std::string table;
  bool json = false;
};

std::string join_ids(const std::vector<std::string>& ids) {
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "" : ",") + id;
  return out.empty() ? "-" : out;
}

// The items of the lease table that are not leases (the Java KCL 3.5's leader lock, worker
// metrics, ...: counted by entityType) and the lease items that could not be read.
void print_other_items(const leases::LeaseScanSummary& others, std::FILE* out) {
  if (!others.other_entities.empty()) {
    std::string line;
    for (const auto& [type, n] : others.other_entities) {
      line += (line.empty() ? "" : ", ") + std::to_string(n) + " " + type;
    }
    std::fprintf(out, "\nalso in the table, not leases (left alone): %s\n", line.c_str());
  }
  for (const std::string& problem : others.unreadable) {
    std::fprintf(out, "unreadable, skipped: %s\n", problem.c_str());
  }
}

int run_leases(const GlobalOptions& g, const LeasesFlags& f) {
  auto ddb = make_dynamodb(g);
  if (!ddb.ok()) return report_error("leases", ddb.status());
  LeaseConfig config;
  config.application_name = f.app;
  config.table_name = f.table;
  config.worker_id = "kcl-leases-cli";
  std::shared_ptr<dynamodb::DynamoDbClient> client(std::move(*ddb));
  leases::DynamoDbLeaseStore store(client, config);
  auto all = store.list_leases();
  if (!all.ok()) {
    return report_error("leases", all.status().with_context("reading lease table " +
                                                            config.effective_table_name() + ": "));
  }
  std::sort(all->begin(), all->end(),
            [](const Lease& a, const Lease& b) { return a.lease_key < b.lease_key; });
  // The coordination table exists only with leader-based assignment.
  coordination::DynamoDbCoordinationStore coordination(
      client, config, [&store] { return store.uses_entity_types(); });
  Status resolved = coordination.resolve_table();
  auto view = resolved.ok() ? coordination.read_all(coordination::Consistency::kStrong)
                            : Result<coordination::CoordinationView>(resolved);
  const leases::LeaseScanSummary others = store.last_scan();
  auto text = [](const std::optional<std::string>& s) {
    return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
  };
  if (f.json) {
    for (const auto& l : *all) {
      // Built with a JSON library: worker ids are chosen by users and may need escaping.
      nlohmann::json line{{"leaseKey", l.lease_key},
                          {"leaseOwner", text(l.lease_owner)},
                          {"checkpointOwner", text(l.checkpoint_owner)},
                          {"leaseCounter", l.lease_counter},
                          {"checkpoint", l.checkpoint.sequence_number()},
                          {"checkpointSubSequenceNumber", l.checkpoint.sub_sequence_number()},
                          {"parentShardIds", join_ids(l.parent_shard_ids)}};
      std::cout << line.dump() << '\n';
    }
    if (view.ok()) {
      nlohmann::json workers = nlohmann::json::array();
      for (const auto& w : view->workers) {
        workers.push_back(
            {{"workerId", w.worker_id}, {"heartbeat", w.heartbeat}, {"leaseCount", w.lease_count}});
      }
      nlohmann::json fleet{{"leader", view->leader ? text(view->leader->owner) : nullptr},
                           {"workers", std::move(workers)}};
      std::cout << fleet.dump() << '\n';
    }
    std::cout.flush();
    print_other_items(others, stderr);
    return 0;
  }
  std::printf("%-22s %-32s %-10s %-9s %-45s %s\n", "SHARD", "OWNER", "STATE", "COUNTER", "PARENTS",
              "CHECKPOINT");
  for (const auto& l : *all) {
    std::string state = l.checkpoint.is_shard_end() ? "finished"
                        : l.checkpoint_owner        ? "handoff"
                        : l.lease_owner             ? "owned"
                                                    : "free";
    std::string owner = l.lease_owner.value_or("-");
    // A pending handoff: the worker finishing with the shard, then the one it goes to.
    if (l.checkpoint_owner) owner = *l.checkpoint_owner + " -> " + owner;
    std::printf("%-22s %-32s %-10s %-9lld %-45s %s\n", l.lease_key.c_str(), owner.c_str(),
                state.c_str(), static_cast<long long>(l.lease_counter),
                join_ids(l.parent_shard_ids).c_str(), l.checkpoint.to_string().c_str());
  }
  if (view.ok()) {
    const bool led = view->leader && view->leader->owner;
    std::printf("\nleader: %s; %zu workers in %s\n", led ? view->leader->owner->c_str() : "none",
                view->workers.size(), coordination.table_name().c_str());
    for (const auto& w : view->workers) {
      std::printf("  %-40s %lld leases (heartbeat %lld)\n", w.worker_id.c_str(),
                  static_cast<long long>(w.lease_count), static_cast<long long>(w.heartbeat));
    }
  } else if (view.status().code() != StatusCode::kNotFound) {
    std::fprintf(stderr, "kcl leases: coordination table %s: %s\n",
                 coordination.table_name().c_str(), view.status().to_string().c_str());
  }
  print_other_items(others, stdout);
  std::fflush(stdout);
  return 0;
}
}  // namespace

void add_leases_command(CLI::App& parent, const GlobalOptions& global, int& exit_code) {
  auto f = std::make_shared<LeasesFlags>();
  auto* cmd =
      parent.add_subcommand("leases",
                            "Show an application's lease table: shard, owner, state (owned, free, "
                            "handoff: old owner -> new owner, finished), leaseCounter, parents and "
                            "checkpoint; then the leader and the workers (leader-based "
                            "assignment).");
  cmd->add_option("--app", f->app, "Application name")->required();
  cmd->add_option("--table", f->table, "Lease table name (default: the application name)");
  cmd->add_flag("--json", f->json, "One JSON object per lease");
  cmd->callback([&global, &exit_code, f] { exit_code = run_leases(global, *f); });
}

}  // namespace kcl::cli
