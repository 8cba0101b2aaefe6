// kcl multilang --properties FILE | -p FILE | FILE  [--in-process [--python P] [--option N=V]...]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "dead_letter_options.h"
#include "kcl/worker.h"
#include "multilang/child_process.h"
#include "multilang/properties.h"

namespace kcl::cli {

namespace {
struct MultiLangFlags {
  std::string properties;
  bool in_process = false;
  std::string python = "python3";
  std::vector<std::string> options;  // kcl.Worker options, with --in-process
};

// A Python literal of `text` (kcl.kclpy reads --option values as literals when they are).
std::string python_text(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

// --in-process: the amazon_kclpy application named by executableName runs in one Python
// process through kcl.Worker (python3 -m kcl.kclpy FILE), which this command becomes (exec):
// signals reach it directly and its exit status is the command's. The global options it can
// take go with it as kcl.Worker options.
int run_in_process(const GlobalOptions& g, const MultiLangFlags& f) {
  if (!g.ca_bundle.empty() || g.no_verify_tls || g.wire != "auto") {
    std::cerr << "kcl multilang: --ca-bundle, --no-verify-tls and --wire do not reach an "
                 "in-process Python worker; leave them out with --in-process\n";
    return 2;
  }
  std::vector<std::string> args{f.python, "-m", "kcl.kclpy", f.properties};
  auto option = [&](const std::string& name_value) {
    args.push_back("--option");
    args.push_back(name_value);
  };
  if (!g.region.empty()) option("region=" + python_text(g.region));
  if (!g.endpoint_url.empty()) option("endpoint_url=" + python_text(g.endpoint_url));
  if (!g.profile.empty()) option("profile=" + python_text(g.profile));
  for (const std::string& o : f.options) option(o);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.flush();
  ::execvp(argv[0], argv.data());
  std::cerr << "kcl multilang: --in-process: cannot run " << f.python << ": "
            << std::strerror(errno)
            << " (it needs the kcl Python package installed for it: docs/python.md)\n";
  return 127;
}

int run_multilang(const GlobalOptions& g, const MultiLangFlags& f) {
  std::ifstream in(f.properties);
  if (!in) {
    std::cerr << "kcl multilang: cannot read " << f.properties << "\n";
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto props = multilang::parse_properties(text.str(), f.properties);
  if (!props.ok()) return report_error("multilang", props.status());
  auto settings = multilang::settings_from_properties(*props);
  if (!settings.ok()) return report_error("multilang", settings.status());
  WorkerConfig config = settings->worker;
  // The flags given override the file's settings, as in --in-process mode; the rest of the
  // file's stays.
  g.override_given(config.aws);
  auto logger = make_default_logger();
  if (!settings->ignored_keys.empty()) {
    std::string keys;
    for (const auto& k : settings->ignored_keys) keys += (keys.empty() ? "" : ", ") + k;
    logger->log(LogLevel::kWarn, "multilang", "properties kcl-cpp does not use (ignored): " + keys);
  }
  for (const auto& warning : settings->warnings) {
    logger->log(LogLevel::kWarn, "multilang", warning);
  }
  DeadLetterOptions dead_letter{settings->dead_letter_file, settings->dead_letter_stream,
                                config.processing.max_attempts_before_dead_letter, "deadLetterFile",
                                "deadLetterStream"};
  std::unique_ptr<Producer> dead_letter_producer;  // outlives the worker
  if (Status s = apply_dead_letter_options(dead_letter, config.aws, config, dead_letter_producer);
      !s.ok()) {
    return report_error("multilang", s);
  }
  Dependencies deps;
  deps.logger = logger;
  multilang::ChildOptions child = settings->child;
  child.tell_stream = config.multi_stream();
  Worker worker(config, std::make_shared<multilang::MultiLangProcessorFactory>(child, logger),
                deps);
  install_stop_signals();
  Status s = worker.start();
  if (!s.ok()) return report_error("multilang", s);
  std::string streams = config.stream_name;
  for (const StreamConfig& sc : config.streams) streams += (streams.empty() ? "" : ", ") + sc.name;
  std::cerr << "kcl multilang: worker " << worker.worker_id() << " reading " << streams << " with '"
            << props->at("executableName") << "' as the record processor of each shard\n";
  if (auto stopped = wait_for_worker_or_stop(worker)) {
    if (!stopped->ok()) return report_error("multilang", *stopped);
    return 0;
  }
  std::cerr << "kcl multilang: stopping gracefully (shutdownRequested to every child)\n";
  // The worker hands the leases back once shutdown_timeout (shutdownGraceMillis) has passed
  // and ends saying which processors did not return: those are calls to children that never
  // answer (no timeoutInSeconds). The children are killed then, so that the calls return and
  // the worker's threads end (the Worker's destructor waits for them).
  std::shared_future<Status> ending = worker.begin_shutdown();
  const auto grace = config.processing.shutdown_timeout + std::chrono::seconds(5);
  const bool ended = ending.wait_for(grace) == std::future_status::ready;
  if (!ended || ending.get().code() == StatusCode::kDeadlineExceeded) {
    logger->log(LogLevel::kWarn, "multilang",
                "children still had not answered shutdownRequested within the stop's bound; "
                "killing them");
    multilang::ChildProcess::kill_all();
  }
  Status stopped = ending.get();
  if (!stopped.ok() && stopped.code() != StatusCode::kDeadlineExceeded) {
    return report_error("multilang", stopped);
  }
  return 0;
}
}  // namespace

void add_multilang_command(CLI::App& parent, const GlobalOptions& global, int& exit_code) {
  auto f = std::make_shared<MultiLangFlags>();
  auto* cmd = parent.add_subcommand(
      "multilang",
      "Run record processors written in any language with the Java KCL's MultiLangDaemon "
      "protocol and properties file: one child process per shard (executableName), JSON lines "
      "over its stdin/stdout, its stderr forwarded to the log; other lines on its stdout are "
      "skipped. A child that exits, answers a status for another action or does not send its "
      "next message within timeoutInSeconds (unset: no limit) is replaced; the other shards go "
      "on. SIGINT/SIGTERM stop gracefully (shutdownRequested to every child).");
  auto* named =
      cmd->add_option("-p,--properties", f->properties, "The MultiLangDaemon properties file");
  auto* positional =
      cmd->add_option("file", f->properties, "The properties file, as the Java daemon takes it");
  named->excludes(positional);
  auto* in_process = cmd->add_flag(
      "--in-process", f->in_process,
      "Run an amazon_kclpy application (executableName names a Python program) in one Python "
      "process instead of a child per shard: this command becomes `python3 -m kcl.kclpy FILE` "
      "(the kcl Python package must be installed for that Python; docs/python.md)");
  cmd->add_option("--python", f->python, "With --in-process: the Python to run (default python3)")
      ->needs(in_process);
  cmd->add_option("--option", f->options,
                  "With --in-process: a kcl.Worker option over the file's settings, NAME=VALUE "
                  "(repeatable; as python3 -m kcl.kclpy --option)")
      ->needs(in_process);
  cmd->callback([&global, &exit_code, f] {
    if (f->properties.empty()) throw CLI::RequiredError("--properties (or the file)");
    exit_code = f->in_process ? run_in_process(global, *f) : run_multilang(global, *f);
  });
}

}  // namespace kcl::cli
