// kcl: the kcl-cpp command line.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli_common.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "kcl: tools for Amazon Kinesis Data Streams built on kcl-cpp.\n"
      "Credentials come from the standard AWS chain (environment, ~/.aws files, web identity,\n"
      "container, instance metadata). Endpoints: --endpoint-url or AWS_ENDPOINT_URL,\n"
      "AWS_ENDPOINT_URL_KINESIS, AWS_ENDPOINT_URL_DYNAMODB."};
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
  kcl::cli::add_leases_command(app, global, exit_code);
  kcl::cli::add_stream_commands(app, global, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
