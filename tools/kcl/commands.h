// The `kcl` subcommands. Each add_* registers its flags on `parent` and, when chosen, runs
// and stores its exit status in `exit_code`.
#pragma once

#include "cli_common.h"

namespace kcl::cli {

void add_shards_command(CLI::App& parent, const GlobalOptions& global, int& exit_code);
void add_put_command(CLI::App& parent, const GlobalOptions& global, int& exit_code);
void add_tail_command(CLI::App& parent, const GlobalOptions& global, int& exit_code);
void add_stream_commands(CLI::App& parent, const GlobalOptions& global, int& exit_code);
void add_consume_command(CLI::App& parent, const GlobalOptions& global, int& exit_code);
void add_leases_command(CLI::App& parent, const GlobalOptions& global, int& exit_code);
void add_status_command(CLI::App& parent, const GlobalOptions& global, int& exit_code);
void add_consumers_command(CLI::App& parent, const GlobalOptions& global, int& exit_code);
void add_multilang_command(CLI::App& parent, const GlobalOptions& global, int& exit_code);
// `kcl options`: the worker options' table.
void add_options_command(CLI::App& parent, int& exit_code);

}  // namespace kcl::cli
