// kcl consume --stream S --app A: runs a worker (leases shared with every other worker of
// application A) and prints one JSON object per record, as `kcl tail` does. Checkpoints are
// written only after the output they cover was written and flushed, so a crash never skips
// a record (it may print some again after a restart: at-least-once). They are written at
// most every --checkpoint-interval per shard (default 5 s), also when the shard goes idle
// (the worker calls the processor with an empty batch after an idle interval), and always at
// shard end and at a graceful shutdown: a crash re-prints at most about one interval's
// records, and a steady fleet writes one checkpoint per shard per interval instead of one per
// batch. --max N prints exactly N records and checkpoints each shard at its last one printed.
// Poison records: with --dead-letter-file or --dead-letter-stream, a batch that fails
// --max-attempts times (say stdout refuses it, or --reject-matching names a record in it) is
// bisected and the records that keep failing while the records next to them succeed are set
// aside there; a failure of every record (an outage) is retried instead, up to the option
// dead_letter_outage_limit (kcl/dead_letter.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>

#include "base/status_macros.h"
#include "commands.h"
#include "consume_output.h"
#include "dead_letter_options.h"
#include "kcl/worker.h"
#include "kcl/worker_options.h"

namespace kcl::cli {

namespace {

struct ConsumeFlags {
  std::vector<std::string> streams;
  std::string streams_file;
  std::string app;
  std::string table;
  std::string from = "latest";
  std::string worker_id;
  bool raw = false;
  int threads = 4;
  long long failover_ms = 10000;
  long long settle_ms = -1;  // -1: LeaseConfig's default
  int max_leases = 0;
  std::string assignment = "leader";
  long long max_records = 0;
  long long checkpoint_interval_ms = 5000;
  std::string http;
  std::string http_advertise;
  std::string cloudwatch_metrics;
  std::string metrics_level = "DETAILED";
  std::string log_format = "text";
  bool fan_out = false;
  std::string consumer_name;
  DeadLetterOptions dead_letter;
  std::string reject_matching;
  long long stall_threshold_ms = 60000;
  std::string hold_while_exists;
  long long read_rate = 2LL << 20;  // RetrievalConfig::max_read_bytes_per_second
  // --option NAME=VALUE: any option of the table (include/kcl/worker_options.h), over the flags.
  std::vector<std::string> options;
  bool max_attempts_given = false;  // --max-attempts (else --option's, or the default)
};

// The range of an option of the table (include/kcl/worker_options.h) whose bounds hold no
// matter the other options, in the option's own unit (milliseconds for durations).
CLI::Range table_range(std::string_view name) {
  const WorkerOption* o = find_worker_option(name);
  if (o == nullptr || !o->lo_note.empty() || !o->hi_note.empty() || o->zero_allowed) {
    throw std::logic_error("kcl consume: no plain range for option " + std::string(name));
  }
  return CLI::Range(static_cast<long long>(o->lo), static_cast<long long>(o->hi));
}

// --cloudwatch-metrics: "emf" (stderr), "emf:FILE" or "put"; an error message when neither.
std::optional<std::string> apply_cloudwatch_flags(const ConsumeFlags& f, WorkerConfig& config) {
  CloudWatchMetricsConfig& cw = config.cloudwatch;
  const std::string& v = f.cloudwatch_metrics;
  if (v.empty()) {
    cw.mode = CloudWatchMetricsMode::kOff;
  } else if (v == "put") {
    cw.mode = CloudWatchMetricsMode::kPutMetricData;
  } else if (v == "emf") {
    cw.mode = CloudWatchMetricsMode::kEmf;
  } else if (v.rfind("emf:", 0) == 0 && v.size() > 4) {
    cw.mode = CloudWatchMetricsMode::kEmf;
    cw.emf_path = v.substr(4);
  } else {
    return "--cloudwatch-metrics must be emf, emf:FILE or put, not '" + v + "'";
  }
  if (!parse_metrics_level(f.metrics_level, cw.level)) {
    return "--metrics-level must be NONE, SUMMARY or DETAILED, not '" + f.metrics_level + "'";
  }
  return std::nullopt;
}

// --reject-matching as a regular expression (ECMAScript), or why it is not one.
Result<std::optional<std::regex>> reject_pattern(const ConsumeFlags& f) {
  if (f.reject_matching.empty()) return std::optional<std::regex>();
  try {
    return std::optional<std::regex>(std::regex(f.reject_matching));
  } catch (const std::regex_error& e) {
    return Status(StatusCode::kInvalidArgument, "--reject-matching '" + f.reject_matching +
                                                    "' is not a regular expression: " + e.what());
  }
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The stream names of a --streams-file: one a line, blank lines and "#" comments skipped.
Result<std::vector<std::string>> read_streams_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status(StatusCode::kInvalidArgument, "cannot read --streams-file " + path);
  std::vector<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const auto last = line.find_last_not_of(" \t\r");
    names.push_back(line.substr(first, last - first + 1));
  }
  return names;
}

// --stream (once: a one-stream table as always; several: multi-stream) or --streams-file
// (multi-stream, the file read again every stream_poll_interval and on SIGHUP).
Status apply_stream_flags(const ConsumeFlags& f, WorkerConfig& config) {
  if (f.streams.empty() == f.streams_file.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  "name the streams with --stream (repeatable) or --streams-file, one of the two");
  }
  if (f.streams.size() == 1) {
    config.stream_name = f.streams.front();
  } else if (!f.streams.empty()) {
    for (const std::string& name : f.streams) config.streams.push_back(StreamConfig{name, {}});
  } else {
    KCL_RETURN_IF_ERROR(read_streams_file(f.streams_file).status());
    config.stream_tracker = [path = f.streams_file]() -> std::vector<StreamConfig> {
      auto names = read_streams_file(path);
      if (!names.ok()) throw std::runtime_error(names.status().message());
      std::vector<StreamConfig> out;
      for (std::string& n : *names) out.push_back(StreamConfig{std::move(n), {}});
      return out;
    };
    install_reload_signal();
  }
  return Status::Ok();
}

// The worker's configuration from the flags (the streams, leases, processing, reading and
// the endpoint), before --cloudwatch-metrics and --option.
Status configure_from_flags(const GlobalOptions& g, const ConsumeFlags& f, WorkerConfig& config) {
  KCL_ASSIGN_OR_RETURN(StartPosition from, parse_start_position(f.from));
  KCL_RETURN_IF_ERROR(apply_stream_flags(f, config));
  config.leases.application_name = f.app;
  config.leases.table_name = f.table;
  config.leases.worker_id = f.worker_id;
  config.leases.failover_time = std::chrono::milliseconds(f.failover_ms);
  if (f.settle_ms >= 0) config.leases.settle_time = std::chrono::milliseconds(f.settle_ms);
  if (f.max_leases > 0) config.leases.max_leases_per_worker = f.max_leases;
  config.leases.assignment =
      f.assignment == "worker-takes" ? LeaseAssignment::kWorkerTakes : LeaseAssignment::kLeader;
  config.initial_position = from;
  config.processing.thread_pool_size = f.threads;
  // An idle shard's last records are checkpointed too (PrintingProcessor), so a crash prints
  // again at most about one interval's records, as --help promises.
  if (f.checkpoint_interval_ms > 0) {
    config.processing.empty_batch_interval =
        std::chrono::milliseconds(std::max(100LL, f.checkpoint_interval_ms));
  }
  config.aws = g.aws_config();
  config.http_address = f.http;
  config.http_advertise_address = f.http_advertise;
  config.processing.stall_threshold = std::chrono::milliseconds(f.stall_threshold_ms);
  if (f.fan_out) config.retrieval.mode = RetrievalMode::kFanOut;
  config.retrieval.consumer_name = f.consumer_name;
  config.retrieval.max_read_bytes_per_second = static_cast<std::size_t>(f.read_rate);
  return Status::Ok();
}

// --option NAME=VALUE, each over what the flags set.
Status apply_option_flags(const ConsumeFlags& f, WorkerConfig& config) {
  for (const std::string& option : f.options) {
    if (Status s = set_worker_option(config, option); !s.ok()) {
      return Status(s.code(), "--option " + s.message());
    }
  }
  return Status::Ok();
}

// After a graceful stop: the records delivered, and exit status 1 when the stop failed or a
// shard never delivered because its consumer kept failing (even though the worker itself
// stopped cleanly).
int report_stop(Worker& worker, const Output& out, const Status& stopped) {
  auto stats = worker.stats();
  say("consume", "stopped after " + std::to_string(out.written()) + " records printed" +
                     (stats.records_dead_lettered > 0
                          ? " (" + std::to_string(stats.records_dead_lettered) + " dead-lettered)"
                          : ""));
  if (!stopped.ok()) return report_error("consume", stopped);
  int never_delivered = 0;
  for (const FailingShard& failing : stats.failing_shards) {
    if (failing.records_delivered > 0) continue;
    ++never_delivered;
    say("consume",
        "shard " + failing.shard_id + " delivered no record: its consumer failed " +
            std::to_string(failing.consecutive_failures) +
            (failing.consecutive_failures == 1 ? " time" : " times") +
            " in a row: " + failing.cause.to_string(),
        LogLevel::kError);
  }
  return never_delivered > 0 ? 1 : 0;
}

int run_consume(const GlobalOptions& g, const ConsumeFlags& f) {
  WorkerConfig config;
  if (Status s = configure_from_flags(g, f, config); !s.ok()) return report_error("consume", s);
  // Every logger of the process (the worker's, the library's and say()) takes the format
  // from here.
  if (f.log_format == "json") setenv("KCL_LOG_FORMAT", "json", 1);
  if (auto bad = apply_cloudwatch_flags(f, config)) {
    say("consume", *bad, LogLevel::kError);
    return 2;
  }
  if (Status s = apply_option_flags(f, config); !s.ok()) return report_error("consume", s);
  auto reject = reject_pattern(f);
  if (!reject.ok()) return report_error("consume", reject.status());
  if (!f.reject_matching.empty() && !f.dead_letter.any()) {
    return report_error("consume", Status(StatusCode::kInvalidArgument,
                                          "--reject-matching needs --dead-letter-file or "
                                          "--dead-letter-stream (a rejected record would "
                                          "otherwise be retried for ever)"));
  }
  std::unique_ptr<Producer> dead_letter_producer;
  DeadLetterOptions dead_letter = f.dead_letter;
  if (!f.max_attempts_given) {
    dead_letter.max_attempts = config.processing.max_attempts_before_dead_letter;
  }
  if (Status s = apply_dead_letter_options(dead_letter, config.aws, config, dead_letter_producer);
      !s.ok()) {
    return report_error("consume", s);
  }
  Output out(f.raw, f.max_records);
  PrintingProcessor::Reject rejects;
  if (*reject) {
    rejects = [pattern = std::move(**reject)](const Record& r) {
      return std::regex_search(r.data().begin(), r.data().end(), pattern);
    };
  }
  Worker worker(config, std::make_shared<PrintingFactory>(
                            out, std::chrono::milliseconds(f.checkpoint_interval_ms),
                            config.multi_stream(), std::move(rejects), f.hold_while_exists));
  install_stop_signals();
  if (Status s = worker.start(); !s.ok()) return report_error("consume", s);
  say("consume",
      "worker " + worker.worker_id() + " reading " +
          (f.streams_file.empty() ? join_names(f.streams) : "the streams of " + f.streams_file) +
          " for application " + f.app);
  if (!worker.http_url().empty()) {
    say("consume", "status page " + worker.http_url() + "/status (metrics at " + worker.http_url() +
                       "/metrics)");
  }
  auto stopped =
      wait_for_worker_or_stop(worker, [&] { return out.limit_reached() || out.reader_gone(); });
  if (stopped) {
    // Stopped on its own: a fatal error such as the stream being deleted.
    if (!stopped->ok()) return report_error("consume", *stopped);
    return 0;
  }
  const std::string failure = out.failure();
  say("consume",
      std::string(!failure.empty()      ? "cannot write standard output (" + failure + "): stopping"
                  : out.closed()        ? "standard output was closed: stopping"
                  : out.limit_reached() ? "--max records printed: stopping"
                                        : "stopping") +
          " gracefully (a second signal exits at once)",
      failure.empty() ? LogLevel::kInfo : LogLevel::kError);
  const Status stopped_status = worker.shutdown();
  int status = report_stop(worker, out, stopped_status);
  // Records were left unprinted because the output failed (not because its reader left).
  if (!failure.empty()) status = 1;
  if (stopped_status.code() == StatusCode::kDeadlineExceeded) {
    // A processor's thread is still blocked (a write to an output nobody reads): its leases
    // were handed back, and the process ends without waiting for it (nor flushing stdout,
    // which that thread may be blocked on).
    std::fflush(stderr);
    std::_Exit(status);
  }
  return status;
}

// The streams and how the workers share them.
void add_worker_flags(CLI::App& cmd, ConsumeFlags& f) {
  cmd.add_option("--stream", f.streams,
                 "Stream name; repeat it to read several streams through one lease table (the "
                 "Java KCL's multi-stream format): each line then starts with \"streamName\"");
  cmd.add_option("--streams-file", f.streams_file,
                 "Read the streams named in FILE (one a line; # starts a comment), read again "
                 "every 60 s and on SIGHUP: streams added start at --from, streams removed "
                 "have their leases deleted an hour later");
  cmd.add_option("--app", f.app, "Application name (names the lease table)")->required();
  cmd.add_option("--table", f.table, "Lease table name (default: the application name)");
  cmd.add_option("--from", f.from,
                 "Where shards without a checkpoint start: latest (default), trim-horizon, or "
                 "an ISO 8601 time");
  cmd.add_option("--worker-id", f.worker_id,
                 "This worker's id in the lease table (default: host:pid:random)");
  cmd.add_option("--threads", f.threads, "Threads running the shard consumers (default 4)")
      ->check(table_range("thread_pool_size"));
  cmd.add_option("--failover-ms", f.failover_ms,
                 "Lease failover time in milliseconds (default 10000)")
      ->check(table_range("failover_time"));
  cmd.add_option("--assignment", f.assignment,
                 "How the workers share the shards: leader (default: one elected worker "
                 "assigns; joins in seconds, planned moves are graceful handoffs) or "
                 "worker-takes (every worker scans, takes and steals, as the Java KCL 2.x; "
                 "only for fleets shared with such workers). One fleet uses one way")
      ->check(CLI::IsMember({"leader", "worker-takes"}));
  cmd.add_option("--settle-ms", f.settle_ms,
                 "Leader assignment: how long the fleet's membership must stay unchanged before "
                 "free leases are assigned (default 200; at most half of --failover-ms). "
                 "Workers that register within this of one another are assigned in one pass "
                 "with no handoffs; raise it when a fleet's workers start further apart")
      ->check(CLI::Range(0LL, 1800000LL));
  cmd.add_option("--max-leases", f.max_leases, "Most leases this worker holds (default: no limit)")
      ->check(CLI::NonNegativeNumber);
}

// What is printed and checkpointed, the endpoint, the metrics and the reading.
void add_run_flags(CLI::App& cmd, ConsumeFlags& f) {
  cmd.add_option("--max", f.max_records,
                 "Print exactly this many records (fewer only if the stream holds fewer), "
                 "checkpoint each shard at the last record printed, and stop gracefully "
                 "(default: no limit)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--checkpoint-interval", f.checkpoint_interval_ms,
                 "Checkpoint each shard at most every this many milliseconds (default 5000; "
                 "0 = after every batch), also when no more records come. Shard ends and a "
                 "graceful stop always checkpoint; a crash prints again at most about one "
                 "interval's records")
      ->check(CLI::Range(0LL, 3600000LL));
  cmd.add_option("--http", f.http,
                 "Serve /metrics (Prometheus), /healthz, /readyz, /status and /status.json on "
                 "[HOST:]PORT (a port alone: 127.0.0.1). Every worker's /status and "
                 "/status.json show the whole fleet (each worker's lag, records/s and health, "
                 "fetched from the others' endpoints)");
  cmd.add_option("--http-advertise", f.http_advertise,
                 "The address the other workers fetch this worker's figures at: HOST, "
                 "HOST:PORT or http://HOST:PORT (default: the --http address, or this host's "
                 "name when --http listens on every interface, 0.0.0.0 or [::]; set it when "
                 "the other workers reach this host by another address, e.g. a pod's IP)");
  cmd.add_option("--cloudwatch-metrics", f.cloudwatch_metrics,
                 "Publish metrics to CloudWatch under the Java KCL's names: emf (Embedded "
                 "Metric Format lines on stderr), emf:FILE (appended to FILE) or put "
                 "(PutMetricData calls; namespace = the application name)");
  cmd.add_option("--metrics-level", f.metrics_level,
                 "CloudWatch metrics level: NONE, SUMMARY or DETAILED (default)");
  cmd.add_option("--log-format", f.log_format,
                 "Log lines on stderr as text (default) or json (one object per line)")
      ->check(CLI::IsMember({"text", "json"}));
  cmd.add_flag("--fan-out", f.fan_out,
               "Read with enhanced fan-out (SubscribeToShard over HTTP/2): a stream consumer "
               "is found or registered on each stream read, at start (a stream added later: "
               "when its shards first subscribe), and each shard subscribes through its "
               "stream's consumer. Works with one --stream, several, or --streams-file");
  cmd.add_option("--consumer-name", f.consumer_name,
                 "The stream consumer's name for --fan-out, the same on every stream "
                 "(default: the application name)");
  cmd.add_option("--stall-threshold-ms", f.stall_threshold_ms,
                 "Flag a shard stalled (log, kcl_shard_stalled, /status.json, /readyz "
                 "\"degraded\") when something keeps it from progressing this long: a "
                 "processor callback running, reads throttled or failing, a parent not "
                 "finished, checkpoints rejected, records waiting (default 60000; 1000 to "
                 "3600000, or 0 = off). A shard idle at the tip is never stalled")
      ->check(CLI::Range(0LL, 3600000LL));
  add_read_rate_option(cmd, f.read_rate);
}

// The processor's failures (the dead-letter sinks) and --option; returns --max-attempts.
CLI::Option* add_failure_flags(CLI::App& cmd, ConsumeFlags& f) {
  cmd.add_option("--hold-while-exists", f.hold_while_exists,
                 "Rehearsal aid: before printing a batch, wait while FILE exists (a processor "
                 "stuck on purpose, to try the stall alerts); remove FILE to go on");
  cmd.add_flag("--raw", f.raw, "Print only each record's data, as a line of text");
  cmd.add_option("--dead-letter-file", f.dead_letter.file,
                 "Poison records: a batch that fails --max-attempts times is bisected and each "
                 "record that keeps failing while the records next to it succeed is appended to "
                 "PATH as a JSON line (position, error, attempts, base64 data; flushed to disk "
                 "before the shard goes on); when they fail too (an outage) the batch is "
                 "retried, up to --option dead_letter_outage_limit (default 30min)");
  cmd.add_option("--dead-letter-stream", f.dead_letter.stream,
                 "As --dead-letter-file, but each poison record is written to stream NAME "
                 "(its partition key kept, the same JSON object as its data)");
  auto* max_attempts =
      cmd.add_option("--max-attempts", f.dead_letter.max_attempts,
                     "With a dead-letter sink: failures of a batch before it is bisected, and of "
                     "a record alone before it is set aside (default 3, 1..1000)")
          ->check(table_range("max_attempts_before_dead_letter"));
  cmd.add_option("--reject-matching", f.reject_matching,
                 "Treat records whose data matches this regular expression as failures (they "
                 "go to the dead-letter sink, which is then required; matching records side "
                 "by side look like an outage and go there after dead_letter_outage_limit)");
  cmd.add_option("--option", f.options,
                 "Any worker option as NAME=VALUE, over the flags above (repeatable): durations "
                 "take a unit (500ms, 3s, 2min, 1h), choices a name, e.g. --option "
                 "renew_interval=2s --option billing_mode=provisioned. `kcl options` lists "
                 "every option with its type, default and range")
      ->type_name("NAME=VALUE");
  return max_attempts;
}

}  // namespace

void add_consume_command(CLI::App& parent, const GlobalOptions& global, int& exit_code) {
  auto f = std::make_shared<ConsumeFlags>();
  auto* cmd = parent.add_subcommand(
      "consume",
      "Run a worker of application --app on --stream and print one JSON object per record "
      "(fields as kcl tail). Workers of one application share the shards through the lease "
      "table (named after the application); checkpoints cover only output already flushed, "
      "at most every --checkpoint-interval. SIGINT/SIGTERM stop gracefully (final checkpoints, "
      "leases handed back); a second signal exits at once. A closed output (kcl consume | "
      "head) stops it gracefully too, checkpointed at the last record printed.");
  add_worker_flags(*cmd, *f);
  add_run_flags(*cmd, *f);
  auto* max_attempts = add_failure_flags(*cmd, *f);
  cmd->callback([&global, &exit_code, f, max_attempts] {
    f->max_attempts_given = max_attempts->count() > 0;
    exit_code = run_consume(global, *f);
  });
}

}  // namespace kcl::cli
