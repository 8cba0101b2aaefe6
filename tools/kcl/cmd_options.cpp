// kcl options [--markdown]: every worker option (include/kcl/worker_options.h) with its type,
// default, range, the `kcl consume` flag and MultiLangDaemon key that set it, and what it
// does. docs/options.md holds the --markdown output (tests/unit/cli checks that it is current).
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "commands.h"
#include "kcl/worker_options.h"
#include "options_text.h"

namespace kcl::cli {

namespace {

// "A | B" -> "A \| B" inside a Markdown table cell.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string code(std::string_view text) {
  return text.empty() ? std::string() : "`" + cell(text) + "`";
}

}  // namespace

std::string options_markdown() {
  std::string out =
      "| Option | Type | Default | Range | `kcl consume` | multilang key | What it sets |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const WorkerOption& o : worker_options()) {
    const std::string def = option_default_text(o);
    out += "| `" + std::string(o.name) + "` | " + std::string(option_kind_name(o.kind)) + " | " +
           (def.empty() ? std::string() : code(def)) + " | " + cell(option_range_text(o)) + " | " +
           code(o.cli) + " | " + code(o.property) + " | " + cell(o.doc) + " |\n";
  }
  return out;
}

std::string options_text() {
  std::string out;
  for (const WorkerOption& o : worker_options()) {
    out += std::string(o.name) + " (" + std::string(option_kind_name(o.kind));
    if (const std::string def = option_default_text(o); !def.empty()) out += ", default " + def;
    if (const std::string range = option_range_text(o); !range.empty()) out += "; " + range;
    out += ")\n    " + std::string(o.doc) + "\n";
    if (!o.cli.empty()) out += "    kcl consume " + std::string(o.cli) + "\n";
    if (!o.property.empty()) out += "    multilang key " + std::string(o.property) + "\n";
  }
  return out;
}

void add_options_command(CLI::App& parent, int& exit_code) {
  auto* cmd = parent.add_subcommand(
      "options",
      "List every worker option: name, type, default, range and what it sets. Each is a "
      "keyword of kcl.Worker (Python), `kcl consume --option NAME=VALUE` and a key of a "
      "`kcl multilang` properties file; some have flags or Java keys of their own (shown)");
  auto markdown = std::make_shared<bool>(false);
  cmd->add_flag("--markdown", *markdown, "Print a Markdown table (docs/options.md)");
  cmd->callback([&exit_code, markdown] {
    std::cout << (*markdown ? options_markdown() : options_text());
    exit_code = 0;
  });
}

}  // namespace kcl::cli
