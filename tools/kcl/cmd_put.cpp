// kcl put --stream S [--partition-key K | --key-field F]: each line of stdin becomes one
// record, sent in PutRecords batches (at most 500 records / 5 MiB). Records that fail are
// retried with backoff; any that still fail are reported and the exit status is 1.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "commands.h"

namespace kcl::cli {

namespace {

constexpr std::size_t kMaxBatchRecords = 500;
constexpr std::size_t kMaxBatchBytes = 5u << 20;
constexpr std::size_t kMaxRecordBytes = 1u << 20;

struct PutOptions {
  std::string stream;
  std::string partition_key;
  std::string key_field;
  int max_attempts = 8;
  bool quiet = false;
};

struct Pending {
  std::size_t line_no;
  kinesis::PutRecordsEntry entry;
};

class Putter {
 public:
  Putter(kinesis::KinesisClient& client, const PutOptions& o) : client_(client), o_(o) {}

  // Sends `batch`; retries the records that fail. Returns a non-OK status only when the
  // whole call fails after the client's own retries.
  Status send(std::vector<Pending> batch) {
    std::mt19937_64 rng(std::random_device{}());
    for (int attempt = 1; !batch.empty(); ++attempt) {
      std::vector<kinesis::PutRecordsEntry> entries;
      entries.reserve(batch.size());
      for (const auto& p : batch) entries.push_back(p.entry);
      auto result = client_.put_records(o_.stream, entries);
      if (!result.ok()) {
        if (!result.status().retryable() || attempt >= o_.max_attempts) return result.status();
      }
      std::vector<Pending> retry;
      if (result.ok()) {
        for (std::size_t i = 0; i < batch.size() && i < result->records.size(); ++i) {
          const auto& r = result->records[i];
          if (r.ok) {
            ++sent_;
          } else if (attempt >= o_.max_attempts) {
            ++failed_;
            std::cerr << "kcl put: line " << batch[i].line_no << " failed after " << attempt
                      << " attempts: " << r.error_code << ": " << r.error_message << "\n";
          } else {
            retry.push_back(std::move(batch[i]));
          }
        }
      } else {
        retry = std::move(batch);
      }
      batch = std::move(retry);
      if (!batch.empty()) {
        auto cap = std::min<long long>(5000, 100LL << std::min(attempt, 10));
        std::uniform_int_distribution<long long> jitter(0, cap);
        std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
      }
    }
    return Status::Ok();
  }

  std::size_t sent() const { return sent_; }
  std::size_t failed() const { return failed_; }
  void count_failed() { ++failed_; }

 private:
  kinesis::KinesisClient& client_;
  const PutOptions& o_;
  std::size_t sent_ = 0;
  std::size_t failed_ = 0;
};

Result<std::string> key_for(const PutOptions& o, const std::string& line, std::size_t line_no) {
  if (!o.partition_key.empty()) return o.partition_key;
  if (o.key_field.empty()) return std::to_string(line_no);
  auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status(StatusCode::kInvalidArgument, "line " + std::to_string(line_no) +
                                                    " is not a JSON object (--key-field " +
                                                    o.key_field + ")");
  }
  auto it = j.find(o.key_field);
  if (it == j.end() || it->is_null()) {
    return Status(StatusCode::kInvalidArgument,
                  "line " + std::to_string(line_no) + " has no field '" + o.key_field + "'");
  }
  std::string key = it->is_string() ? it->get<std::string>() : it->dump();
  if (key.empty() || key.size() > 256) {
    return Status(StatusCode::kInvalidArgument,
                  "line " + std::to_string(line_no) + ": field '" + o.key_field +
                      "' must give a partition key of 1 to 256 characters");
  }
  return key;
}

int run_put(const GlobalOptions& g, const PutOptions& o) {
  auto client = make_kinesis(g);
  if (!client.ok()) return report_error("put", client.status());
  Putter putter(**client, o);
  std::vector<Pending> batch;
  std::size_t batch_bytes = 0;
  std::string line;
  std::size_t line_no = 0;
  auto flush = [&]() -> Status {
    if (batch.empty()) return Status::Ok();
    Status s = putter.send(std::move(batch));
    batch.clear();
    batch_bytes = 0;
    return s;
  };
  std::ios::sync_with_stdio(false);
  while (std::getline(std::cin, line)) {
    ++line_no;
    auto key = key_for(o, line, line_no);
    if (!key.ok()) {
      std::cerr << "kcl put: " << key.status().message() << "\n";
      putter.count_failed();
      continue;
    }
    std::size_t size = line.size() + key->size();
    if (size > kMaxRecordBytes) {
      std::cerr << "kcl put: line " << line_no << " is " << size
                << " bytes with its partition key; a record holds at most 1 MiB\n";
      putter.count_failed();
      continue;
    }
    if (batch.size() == kMaxBatchRecords || batch_bytes + size > kMaxBatchBytes) {
      Status s = flush();
      if (!s.ok()) return report_error("put", s);
    }
    batch.push_back(Pending{line_no, kinesis::PutRecordsEntry{line, *key, ""}});
    batch_bytes += size;
  }
  Status s = flush();
  if (!s.ok()) return report_error("put", s);
  if (!o.quiet || putter.failed() > 0) {
    std::cerr << "kcl put: " << putter.sent() << " records sent, " << putter.failed()
              << " failed\n";
  }
  return putter.failed() == 0 ? 0 : 1;
}

}  // namespace

void add_put_command(CLI::App& parent, const GlobalOptions& global, int& exit_code) {
  auto opts = std::make_shared<PutOptions>();
  auto* cmd = parent.add_subcommand(
      "put",
      "Write each line of standard input as one record (PutRecords batches of at most 500 "
      "records / 5 MiB). Failed records are retried; any that still fail are listed and the "
      "exit status is 1.");
  cmd->add_option("--stream", opts->stream, "Stream name")->required();
  auto* pk = cmd->add_option("--partition-key", opts->partition_key,
                             "One partition key for every record (default: the line number)");
  cmd->add_option("--key-field", opts->key_field,
                  "Take the partition key from this field of each line, read as a JSON object")
      ->excludes(pk);
  cmd->add_option("--max-attempts", opts->max_attempts,
                  "Attempts per record before it counts as failed (default 8)")
      ->check(CLI::Range(1, 100));
  cmd->add_flag("--quiet", opts->quiet, "Print the summary only when something failed");
  cmd->callback([&global, &exit_code, opts] { exit_code = run_put(global, *opts); });
}

}  // namespace kcl::cli
