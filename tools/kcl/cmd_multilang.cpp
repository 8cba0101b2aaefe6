// kcl multilang --properties FILE | -p FILE | FILE
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "dead_letter_options.h"
#include "kcl/worker.h"
#include "multilang/properties.h"

namespace kcl::cli {

namespace {
struct MultiLangFlags {
  std::string properties;
};

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
  // Command-line endpoints and credentials override the file's, as for every command.
  const AwsConfig cli = g.aws_config();
  if (config.aws.region.empty()) config.aws.region = cli.region;
  if (!cli.profile.empty()) config.aws.profile = cli.profile;
  if (!cli.endpoint_url.empty()) config.aws.endpoint_url = cli.endpoint_url;
  config.aws.http = cli.http;
  config.aws.credentials = cli.credentials;
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
  Status stopped = worker.shutdown();
  if (!stopped.ok()) return report_error("multilang", stopped);
  return 0;
}
}  // namespace

void add_multilang_command(CLI::App& parent, const GlobalOptions& global, int& exit_code) {
  auto f = std::make_shared<MultiLangFlags>();
  auto* cmd = parent.add_subcommand(
      "multilang",
      "Run record processors written in any language with the Java KCL's MultiLangDaemon "
      "protocol and properties file: one child process per shard (executableName), JSON lines "
      "over its stdin/stdout, its stderr forwarded to the log. A child that exits, breaks the "
      "protocol or does not answer within timeoutInSeconds is replaced; the other shards go "
      "on. SIGINT/SIGTERM stop gracefully (shutdownRequested to every child).");
  auto* named =
      cmd->add_option("-p,--properties", f->properties, "The MultiLangDaemon properties file");
  auto* positional =
      cmd->add_option("file", f->properties, "The properties file, as the Java daemon takes it");
  named->excludes(positional);
  cmd->callback([&global, &exit_code, f] {
    if (f->properties.empty()) throw CLI::RequiredError("--properties (or the file)");
    exit_code = run_multilang(global, *f);
  });
}

}  // namespace kcl::cli
