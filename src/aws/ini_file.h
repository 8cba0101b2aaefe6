// The AWS shared files (~/.aws/credentials and ~/.aws/config): a small INI parser and the
// rules for finding a profile in them, as the AWS CLI and SDKs read them.
//
// Format handled: `[section]` headers (spaces inside the brackets are trimmed; a `#` or `;`
// starts a comment anywhere after the header, "[default]#note"), `key = value` or
// `key: value` lines (key names compared case-insensitively, stored lower-case), whole-line
// comments starting with `#` or `;`, inline comments (`#` or `;` preceded by whitespace) on
// values, continuation lines (an indented line after `key = value` is appended to the value
// after a "\n", comment characters included) and nested sub-properties (an indented
// `name = value` following `key =` with an empty value), which are kept as "key.name".
// Lines that do not parse are ignored. A section given again is merged into the first; a
// key given again takes the later value (as the AWS SDKs and CLI read the files).
//
// In the config file a profile NAME lives in `[profile NAME]` (`[default]` and
// `[profile default]` both name the default profile); in the credentials file it is
// `[NAME]`. When a profile appears in both files their properties are merged and the
// credentials file wins for a key found in both.
//
// Thread safety: plain values and free functions; no shared state.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kcl::aws {

// Looks up an environment variable; nullopt when unset. Empty values count as unset by the
// callers that care. The real one reads the process environment; tests pass their own.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
EnvLookup process_env();

using IniSection = std::map<std::string, std::string, std::less<>>;  // key (lower-case) -> value

class IniFile {
 public:
  static IniFile parse(std::string_view text);

  // nullptr when the section does not exist.
  const IniSection* section(std::string_view name) const;
  const std::map<std::string, IniSection, std::less<>>& sections() const { return sections_; }

 private:
  std::map<std::string, IniSection, std::less<>> sections_;
};

// The value of `name` in `env`, treating an empty value as unset.
std::optional<std::string> env_value(const EnvLookup& env, std::string_view name);

// The user's home directory: HOME, else the password database; empty when unknown.
std::string home_directory(const EnvLookup& env);

// AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials (a leading "~/" is expanded).
std::string shared_credentials_path(const EnvLookup& env);
// AWS_CONFIG_FILE, else ~/.aws/config.
std::string shared_config_path(const EnvLookup& env);

// The profile to use: `configured` when non-empty, else AWS_PROFILE, else "default".
// `source` (when not null) is set to where the name came from: "configuration",
// "AWS_PROFILE" or "default".
std::string resolve_profile_name(std::string_view configured, const EnvLookup& env,
                                 std::string* source = nullptr);

struct SharedProfile {
  std::string name;
  IniSection properties;  // merged: credentials file over config file
  bool in_credentials_file = false;
  bool in_config_file = false;
  bool found() const { return in_credentials_file || in_config_file; }
  // The value of a property, nullopt when absent or empty.
  std::optional<std::string> get(std::string_view key) const;
};

// Reads both shared files (a missing file counts as empty) and returns the merged profile.
SharedProfile load_shared_profile(std::string_view profile, const EnvLookup& env);

// Reads a whole file; nullopt when it cannot be opened.
std::optional<std::string> read_text_file(const std::string& path);

}  // namespace kcl::aws
