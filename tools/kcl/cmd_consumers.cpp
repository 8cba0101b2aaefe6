// kcl consumers --stream S [--register N] [--deregister N]
#include <CLI/CLI.hpp>
#include <iostream>

#include "base/time_text.h"
#include "commands.h"
#include "kinesis/stream_consumers.h"

namespace kcl::cli {

namespace {
struct ConsumersFlags {
  std::string stream;
  std::string register_name;
  std::string deregister_name;
};

int run_consumers(const GlobalOptions& g, const ConsumersFlags& f) {
  auto client = make_kinesis(g);
  if (!client.ok()) return report_error("consumers", client.status());
  auto arn = kinesis::stream_arn(**client, f.stream);
  if (!arn.ok()) return report_error("consumers", arn.status());
  if (!f.deregister_name.empty()) {
    Status s = (*client)->deregister_stream_consumer(*arn, f.deregister_name);
    if (!s.ok()) return report_error("consumers", s);
    std::cerr << "kcl consumers: " << f.deregister_name << " deregistered from " << f.stream
              << "\n";
    return 0;
  }
  if (!f.register_name.empty()) {
    auto c = kinesis::ensure_stream_consumer(**client, *arn, f.register_name,
                                             SystemClock::instance(), std::chrono::minutes(2));
    if (!c.ok()) return report_error("consumers", c.status());
    std::cerr << "kcl consumers: " << c->consumer_name << " is " << c->consumer_status << " ("
              << c->consumer_arn << ")\n";
    return 0;
  }
  auto all = (*client)->list_stream_consumers(*arn);
  if (!all.ok()) return report_error("consumers", all.status());
  for (const auto& c : *all) {
    std::cout << c.consumer_name << "\t" << c.consumer_status << "\t"
              << base::iso8601_seconds(c.creation_timestamp) << "\t" << c.consumer_arn << "\n";
  }
  if (all->empty()) std::cerr << "kcl consumers: no consumer is registered on " << f.stream << "\n";
  return 0;
}
}  // namespace

void add_consumers_command(CLI::App& parent, const GlobalOptions& global, int& exit_code) {
  auto f = std::make_shared<ConsumersFlags>();
  auto* cmd = parent.add_subcommand(
      "consumers",
      "List the enhanced fan-out consumers registered on a stream (name, status, creation "
      "time, ARN; one per line), or register / deregister one.");
  cmd->add_option("--stream", f->stream, "Stream name")->required();
  auto* reg = cmd->add_option("--register", f->register_name,
                              "Register this consumer (or find it) and wait until it is ACTIVE");
  auto* dereg = cmd->add_option("--deregister", f->deregister_name, "Deregister this consumer");
  reg->excludes(dereg);
  cmd->callback([&global, &exit_code, f] { exit_code = run_consumers(global, *f); });
}

}  // namespace kcl::cli
