// kcl shards --stream S: the shards of a stream with lineage, hash and sequence ranges.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "commands.h"

namespace kcl::cli {

namespace {
struct ShardsOptions {
  std::string stream;
  bool json = false;
};

int run_shards(const GlobalOptions& g, const ShardsOptions& o) {
  auto client = make_kinesis(g);
  if (!client.ok()) return report_error("shards", client.status());
  auto shards = (*client)->list_shards(o.stream);
  if (!shards.ok()) return report_error("shards", shards.status());
  if (o.json) {
    for (const auto& s : *shards) {
      std::cout << "{\"shardId\":\"" << s.shard_id << "\",\"parentShardId\":\"" << s.parent_shard_id
                << "\",\"adjacentParentShardId\":\"" << s.adjacent_parent_shard_id
                << "\",\"startingHashKey\":\"" << s.hash_key_range.starting_hash_key
                << "\",\"endingHashKey\":\"" << s.hash_key_range.ending_hash_key
                << "\",\"startingSequenceNumber\":\""
                << s.sequence_number_range.starting_sequence_number
                << "\",\"endingSequenceNumber\":\""
                << s.sequence_number_range.ending_sequence_number << "\",\"state\":\""
                << (s.closed() ? "closed" : "open") << "\"}\n";
    }
    return 0;
  }
  std::printf("%-22s %-6s %-45s %-41s %s\n", "SHARD", "STATE", "PARENTS", "HASH RANGE",
              "SEQUENCE RANGE");
  for (const auto& s : *shards) {
    std::string parents = s.parent_shard_id;
    if (!s.adjacent_parent_shard_id.empty()) parents += "," + s.adjacent_parent_shard_id;
    if (parents.empty()) parents = "-";
    std::string range =
        s.hash_key_range.starting_hash_key + ".." + s.hash_key_range.ending_hash_key;
    std::string seq = s.sequence_number_range.starting_sequence_number + ".." +
                      (s.closed() ? s.sequence_number_range.ending_sequence_number : "");
    std::printf("%-22s %-6s %-45s %-41s %s\n", s.shard_id.c_str(), s.closed() ? "closed" : "open",
                parents.c_str(), range.c_str(), seq.c_str());
  }
  std::fflush(stdout);
  return 0;
}
}  // namespace

void add_shards_command(CLI::App& parent, const GlobalOptions& global, int& exit_code) {
  auto opts = std::make_shared<ShardsOptions>();
  auto* cmd = parent.add_subcommand(
      "shards",
      "List a stream's shards: state (open/closed), parents, hash key range and "
      "sequence number range.");
  cmd->add_option("--stream", opts->stream, "Stream name")->required();
  cmd->add_flag("--json", opts->json, "One JSON object per shard instead of a table");
  cmd->callback([&global, &exit_code, opts] { exit_code = run_shards(global, *opts); });
}

}  // namespace kcl::cli
