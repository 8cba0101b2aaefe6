// Stream administration: create-stream, delete-stream, split-shard, merge-shards.
#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.h"

namespace kcl::cli {

namespace {

struct StreamFlags {
  std::string stream;
  int shards = 1;
  bool wait = true;
  std::string shard;
  std::string other_shard;
  std::string hash_key;
};

// The middle of a shard's hash key range, as a decimal string (128-bit arithmetic).
std::string middle_hash_key(const std::string& start, const std::string& end) {
  __extension__ typedef unsigned __int128 u128;
  u128 a = 0, b = 0;
  for (char c : start) a = a * 10 + static_cast<unsigned>(c - '0');
  for (char c : end) b = b * 10 + static_cast<unsigned>(c - '0');
  u128 mid = a + (b - a) / 2 + 1;
  std::string out;
  do {
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(mid % 10)));
    mid /= 10;
  } while (mid != 0);
  return out;
}

int run_create(const GlobalOptions& g, const StreamFlags& f) {
  auto client = make_kinesis(g);
  if (!client.ok()) return report_error("create-stream", client.status());
  Status s = (*client)->create_stream(f.stream, f.shards);
  if (!s.ok()) return report_error("create-stream", s);
  if (f.wait) {
    s = (*client)->wait_for_active(f.stream, std::chrono::minutes(5));
    if (!s.ok()) return report_error("create-stream", s);
  }
  std::cerr << "kcl create-stream: " << f.stream << " created with " << f.shards << " shards\n";
  return 0;
}

int run_delete(const GlobalOptions& g, const StreamFlags& f) {
  auto client = make_kinesis(g);
  if (!client.ok()) return report_error("delete-stream", client.status());
  Status s = (*client)->delete_stream(f.stream);
  if (!s.ok()) return report_error("delete-stream", s);
  std::cerr << "kcl delete-stream: " << f.stream << " deleted\n";
  return 0;
}

int run_split(const GlobalOptions& g, const StreamFlags& f) {
  auto client = make_kinesis(g);
  if (!client.ok()) return report_error("split-shard", client.status());
  std::string key = f.hash_key;
  if (key.empty()) {
    auto shards = (*client)->list_shards(f.stream);
    if (!shards.ok()) return report_error("split-shard", shards.status());
    for (const auto& s : *shards) {
      if (s.shard_id == f.shard) {
        key = middle_hash_key(s.hash_key_range.starting_hash_key, s.hash_key_range.ending_hash_key);
      }
    }
    if (key.empty()) {
      return report_error(
          "split-shard",
          Status(StatusCode::kNotFound, "shard " + f.shard + " is not in stream " + f.stream));
    }
  }
  Status s = (*client)->split_shard(f.stream, f.shard, key);
  if (!s.ok()) return report_error("split-shard", s);
  if (f.wait) {
    s = (*client)->wait_for_active(f.stream, std::chrono::minutes(5));
    if (!s.ok()) return report_error("split-shard", s);
  }
  std::cerr << "kcl split-shard: " << f.shard << " split at hash key " << key << "\n";
  return 0;
}

int run_merge(const GlobalOptions& g, const StreamFlags& f) {
  auto client = make_kinesis(g);
  if (!client.ok()) return report_error("merge-shards", client.status());
  Status s = (*client)->merge_shards(f.stream, f.shard, f.other_shard);
  if (!s.ok()) return report_error("merge-shards", s);
  if (f.wait) {
    s = (*client)->wait_for_active(f.stream, std::chrono::minutes(5));
    if (!s.ok()) return report_error("merge-shards", s);
  }
  std::cerr << "kcl merge-shards: " << f.shard << " and " << f.other_shard << " merged\n";
  return 0;
}

}  // namespace

void add_stream_commands(CLI::App& parent, const GlobalOptions& global, int& exit_code) {
  auto f = std::make_shared<StreamFlags>();
  auto* create =
      parent.add_subcommand("create-stream", "Create a stream and wait until it is ACTIVE.");
  create->add_option("--stream", f->stream, "Stream name")->required();
  create->add_option("--shards", f->shards, "Number of shards (default 1)")
      ->check(CLI::Range(1, 10000));
  create->add_flag("!--no-wait", f->wait, "Return without waiting for ACTIVE");
  create->callback([&global, &exit_code, f] { exit_code = run_create(global, *f); });

  auto* del = parent.add_subcommand("delete-stream", "Delete a stream.");
  del->add_option("--stream", f->stream, "Stream name")->required();
  del->callback([&global, &exit_code, f] { exit_code = run_delete(global, *f); });

  auto* split = parent.add_subcommand(
      "split-shard", "Split a shard in two (at the middle of its hash key range by default).");
  split->add_option("--stream", f->stream, "Stream name")->required();
  split->add_option("--shard", f->shard, "The shard to split")->required();
  split->add_option("--hash-key", f->hash_key, "Starting hash key of the new upper child");
  split->add_flag("!--no-wait", f->wait, "Return without waiting for ACTIVE");
  split->callback([&global, &exit_code, f] { exit_code = run_split(global, *f); });

  auto* merge = parent.add_subcommand("merge-shards", "Merge two adjacent shards into one.");
  merge->add_option("--stream", f->stream, "Stream name")->required();
  merge->add_option("--shard", f->shard, "The first shard")->required();
  merge->add_option("--adjacent-shard", f->other_shard, "The adjacent shard")->required();
  merge->add_flag("!--no-wait", f->wait, "Return without waiting for ACTIVE");
  merge->callback([&global, &exit_code, f] { exit_code = run_merge(global, *f); });
}

}  // namespace kcl::cli
