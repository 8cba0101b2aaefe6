// Helpers for the AWS wire-core tests: environment save/restore, temp files, fixed
// credentials and a scripted transport.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aws/credentials.h"
#include "aws/http_transport.h"
#include "aws/ini_file.h"

namespace kcl::aws::test {

// Saves the named environment variables, and restores them when destroyed.
class ScopedEnv {
 public:
  // The AWS variables that steer region, profile and endpoint resolution.
  static std::vector<std::string> aws_names() {
    return {"AWS_REGION",
            "AWS_DEFAULT_REGION",
            "AWS_PROFILE",
            "AWS_CONFIG_FILE",
            "AWS_SHARED_CREDENTIALS_FILE",
            "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_KINESIS",
            "AWS_ENDPOINT_URL_DYNAMODB",
            "AWS_ENDPOINT_URL_STS"};
  }
  // Saves every variable of `names` and unsets them all.
  explicit ScopedEnv(std::vector<std::string> names = aws_names()) {
    for (auto& n : names) {
      const char* v = std::getenv(n.c_str());
      saved_.emplace_back(n, v ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(n.c_str());
    }
  }
  ~ScopedEnv() {
    for (const auto& [n, v] : saved_) {
      if (v) {
        ::setenv(n.c_str(), v->c_str(), 1);
      } else {
        ::unsetenv(n.c_str());
      }
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

  void set(const std::string& name, const std::string& value) {
    remember(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string& name) {
    remember(name);
    ::unsetenv(name.c_str());
  }

 private:
  void remember(const std::string& name) {
    for (const auto& [n, v] : saved_) {
      if (n == name) return;
    }
    const char* v = std::getenv(name.c_str());
    saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// A directory removed (with its contents) when destroyed.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kcl-aws-test-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    path_ = p ? std::filesystem::path(p) : std::filesystem::path();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  // Writes `text` to `name` (a path relative to the directory; parents are created).
  std::string write(const std::string& name, const std::string& text) const {
    auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

// An environment as a map, for providers that take an EnvLookup (the process environment is
// untouched).
class FakeEnv {
 public:
  std::map<std::string, std::string> vars;
  EnvLookup lookup() {
    return [this](std::string_view n) -> std::optional<std::string> {
      auto it = vars.find(std::string(n));
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  }
};

// Fake keys in AWS's documented example format; tests assert they never leak.
inline constexpr const char* kAccessKey = "AKIDEXAMPLEFAKE0001";
inline constexpr const char* kSecretKey = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYFAKESECRET";
inline constexpr const char* kSessionToken = "FQoGZXIvYXdzEFAKE-SESSION-TOKEN-1234567890abcdef";

class FixedCredentials final : public CredentialsProvider {
 public:
  explicit FixedCredentials(bool with_token = true) {
    creds_.access_key_id = kAccessKey;
    creds_.secret_access_key = kSecretKey;
    if (with_token) creds_.session_token = kSessionToken;
  }
  Result<Credentials> get() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    if (!fail_.ok()) return fail_;
    return creds_;
  }
  std::string name() const override { return "fixed-test"; }
  void fail_with(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_ = std::move(s);
  }
  int calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  void reject(const Credentials& used) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (used.access_key_id == creds_.access_key_id) ++rejected_;
  }
  int rejected() const {
    std::lock_guard<std::mutex> lock(mu_);
    return rejected_;
  }

 private:
  mutable std::mutex mu_;
  Credentials creds_;
  Status fail_;
  int calls_ = 0;
  int rejected_ = 0;
};

// A transport that answers from a script and records what it was sent.
class ScriptedTransport final : public HttpTransport {
 public:
  using Step = std::function<Result<HttpResponse>(const HttpRequest&)>;
  void push(Step step) {
    std::lock_guard<std::mutex> lock(mu_);
    steps_.push_back(std::move(step));
  }
  void push_response(int status, std::string body, Headers headers = {}) {
    push([=](const HttpRequest&) -> Result<HttpResponse> {
      HttpResponse r;
      r.status = status;
      r.body = body;
      r.headers = headers;
      return r;
    });
  }
  void push_error(Status s) {
    push([=](const HttpRequest&) -> Result<HttpResponse> { return s; });
  }
  Result<HttpResponse> send(const HttpRequest& request) override {
    Step step;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sent_.push_back(request);
      if (steps_.empty()) return Status(StatusCode::kInternal, "script exhausted");
      step = std::move(steps_.front());
      steps_.pop_front();
    }
    return step(request);
  }
  std::vector<HttpRequest> sent() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }

 private:
  mutable std::mutex mu_;
  std::deque<Step> steps_;
  std::vector<HttpRequest> sent_;
};

inline bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace kcl::aws::test
