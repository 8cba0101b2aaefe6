// kcl: the kcl-cpp command line.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <string>

#include "cli_common.h"
#include "commands.h"
#include "kcl/version.h"

int main(int argc, char** argv) {
  // One malloc arena unless MALLOC_ARENA_MAX says otherwise: a batch allocated on the fetch
  // thread and freed on the processor's is then reused instead of held in per-thread arenas
  // (kcl consume: 53 -> 40 MB RSS on bench/consume_e2e.py, CPU per record unchanged).
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 1);
  CLI::App app{
      "kcl: tools for Amazon Kinesis Data Streams built on kcl-cpp.\n"
      "Credentials come from the standard AWS chain (environment, ~/.aws files, web identity,\n"
      "container, instance metadata). Endpoints: --endpoint-url or AWS_ENDPOINT_URL,\n"
      "AWS_ENDPOINT_URL_KINESIS, AWS_ENDPOINT_URL_DYNAMODB."};
  // The library's version (kcl/version.h: the CMake project version).
  app.set_version_flag("--version", "kcl " + std::string(kcl::version()));
  app.require_subcommand(1);
  app.fallthrough();  // global flags may also follow the subcommand
  kcl::cli::GlobalOptions global;
  global.add_to(app);
  int exit_code = 0;
  kcl::cli::add_shards_command(app, global, exit_code);
  kcl::cli::add_put_command(app, global, exit_code);
  kcl::cli::add_tail_command(app, global, exit_code);
  kcl::cli::add_consume_command(app, global, exit_code);
  kcl::cli::add_status_command(app, global, exit_code);
  kcl::cli::add_consumers_command(app, global, exit_code);
  kcl::cli::add_multilang_command(app, global, exit_code);
  kcl::cli::add_leases_command(app, global, exit_code);
  kcl::cli::add_stream_commands(app, global, exit_code);
  kcl::cli::add_options_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
