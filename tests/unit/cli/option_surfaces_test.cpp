// Every surface offers every worker option (the table of include/kcl/worker_options.h): the
// Python package's keywords, the `kcl consume` command line (its flags and --option) and the
// MultiLangDaemon properties (the Java keys and the options' names); and every flag or key a
// surface has is an option of the table or one of its own, listed below with the reason. A
// surface that lacks an option another has fails here, unless the gap is listed below as
// deliberate, with its reason. docs/options.md must hold the table as `kcl options
// --markdown` prints it.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "kcl/worker_options.h"
#include "multilang/properties.h"
#include "options_text.h"
#include "support/command_output.h"

namespace kcl::cli {
namespace {

struct Deliberate {
  std::string_view surface;  // "python", "cli" or "multilang"
  std::string_view name;     // an option of the table, or a flag / key of the surface
  std::string_view reason;
};

constexpr std::string_view kSecretOnCommandLine =
    "a secret on a command line is visible to every user of the host (ps); kcl takes "
    "credentials from the environment, the profile files and the rest of the standard chain";
constexpr std::string_view kSecretInProperties =
    "a properties file is shared and kept in version control; the daemon takes credentials "
    "from the standard chain, named by AwsCredentialsProvider as in the Java daemon";

// Options of the table a surface does not offer, on purpose.
constexpr Deliberate kLacks[] = {
    {"python", "dead_letter_stream",
     "a stream sink needs a producer that the worker would own; a Python application uses "
     "dead_letter_file, or puts poison records with its own kcl.Producer"},
    {"cli", "access_key_id", kSecretOnCommandLine},
    {"cli", "secret_access_key", kSecretOnCommandLine},
    {"cli", "session_token", kSecretOnCommandLine},
    {"multilang", "access_key_id", kSecretInProperties},
    {"multilang", "secret_access_key", kSecretInProperties},
    {"multilang", "session_token", kSecretInProperties},
};

// Flags and keys of a surface that are no option of the table, on purpose.
constexpr Deliberate kOwn[] = {
    {"cli", "--help", "CLI11's"},
    {"cli", "--option", "sets any option of the table (NAME=VALUE)"},
    {"cli", "--streams-file", "a stream tracker that reads a file (stream_tracker is code)"},
    {"cli", "--max", "the printing processor's: stop after N records"},
    {"cli", "--raw", "the printing processor's output format"},
    {"cli", "--checkpoint-interval", "the printing processor's checkpoint cadence"},
    {"cli", "--reject-matching", "the printing processor's: fail records that match"},
    {"cli", "--hold-while-exists", "the printing processor's: a stuck processor, on purpose"},
    {"cli", "--log-format", "the process's logging, not the worker's"},
    {"multilang", "executableName", "the child process's command line"},
    {"multilang", "timeoutInSeconds", "how long the child may take to answer one message"},
    {"multilang", "streamArn", "the stream (and its region) named by ARN, as the Java daemon"},
    {"multilang", "initialPositionInStreamExtended",
     "the AT_TIMESTAMP time of initialPositionInStream"},
    {"multilang", "processingLanguage", "the Java daemon's; understood, of no use here"},
    {"multilang", "callProcessRecordsEvenForEmptyRecordList",
     "a Java switch for behaviour kcl-cpp fixes (a warning when set the other way)"},
    {"multilang", "cleanupLeasesUponShardCompletion",
     "a Java switch for behaviour kcl-cpp fixes (a warning when set the other way)"},
    {"multilang", "AwsCredentialsProvider", "the Java daemon's credentials provider names"},
    {"multilang", "AWSCredentialsProvider", "the Java daemon's credentials provider names"},
    {"multilang", "AwsCredentialsProviderDynamoDB", "the Java daemon's credentials provider names"},
    {"multilang", "AwsCredentialsProviderCloudWatch",
     "the Java daemon's credentials provider names"},
};

bool listed(std::span<const Deliberate> list, std::string_view surface, std::string_view name) {
  for (const Deliberate& d : list) {
    if (d.surface == surface && d.name == name) return true;
  }
  return false;
}

// The flags ("--stream") a `kcl consume` command line accepts, its own and the global ones.
std::set<std::string> consume_flags() {
  CLI::App app;
  GlobalOptions global;
  global.add_to(app);
  int exit_code = 0;
  add_consume_command(app, global, exit_code);
  std::set<std::string> flags;
  for (CLI::App* cmd : {&app, app.get_subcommand("consume")}) {
    for (const CLI::Option* o : cmd->get_options()) {
      for (const std::string& name : o->get_lnames()) flags.insert("--" + name);
    }
  }
  return flags;
}

// The flags a table entry's `cli` text names ("--stream (repeated)" -> {"--stream"}).
std::vector<std::string> flags_named(std::string_view text) {
  std::vector<std::string> out;
  for (std::size_t at = text.find("--"); at != std::string_view::npos;
       at = text.find("--", at + 2)) {
    std::size_t end = at + 2;
    while (end < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[end])) != 0 || text[end] == '-')) {
      ++end;
    }
    out.emplace_back(text.substr(at, end - at));
    at = end - 2;
  }
  return out;
}

TEST(OptionSurfaces, TheCommandLineOffersEveryOption) {
  const std::set<std::string> flags = consume_flags();
  ASSERT_TRUE(flags.count("--option")) << "kcl consume has no --option NAME=VALUE";
  std::set<std::string> claimed;
  for (const WorkerOption& o : worker_options()) {
    for (const std::string& flag : flags_named(o.cli)) {
      claimed.insert(flag);
      EXPECT_TRUE(flags.count(flag)) << "option " << o.name << ": the table names flag " << flag
                                     << ", which kcl consume does not have";
    }
    const bool offered = o.kind != OptionKind::kSpecial || !o.cli.empty();
    EXPECT_EQ(offered, !listed(kLacks, "cli", o.name))
        << "option " << o.name
        << (offered ? " is offered by kcl consume but listed as lacking"
                    : " is special and has no flag of kcl consume (give it one, or list the "
                      "gap in kLacks with its reason)");
  }
  for (const std::string& flag : flags) {
    EXPECT_TRUE(claimed.count(flag) || listed(kOwn, "cli", flag))
        << "kcl consume " << flag << " sets no option of the table (include/kcl/worker_options.h): "
        << "name it in the option's `cli`, or list it in kOwn with its reason";
  }
}

// A value of the option's type that differs from its default, as text (`java`: the Java
// key's form, where durations are whole milliseconds).
std::string sample(const WorkerOption& o, bool java) {
  const bool has_lo = o.lo_note.empty() && o.lo > -kUnbounded;
  const long long n = has_lo ? static_cast<long long>(o.lo) + 1 : 7;
  switch (o.kind) {
    case OptionKind::kDuration:
      return std::to_string(n) + (java ? "" : "ms");
    case OptionKind::kInteger:
      return std::to_string(n);
    case OptionKind::kNumber:
      return "0.25";
    case OptionKind::kBool:
      return option_default_text(o) == "true" ? "false" : "true";
    case OptionKind::kText:
      return "sample-text";
    case OptionKind::kChoice: {
      const std::string first(o.choices.substr(0, o.choices.find('|')));
      const std::size_t bar = o.choices.find('|');
      const std::string second(o.choices.substr(bar + 1, o.choices.find('|', bar + 1) - bar - 1));
      return option_default_text(o) == first ? second : first;
    }
    case OptionKind::kSpecial:
      return "";
  }
  return "";
}

// The worker a properties file with the required keys and `key = value` makes.
Result<multilang::MultiLangSettings> with_key(const std::string& key, const std::string& value) {
  std::map<std::string, std::string> p = {{"executableName", "python3 child.py"},
                                          {"streamName", "orders"},
                                          {"applicationName", "surfaces"}};
  p[key] = value;
  return multilang::settings_from_properties(p);
}

// Each option set through the properties (by its name, and by its Java key if it has one)
// ends up in the worker's configuration.
TEST(OptionSurfaces, ThePropertiesOfferEveryOption) {
  const std::vector<std::string> known = multilang::known_property_keys();
  const std::set<std::string> keys(known.begin(), known.end());
  std::set<std::string> claimed;
  for (const WorkerOption& o : worker_options()) {
    bool offered = false;
    if (o.kind != OptionKind::kSpecial) {
      WorkerConfig expected;
      ASSERT_TRUE(set_worker_option(expected, o.name, sample(o, false)).ok()) << o.name;
      auto by_name = with_key(std::string(o.name), sample(o, false));
      ASSERT_TRUE(by_name.ok()) << o.name << ": " << by_name.status();
      EXPECT_EQ(option_value_text(o, by_name->worker), option_value_text(o, expected))
          << "properties key " << o.name << " does not set the option";
      EXPECT_TRUE(by_name->ignored_keys.empty()) << o.name << " is listed as ignored";
      offered = true;
    }
    if (!o.property.empty() && o.property.find(',') == std::string_view::npos) {
      claimed.insert(std::string(o.property));
      EXPECT_TRUE(keys.count(std::string(o.property)))
          << "option " << o.name << ": the table names key " << o.property
          << ", which the properties reader does not read";
      offered = true;
    }
    EXPECT_EQ(offered, !listed(kLacks, "multilang", o.name))
        << "option " << o.name
        << (offered ? " is offered but listed as lacking" : " is not offered");
  }
  for (const std::string& key : keys) {
    EXPECT_TRUE(claimed.count(key) || listed(kOwn, "multilang", key))
        << "properties key " << key << " sets no option of the table: name it in the option's "
        << "`property`, or list it in kOwn with its reason";
  }
}

// The Java keys set their options too, in the Java daemon's units.
TEST(OptionSurfaces, TheJavaKeysSetTheirOptions) {
  int checked = 0;
  for (const WorkerOption& o : worker_options()) {
    const bool plain = o.kind == OptionKind::kText || o.kind == OptionKind::kInteger ||
                       o.kind == OptionKind::kDuration;
    if (o.property.empty() || !plain) continue;
    WorkerConfig expected;
    ASSERT_TRUE(set_worker_option(expected, o.name, sample(o, false)).ok()) << o.name;
    auto by_key = with_key(std::string(o.property), sample(o, true));
    ASSERT_TRUE(by_key.ok()) << o.property << ": " << by_key.status();
    EXPECT_EQ(option_value_text(o, by_key->worker), option_value_text(o, expected))
        << "Java key " << o.property << " does not set option " << o.name;
    ++checked;
  }
  EXPECT_GE(checked, 15);
}

using kcl::testing::command_output;

TEST(OptionSurfaces, ThePythonPackageOffersEveryOption) {
#ifndef KCL_PYTHON_PACKAGE_DIR
  GTEST_SKIP() << "this build has no Python package (KCL_BUILD_PYTHON is OFF)";
#else
  int status = 0;
  const std::string out = command_output(
      std::string("cd / && PYTHONPATH='") + KCL_PYTHON_PACKAGE_DIR + "' '" + KCL_PYTHON_EXECUTABLE +
          "' -c 'import kcl; print(\"\\n\".join(kcl.worker_options()))'",
      &status);
  ASSERT_EQ(status, 0) << out;
  std::set<std::string> python;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) python.insert(line);
  for (const WorkerOption& o : worker_options()) {
    const bool offered = python.erase(std::string(o.name)) > 0;
    EXPECT_EQ(offered, !listed(kLacks, "python", o.name))
        << "option " << o.name
        << (offered ? " is a keyword of kcl.Worker but listed as lacking"
                    : " is no keyword of kcl.Worker (python/src/options.cpp; or list the gap "
                      "in kLacks with its reason)");
  }
  for (const std::string& extra : python) {
    EXPECT_TRUE(listed(kOwn, "python", extra))
        << "kcl.Worker keyword " << extra << " is no option of the table";
  }
#endif
}

TEST(OptionSurfaces, DocsOptionsMdHoldsTheTable) {
  const std::string path = std::string(KCL_SOURCE_DIR) + "/docs/options.md";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find(options_markdown()), std::string::npos)
      << path << " does not hold the table as `kcl options --markdown` prints it; print it "
      << "there again. The table now:\n"
      << options_markdown();
}

}  // namespace
}  // namespace kcl::cli
