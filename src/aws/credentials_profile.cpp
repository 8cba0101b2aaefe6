// The shared-files provider (~/.aws/credentials, ~/.aws/config) and credential_process.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "aws/credentials_internal.h"
#include "base/status_macros.h"

extern char** environ;

namespace kcl::aws::credentials_internal {
namespace {

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

class ProfileProvider final : public CredentialsProvider {
 public:
  ProfileProvider(const AwsConfig& config, EnvLookup env, std::shared_ptr<HttpTransport> transport,
                  const Clock& clock, ProfileProviderOptions options)
      : config_(config),
        env_(std::move(env)),
        transport_(std::move(transport)),
        clock_(clock),
        options_(options) {}

  Result<Credentials> get() override {
    std::string source;
    const std::string profile = resolve_profile_name(config_.profile, env_, &source);
    const SharedProfile p = load_shared_profile(profile, env_);
    const std::string where = shared_credentials_path(env_) + " or " + shared_config_path(env_);
    const std::string what = "profile " + quoted(profile);

    if (!p.found()) return profile_not_found(source, where, what);
    if (p.get("role_arn")) return assume_role(p, what);
    if (p.get("sso_session") || p.get("sso_start_url") || p.get("sso_account_id")) {
      return Status(StatusCode::kPermissionDenied,
                    what +
                        " uses AWS IAM Identity Center (sso_*), which kcl-cpp does not "
                        "support directly" +
                        export_hint(profile));
    }
    if (p.get("aws_access_key_id") || p.get("aws_secret_access_key")) {
      return static_keys(p, where, what);
    }
    if (auto command = p.get("credential_process")) {
      const std::string process_what = "credential_process of " + what;
      KCL_ASSIGN_OR_RETURN(std::string output, run_process(*command, process_what, options_));
      return parse_process_output(output, process_what);
    }
    return Status(StatusCode::kNotFound,
                  what + " has no aws_access_key_id, credential_process or role_arn");
  }

  std::string name() const override {
    return "shared files (profile " + resolve_profile_name(config_.profile, env_) + ")";
  }

 private:
  static Status profile_not_found(const std::string& source, const std::string& where,
                                  const std::string& what) {
    if (source == "default") {
      return Status(StatusCode::kNotFound, "no [default] profile in " + where);
    }
    // A profile the user asked for by name: falling through to other credentials (say,
    // an instance role) would silently act as someone else.
    return Status(StatusCode::kPermissionDenied,
                  what + " (from " + source + ") not found in " + where);
  }

  // How to use a profile kcl-cpp cannot read directly.
  static std::string export_hint(const std::string& profile) {
    return "; kcl-cpp can use it through credential_process, e.g. credential_process = aws "
           "configure export-credentials --profile " +
           profile + " --format process";
  }

  // role_arn: with web_identity_token_file through STS; through source_profile or
  // credential_source not at all.
  Result<Credentials> assume_role(const SharedProfile& p, const std::string& what) {
    auto token_file = p.get("web_identity_token_file");
    if (!token_file) {
      return Status(StatusCode::kPermissionDenied,
                    what +
                        " assumes role_arn through source_profile or credential_source, "
                        "which kcl-cpp does not support" +
                        export_hint(p.name));
    }
    if (!transport_) {
      return Status(StatusCode::kFailedPrecondition,
                    what + " uses web_identity_token_file but no HTTP transport was given");
    }
    WebIdentitySettings s;
    s.role_arn = *p.get("role_arn");
    s.token_file = *token_file;
    s.session_name = p.get("role_session_name").value_or("");
    s.source = what;
    return assume_role_with_web_identity(s, config_, env_, *transport_, clock_);
  }

  // aws_access_key_id and aws_secret_access_key (both or neither), aws_session_token.
  static Result<Credentials> static_keys(const SharedProfile& p, const std::string& where,
                                         const std::string& what) {
    auto id = p.get("aws_access_key_id");
    auto secret = p.get("aws_secret_access_key");
    if (!id || !secret) {
      return Status(StatusCode::kPermissionDenied,
                    what + " in " + where + " has " +
                        (id ? "aws_access_key_id but no aws_secret_access_key"
                            : "aws_secret_access_key but no aws_access_key_id"));
    }
    Credentials c;
    c.access_key_id = std::move(*id);
    c.secret_access_key = std::move(*secret);
    c.session_token = p.get("aws_session_token").value_or("");
    return c;
  }

  AwsConfig config_;
  EnvLookup env_;
  std::shared_ptr<HttpTransport> transport_;
  const Clock& clock_;
  ProfileProviderOptions options_;
};

// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// Starts `/bin/sh -c command` with its stdout on `stdout_fd` (stdin and stderr inherited).
Result<pid_t> spawn_shell(const std::string& command, int stdout_fd, const std::string& prefix) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 clears O_CLOEXEC on the child's stdout; every other descriptor of ours is closed.
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
  std::string arg0 = "sh", arg1 = "-c", arg2 = command;
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/bin/sh", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return Status(StatusCode::kPermissionDenied,
                  prefix + " could not be started: " + std::strerror(rc));
  }
  return pid;
}

enum class ReadEnd { kDone, kTimedOut, kTooLarge };

// Reads `fd` into `output` until EOF (the process, and anything it started, closed its
// stdout) or a read error, the deadline, or more than the output limit.
ReadEnd read_all(int fd, const ProfileProviderOptions& options,
                 std::chrono::steady_clock::time_point deadline, std::string& output) {
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return ReadEnd::kTimedOut;
    pollfd pfd{fd, POLLIN, 0};
    const int pr = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (pr < 0) {
      if (errno == EINTR) continue;
      return ReadEnd::kDone;
    }
    if (pr == 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ReadEnd::kDone;
    }
    if (n == 0) return ReadEnd::kDone;  // EOF
    if (output.size() + static_cast<std::size_t>(n) > options.max_process_output) {
      return ReadEnd::kTooLarge;
    }
    output.append(buf, static_cast<std::size_t>(n));
  }
}

// Reaps `pid`; its wait status, nullopt when waitpid fails.
std::optional<int> reap(pid_t pid) {
  int wstatus = 0;
  pid_t waited;
  do {
    waited = ::waitpid(pid, &wstatus, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited != pid) return std::nullopt;
  return wstatus;
}

struct Reaped {
  std::optional<int> wstatus;  // nullopt: waitpid failed (the status is unknown)
  bool killed = false;         // still running at the deadline, killed then
};

// Reaps `pid` once it exits by `deadline`, else kills it (SIGKILL) and reaps it: a process
// that closed its stdout and kept running (a daemon left behind, a `sleep` after the
// output) holds nothing past the timeout. Checked every few milliseconds (a child's exit
// cannot be polled for portably).
Reaped reap_by(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  std::chrono::milliseconds pause(1);
  for (;;) {
    int wstatus = 0;
    const pid_t waited = ::waitpid(pid, &wstatus, WNOHANG);
    if (waited == pid) return Reaped{wstatus, false};
    if (waited < 0 && errno != EINTR) return Reaped{std::nullopt, false};
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    if (waited == 0) {
      std::this_thread::sleep_for(
          std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  }
  ::kill(pid, SIGKILL);
  return Reaped{reap(pid), true};
}

// Why a process that was read to the end failed: a signal or a non-zero exit. A wait status
// that is unknown (waitpid failing, e.g. SIGCHLD ignored by the application) is no failure:
// the output is then judged on its own.
Status exit_failure(const std::string& prefix, std::optional<int> wstatus) {
  if (!wstatus) return Status::Ok();
  if (WIFSIGNALED(*wstatus)) {
    return Status(StatusCode::kPermissionDenied,
                  prefix + " was killed by signal " + std::to_string(WTERMSIG(*wstatus)));
  }
  if (WIFEXITED(*wstatus) && WEXITSTATUS(*wstatus) != 0) {
    std::string msg = prefix + " exited with status " + std::to_string(WEXITSTATUS(*wstatus));
    if (WEXITSTATUS(*wstatus) == 127) msg += " (command not found)";
    msg += "; its error output, if any, went to this process's stderr";
    return Status(StatusCode::kPermissionDenied, msg);
  }
  return Status::Ok();
}

}  // namespace

std::shared_ptr<CredentialsProvider> make_profile_provider(const AwsConfig& config, EnvLookup env,
                                                           std::shared_ptr<HttpTransport> transport,
                                                           const Clock& clock,
                                                           ProfileProviderOptions options) {
  return std::make_shared<ProfileProvider>(config, std::move(env), std::move(transport), clock,
                                           options);
}

Result<std::string> run_process(const std::string& command, std::string_view what,
                                const ProfileProviderOptions& options) {
  const std::string prefix(what);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return Status(StatusCode::kUnavailable,
                  prefix + " could not be started: pipe: " + std::strerror(errno));
  }
  Fd read_end{fds[0]};
  Fd write_end{fds[1]};
  Result<pid_t> pid = spawn_shell(command, write_end.fd, prefix);
  write_end.reset();
  if (!pid.ok()) return pid.status();

  // One deadline for the output and the exit.
  const auto deadline = std::chrono::steady_clock::now() + options.process_timeout;
  std::string output;
  const ReadEnd end = read_all(read_end.fd, options, deadline, output);
  read_end.reset();
  if (end != ReadEnd::kDone) ::kill(*pid, SIGKILL);
  const Reaped reaped = end == ReadEnd::kDone ? reap_by(*pid, deadline) : Reaped{reap(*pid), true};

  if (end == ReadEnd::kTimedOut) {
    return Status(StatusCode::kPermissionDenied,
                  prefix + " did not finish within " +
                      std::to_string(options.process_timeout.count()) + " ms and was killed");
  }
  if (end == ReadEnd::kTooLarge) {
    return Status(StatusCode::kPermissionDenied, prefix + " printed more than " +
                                                     std::to_string(options.max_process_output) +
                                                     " bytes and was killed");
  }
  if (reaped.killed) {
    // Its exit status, which says whether the output counts, never came.
    return Status(StatusCode::kPermissionDenied,
                  prefix + " closed its output but did not exit within " +
                      std::to_string(options.process_timeout.count()) + " ms and was killed");
  }
  KCL_RETURN_IF_ERROR(exit_failure(prefix, reaped.wstatus));
  return output;
}

}  // namespace kcl::aws::credentials_internal
