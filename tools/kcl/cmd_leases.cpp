// kcl leases --app A: the lease table of an application, one lease a line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
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

int run_leases(const GlobalOptions& g, const LeasesFlags& f) {
  auto ddb = make_dynamodb(g);
  if (!ddb.ok()) return report_error("leases", ddb.status());
  LeaseConfig config;
  config.application_name = f.app;
  config.table_name = f.table;
  config.worker_id = "kcl-leases-cli";
  leases::DynamoDbLeaseStore store(std::shared_ptr<dynamodb::DynamoDbClient>(std::move(*ddb)),
                                   config);
  auto all = store.list_leases();
  if (!all.ok()) {
    return report_error("leases", all.status().with_context("reading lease table " +
                                                            config.effective_table_name() + ": "));
  }
  std::sort(all->begin(), all->end(),
            [](const Lease& a, const Lease& b) { return a.lease_key < b.lease_key; });
  if (f.json) {
    for (const auto& l : *all) {
      // Built with a JSON library: worker ids are chosen by users and may need escaping.
      nlohmann::json line{{"leaseKey", l.lease_key},
                          {"leaseOwner", l.lease_owner ? nlohmann::json(*l.lease_owner) : nullptr},
                          {"leaseCounter", l.lease_counter},
                          {"checkpoint", l.checkpoint.sequence_number()},
                          {"checkpointSubSequenceNumber", l.checkpoint.sub_sequence_number()},
                          {"parentShardIds", join_ids(l.parent_shard_ids)}};
      std::cout << line.dump() << '\n';
    }
    return 0;
  }
  std::printf("%-22s %-32s %-10s %-9s %-45s %s\n", "SHARD", "OWNER", "STATE", "COUNTER", "PARENTS",
              "CHECKPOINT");
  for (const auto& l : *all) {
    std::string state = l.checkpoint.is_shard_end() ? "finished" : l.lease_owner ? "owned" : "free";
    std::printf("%-22s %-32s %-10s %-9lld %-45s %s\n", l.lease_key.c_str(),
                l.lease_owner ? l.lease_owner->c_str() : "-", state.c_str(),
                static_cast<long long>(l.lease_counter), join_ids(l.parent_shard_ids).c_str(),
                l.checkpoint.to_string().c_str());
  }
  std::fflush(stdout);
  return 0;
}
}  // namespace

void add_leases_command(CLI::App& parent, const GlobalOptions& global, int& exit_code) {
  auto f = std::make_shared<LeasesFlags>();
  auto* cmd =
      parent.add_subcommand("leases",
                            "Show an application's lease table: shard, owner, state (owned, free, "
                            "finished), leaseCounter, parents and checkpoint.");
  cmd->add_option("--app", f->app, "Application name")->required();
  cmd->add_option("--table", f->table, "Lease table name (default: the application name)");
  cmd->add_flag("--json", f->json, "One JSON object per lease");
  cmd->callback([&global, &exit_code, f] { exit_code = run_leases(global, *f); });
}

}  // namespace kcl::cli
