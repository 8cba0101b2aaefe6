// The worker options' table (src/worker/worker_options.h) as `kcl options` prints it.
#pragma once

#include <string>

namespace kcl::cli {

// One Markdown table, a row per option (docs/options.md holds it).
std::string options_markdown();
// A few lines per option, for a terminal.
std::string options_text();

}  // namespace kcl::cli
