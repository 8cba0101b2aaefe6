// A program run by a test as a user runs it: its stdout to a file, a small environment with
// the emulators' endpoints and fake credentials, stopped with a signal; and a wait on a
// condition with a deadline.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kcl/aws_config.h"
#include "kcl/status.h"
#include "support/eventually.h"

namespace kcl::testing {

// The environment that points a program at the emulators (AWS_ENDPOINT_URL_KINESIS, ...).
inline std::vector<std::string> emulator_environment(const AwsConfig& aws) {
  return {"AWS_REGION=us-east-1",
          "AWS_ACCESS_KEY_ID=" + aws.credentials->access_key_id,
          "AWS_SECRET_ACCESS_KEY=" + aws.credentials->secret_access_key,
          "AWS_ENDPOINT_URL_KINESIS=" + aws.kinesis_endpoint_url,
          "AWS_ENDPOINT_URL_DYNAMODB=" + aws.dynamodb_endpoint_url,
          "PATH=/usr/bin:/bin"};
}

// The lines of a file some process may still be writing, each ended by its newline. A last
// line without one is still being written (a child's stdout flushes at buffer boundaries,
// mid-line) and is left for a later read.
inline std::vector<std::string> finished_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) {
    if (in.eof()) break;  // no newline after it
    out.push_back(l);
  }
  return out;
}

class ChildProcess {
 public:
  // Starts argv[0] (a path) with `env`; its stdout goes to `stdout_path`, its stderr to
  // `stderr_path` (empty: the test's); with `pipe_stdin`, its stdin is a pipe the test writes
  // (write_stdin), else the test's. started() tells whether it ran.
  ChildProcess(std::vector<std::string> argv_s, std::vector<std::string> env_s,
               std::string stdout_path, const std::string& stderr_path = "",
               bool pipe_stdin = false, bool own_group = false)
      : out_path_(std::move(stdout_path)) {
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int in[2] = {-1, -1};
    if (pipe_stdin && ::pipe2(in, O_CLOEXEC) == 0) {
      posix_spawn_file_actions_adddup2(&fa, in[0], 0);  // clears O_CLOEXEC on the child's 0
    }
    posix_spawn_file_actions_addopen(&fa, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!stderr_path.empty()) {
      posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
    }
    // own_group: a process group of its own, as a shell gives a command (signal_group()).
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    if (own_group) {
      posix_spawnattr_setpgroup(&attr, 0);
      posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    }
    const int rc = posix_spawn(&pid_, argv[0], &fa, &attr, argv.data(), envp.data());
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) pid_ = -1;
    if (in[0] >= 0) ::close(in[0]);
    stdin_ = in[1];
  }
  ChildProcess(ChildProcess&& o) noexcept
      : out_path_(std::move(o.out_path_)),
        pid_(std::exchange(o.pid_, -1)),
        stdin_(std::exchange(o.stdin_, -1)) {}
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    close_stdin();
    kill_now();
  }

  // With pipe_stdin: writes `text` to the child's stdin (all of it, or false).
  bool write_stdin(const std::string& text) {
    std::size_t at = 0;
    while (stdin_ >= 0 && at < text.size()) {
      const ssize_t n = ::write(stdin_, text.data() + at, text.size() - at);
      if (n <= 0) return false;
      at += static_cast<std::size_t>(n);
    }
    return stdin_ >= 0;
  }
  // Bytes written to the child's stdin that it has not read yet.
  int stdin_unread() const {
    int n = 0;
    if (stdin_ < 0 || ::ioctl(stdin_, FIONREAD, &n) != 0) return -1;
    return n;
  }
  // The end of the child's input.
  void close_stdin() {
    if (stdin_ >= 0) ::close(stdin_);
    stdin_ = -1;
  }

  bool started() const { return pid_ > 0; }
  // SIGTERM (graceful stop) and the exit status.
  int stop() {
    if (pid_ > 0) kill(pid_, SIGTERM);
    return wait();
  }
  // Sends `signal` (e.g. SIGHUP) to the running process.
  void signal(int signal) const {
    if (pid_ > 0) kill(pid_, signal);
  }
  // To its whole process group (started with own_group): what a Ctrl-C on a terminal sends.
  void signal_group(int signal) const {
    if (pid_ > 0) kill(-pid_, signal);
  }
  // SIGKILL: no chance to clean up (a crash).
  void kill_now() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  // The exit status (128 + signal when killed by one).
  int wait() {
    if (pid_ <= 0) return -1;
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  // The exit status once it has exited (128 + signal when killed by one); empty while it runs.
  std::optional<int> exit_status() {
    if (pid_ <= 0) return exited_;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
    pid_ = -1;
    exited_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exited_;
  }
  // The lines of stdout finished so far (finished_lines).
  std::vector<std::string> lines() const { return finished_lines(out_path_); }

 private:
  std::string out_path_;
  pid_t pid_ = -1;
  int stdin_ = -1;  // the write end of the child's stdin (pipe_stdin)
  std::optional<int> exited_;
};

// A Node script that prints {"port": P} on its first line of stdout (the tests' scripted
// servers), started with `node` from PATH; its port once it listens.
struct NodeServer {
  std::unique_ptr<ChildProcess> process;
  int port = 0;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

// Errors: the server did not print its port within 30 s.
inline Result<NodeServer> start_node_server(const std::string& script,
                                            const std::vector<std::string>& args,
                                            const std::string& stdout_path) {
  std::vector<std::string> argv = {"/usr/bin/env", "node", script};
  argv.insert(argv.end(), args.begin(), args.end());
  const char* path = std::getenv("PATH");
  NodeServer s;
  s.process = std::make_unique<ChildProcess>(
      argv, std::vector<std::string>{std::string("PATH=") + (path ? path : "/usr/bin:/bin")},
      stdout_path);
  if (!s.process->started()) {
    return Status(StatusCode::kFailedPrecondition, "could not start node " + script);
  }
  const bool up = eventually(
      [&] {
        const auto lines = s.process->lines();
        if (lines.empty()) return false;
        const std::size_t at = lines.front().find("\"port\":");
        if (at == std::string::npos) return false;
        s.port = std::atoi(lines.front().c_str() + at + 7);
        return s.port > 0;
      },
      std::chrono::seconds(30));
  if (!up) return Status(StatusCode::kDeadlineExceeded, script + " did not print its port");
  return s;
}

}  // namespace kcl::testing
