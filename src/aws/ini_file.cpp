#include "aws/ini_file.h"

#include <pwd.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "aws/text.h"

namespace kcl::aws {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

// Cuts a comment that starts with '#' or ';' preceded by whitespace (or at position 0).
std::string_view strip_inline_comment(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if ((s[i] == '#' || s[i] == ';') && (i == 0 || is_space(s[i - 1]))) return s.substr(0, i);
  }
  return s;
}

std::optional<std::string> real_getenv(std::string_view name) {
  std::string key(name);
  const char* v = std::getenv(key.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::string expand_home(const std::string& path, const EnvLookup& env) {
  if (path == "~" || path.rfind("~/", 0) == 0) {
    std::string home = home_directory(env);
    if (!home.empty()) return home + path.substr(1);
  }
  return path;
}

}  // namespace

EnvLookup process_env() { return &real_getenv; }

IniFile IniFile::parse(std::string_view text) {
  IniFile file;
  IniSection* current = nullptr;
  std::string current_key;  // the last key read in `current`: indented lines continue it
  std::string parent_key;   // key with an empty value: indented lines below are sub-properties
  while (!text.empty()) {
    std::size_t eol = text.find('\n');
    std::string_view raw = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);

    const bool indented = !raw.empty() && is_space(raw.front()) && raw.front() != '\r';
    std::string_view line = trim(raw);
    if (line.empty()) continue;
    if (indented && current != nullptr && !current_key.empty() && parent_key.empty()) {
      // A continuation of the value above, kept with a line break as the Java SDK v2 does
      // (comment characters included: they are part of the value).
      (*current)[current_key] += "\n" + std::string(line);
      continue;
    }
    if (line.front() == '#' || line.front() == ';') continue;

    if (line.front() == '[') {
      parent_key.clear();
      current_key.clear();
      // A section line's comment needs no whitespace before it: "[default]#note".
      const std::size_t comment = line.find_first_of("#;");
      if (comment != std::string_view::npos) line = trim(line.substr(0, comment));
      if (line.size() < 2 || line.back() != ']') {
        current = nullptr;  // a broken header: ignore its properties too
        continue;
      }
      std::string name(trim(line.substr(1, line.size() - 2)));
      current = &file.sections_[name];
      continue;
    }
    if (current == nullptr) continue;

    std::size_t eq = line.find_first_of("=:");
    if (eq == std::string_view::npos || eq == 0) continue;
    std::string key = to_lower(trim(line.substr(0, eq)));
    std::string value(trim(strip_inline_comment(line.substr(eq + 1))));

    if (indented && !parent_key.empty()) {
      (*current)[parent_key + "." + key] = std::move(value);  // a later one wins
      continue;
    }
    // A key given again (in the same section or a repeated one) takes the later value, as
    // the SDKs do.
    parent_key = value.empty() ? key : std::string();
    current_key = key;
    (*current)[std::move(key)] = std::move(value);
  }
  return file;
}

const IniSection* IniFile::section(std::string_view name) const {
  auto it = sections_.find(name);
  return it == sections_.end() ? nullptr : &it->second;
}

std::optional<std::string> env_value(const EnvLookup& env, std::string_view name) {
  if (!env) return std::nullopt;
  auto v = env(name);
  if (!v || v->empty()) return std::nullopt;
  return v;
}

std::string home_directory(const EnvLookup& env) {
  if (auto home = env_value(env, "HOME")) return *home;
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<std::size_t>(size) : 16384u);
  struct passwd pw {};
  struct passwd* result = nullptr;
  if (getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &result) == 0 && result != nullptr &&
      result->pw_dir != nullptr) {
    return result->pw_dir;
  }
  return {};
}

std::string shared_credentials_path(const EnvLookup& env) {
  if (auto p = env_value(env, "AWS_SHARED_CREDENTIALS_FILE")) return expand_home(*p, env);
  return expand_home("~/.aws/credentials", env);
}

std::string shared_config_path(const EnvLookup& env) {
  if (auto p = env_value(env, "AWS_CONFIG_FILE")) return expand_home(*p, env);
  return expand_home("~/.aws/config", env);
}

std::string resolve_profile_name(std::string_view configured, const EnvLookup& env,
                                 std::string* source) {
  if (!configured.empty()) {
    if (source) *source = "configuration";
    return std::string(configured);
  }
  if (auto p = env_value(env, "AWS_PROFILE")) {
    if (source) *source = "AWS_PROFILE";
    return *p;
  }
  if (source) *source = "default";
  return "default";
}

std::optional<std::string> SharedProfile::get(std::string_view key) const {
  auto it = properties.find(key);
  if (it == properties.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

SharedProfile load_shared_profile(std::string_view profile, const EnvLookup& env) {
  SharedProfile out;
  out.name = std::string(profile);

  if (auto text = read_text_file(shared_credentials_path(env))) {
    IniFile creds = IniFile::parse(*text);
    if (const IniSection* s = creds.section(profile)) {
      out.in_credentials_file = true;
      out.properties = *s;
    }
  }
  if (auto text = read_text_file(shared_config_path(env))) {
    IniFile config = IniFile::parse(*text);
    // "[profile NAME]" wins over "[default]", the default profile's classic spelling.
    const IniSection* named = nullptr;
    const IniSection* classic = nullptr;
    for (const auto& [name, section] : config.sections()) {
      std::string_view n = name;
      if (n.rfind("profile", 0) == 0 && n.size() > 7 && is_space(n[7])) {
        if (trim(n.substr(7)) == profile && named == nullptr) named = &section;
      } else if (profile == "default" && n == "default") {
        classic = &section;
      }
    }
    for (const IniSection* s : {named, classic}) {
      if (s == nullptr) continue;
      out.in_config_file = true;
      for (const auto& [k, v] : *s) out.properties.emplace(k, v);  // existing keys win
    }
  }
  return out;
}

std::optional<std::string> read_text_file(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

}  // namespace kcl::aws
