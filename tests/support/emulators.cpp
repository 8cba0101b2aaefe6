#include "support/emulators.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "base/status_macros.h"

extern char** environ;

#ifndef KCL_SOURCE_DIR
#error "KCL_SOURCE_DIR must be defined (tests/CMakeLists.txt sets it for test support)"
#endif

namespace kcl::testing {
namespace {

using Clock = std::chrono::steady_clock;

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string find_node() {
  if (const char* n = std::getenv("KCL_NODE"); n != nullptr && *n != '\0') return n;
  const char* path = std::getenv("PATH");
  std::string_view rest = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (!rest.empty()) {
    auto colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/node";
    if (is_file(candidate) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

std::string errno_text(int err) { return std::strerror(err); }

int port_of(const std::string& url) {
  auto colon = url.rfind(':');
  if (colon == std::string::npos) return 0;
  return std::atoi(url.c_str() + colon + 1);
}

bool port_answers(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped (status " + std::to_string(status) + ")";
}

// Waits for `pid` up to `timeout`; true when reaped.
bool wait_for_exit(pid_t pid, std::chrono::milliseconds timeout, int* status_out = nullptr) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) {
      if (status_out != nullptr) *status_out = status;
      return true;
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

std::string node_modules_dir() {
  if (const char* d = std::getenv("KCL_NODE_MODULES"); d != nullptr && *d != '\0') return d;
  return std::string(KCL_SOURCE_DIR) + "/node_modules";
}

Result<std::unique_ptr<Emulators>> Emulators::start(bool kinesis, bool dynamodb) {
  Options o;
  o.kinesis = kinesis;
  o.dynamodb = dynamodb;
  return start(o);
}

Result<std::unique_ptr<Emulators>> Emulators::start(const Options& options) {
  if (!options.kinesis && !options.dynamodb) {
    return Status(StatusCode::kInvalidArgument, "Emulators::start: nothing to start");
  }
  std::unique_ptr<Emulators> e(new Emulators(options));
  std::lock_guard lock(e->mu_);
  KCL_RETURN_IF_ERROR(e->launch(0, 0));
  return e;
}

Status Emulators::launch(int kinesis_port, int dynamodb_port) {
  const std::string node = find_node();
  if (node.empty()) {
    return Status(StatusCode::kFailedPrecondition,
                  "Emulators: `node` not found on PATH (set KCL_NODE to its path)");
  }
  const std::string modules = node_modules_dir();
  if (!is_dir(modules + "/kinesalite") || !is_dir(modules + "/dynalite")) {
    return Status(StatusCode::kFailedPrecondition,
                  "Emulators: kinesalite/dynalite not found in " + modules +
                      " (run scripts/install-deps.sh or set KCL_NODE_MODULES)");
  }
  const std::string script = std::string(KCL_SOURCE_DIR) + "/tools/emulators/serve.js";
  if (!is_file(script)) {
    return Status(StatusCode::kFailedPrecondition, "Emulators: missing " + script);
  }

  // Everything the child needs is built before fork(): after it, only async-signal-safe calls.
  std::vector<std::string> args = {node, script};
  if (options_.kinesis) {
    args.emplace_back("--kinesis");
    if (kinesis_port > 0) {
      args.emplace_back("--kinesis-port");
      args.push_back(std::to_string(kinesis_port));
    }
  }
  if (options_.dynamodb) {
    args.emplace_back("--dynamodb");
    if (dynamodb_port > 0) {
      args.emplace_back("--dynamodb-port");
      args.push_back(std::to_string(dynamodb_port));
    }
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_strings;
  for (char** p = environ; p != nullptr && *p != nullptr; ++p) {
    std::string_view kv(*p);
    if (kv.starts_with("KCL_NODE_MODULES=")) continue;
    env_strings.emplace_back(kv);
  }
  env_strings.push_back("KCL_NODE_MODULES=" + modules);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  int in_pipe[2];
  int out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) {
    return Status(StatusCode::kInternal, "Emulators: pipe2: " + errno_text(errno));
  }
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(in_pipe[0]);
    ::close(in_pipe[1]);
    return Status(StatusCode::kInternal, "Emulators: pipe2: " + errno_text(err));
  }

  const pid_t parent = ::getpid();
  // PR_SET_PDEATHSIG fires when the forking *thread* exits; only arm it from the main thread.
  const bool arm_pdeathsig = static_cast<pid_t>(::syscall(SYS_gettid)) == parent;

  const pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) ::close(fd);
    return Status(StatusCode::kInternal, "Emulators: fork: " + errno_text(err));
  }
  if (pid == 0) {
    // Child.
    if (arm_pdeathsig) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent already died
    }
    // Signals blocked/ignored by the test process must not leak into node.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    if (::dup2(in_pipe[0], STDIN_FILENO) < 0) ::_exit(126);
    if (::dup2(out_pipe[1], STDOUT_FILENO) < 0) ::_exit(126);
    // Any descriptor the test process opened without CLOEXEC stays out of node.
    ::syscall(SYS_close_range, 3u, ~0u, 0u);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }

  // Parent.
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  pid_ = pid;
  stdin_fd_ = in_pipe[1];
  const int out_fd = out_pipe[0];

  auto fail = [&](StatusCode code, std::string msg) {
    ::close(out_fd);
    int status = 0;
    bool exited = wait_for_exit(pid_, std::chrono::milliseconds(0), &status);
    if (exited) pid_ = -1;
    stop_locked();
    if (exited) msg += " (node " + describe_wait_status(status) + ")";
    return Status(code, "Emulators: " + msg + "; command: " + node + " " + script);
  };

  // Read the ready line.
  const auto deadline = Clock::now() + options_.ready_timeout;
  std::string line;
  for (;;) {
    auto nl = line.find('\n');
    if (nl != std::string::npos) {
      line.resize(nl);
      break;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return fail(StatusCode::kDeadlineExceeded,
                  "no ready line within " + std::to_string(options_.ready_timeout.count()) + " ms");
    }
    pollfd pfd{out_fd, POLLIN, 0};
    int pr = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (pr < 0) {
      if (errno == EINTR) continue;
      return fail(StatusCode::kInternal, "poll: " + errno_text(errno));
    }
    if (pr == 0) continue;
    char buf[512];
    ssize_t n = ::read(out_fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return fail(StatusCode::kInternal, "read: " + errno_text(errno));
    }
    if (n == 0) {
      // EOF before the line: node died. Give it a moment to be reaped for the status.
      int status = 0;
      std::string how = wait_for_exit(pid_, std::chrono::milliseconds(2000), &status)
                            ? describe_wait_status(status)
                            : "closed its stdout";
      pid_ = -1;
      ::close(out_fd);
      stop_locked();
      return Status(StatusCode::kFailedPrecondition, "Emulators: node " + how +
                                                         " before it was ready; command: " + node +
                                                         " " + script + " (its stderr is above)");
    }
    line.append(buf, static_cast<std::size_t>(n));
    if (line.size() > 64 * 1024) return fail(StatusCode::kInternal, "ready line too long");
  }
  // serve.js writes nothing else; closing our end makes any later write fail with EPIPE,
  // which it ignores, instead of blocking on a full pipe.
  ::close(out_fd);

  try {
    auto j = nlohmann::json::parse(line);
    if (options_.kinesis) kinesis_url_ = j.at("kinesis").get<std::string>();
    if (options_.dynamodb) dynamodb_url_ = j.at("dynamodb").get<std::string>();
  } catch (const std::exception& ex) {
    kinesis_url_.clear();
    dynamodb_url_.clear();
    stop_locked();
    return Status(StatusCode::kInternal, "Emulators: bad ready line '" + line + "': " + ex.what());
  }

  // Wait until the ports answer.
  for (const std::string* url : {&kinesis_url_, &dynamodb_url_}) {
    if (url->empty()) continue;
    const int port = port_of(*url);
    while (!port_answers(port)) {
      if (Clock::now() >= deadline) {
        std::string u = *url;
        stop_locked();
        return Status(StatusCode::kDeadlineExceeded, "Emulators: " + u + " does not answer");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return Status::Ok();
}

Emulators::~Emulators() { stop(); }

void Emulators::stop() {
  std::lock_guard lock(mu_);
  stop_locked();
}

void Emulators::stop_locked() {
  if (stdin_fd_ >= 0) {
    ::close(stdin_fd_);  // serve.js exits on stdin end
    stdin_fd_ = -1;
  }
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    if (!wait_for_exit(pid_, std::chrono::milliseconds(5000))) {
      ::kill(pid_, SIGKILL);
      wait_for_exit(pid_, std::chrono::milliseconds(5000));
    }
    pid_ = -1;
  }
  kinesis_url_.clear();
  dynamodb_url_.clear();
}

Status Emulators::restart() {
  std::lock_guard lock(mu_);
  const int kp = port_of(kinesis_url_);
  const int dp = port_of(dynamodb_url_);
  stop_locked();
  if (kp > 0 || dp > 0) {
    Status s = launch(kp, dp);
    if (s.ok()) return s;
    // The old ports were taken meanwhile: take new ones.
  }
  return launch(0, 0);
}

std::string Emulators::kinesis_url() const {
  std::lock_guard lock(mu_);
  return kinesis_url_;
}

std::string Emulators::dynamodb_url() const {
  std::lock_guard lock(mu_);
  return dynamodb_url_;
}

bool Emulators::running() const {
  std::lock_guard lock(mu_);
  return pid_ > 0;
}

pid_t Emulators::pid() const {
  std::lock_guard lock(mu_);
  return pid_;
}

kcl::AwsConfig Emulators::aws_config() const {
  std::lock_guard lock(mu_);
  kcl::AwsConfig c;
  c.region = "us-east-1";
  c.profile = "default";
  c.kinesis_endpoint_url = kinesis_url_;
  c.dynamodb_endpoint_url = dynamodb_url_;
  c.credentials = kcl::StaticCredentials{"AKIDKCLTESTEXAMPLE", "kcl-test-fake-secret-key", ""};
  c.http.verify_tls = false;
  c.http.connect_timeout = std::chrono::milliseconds(2000);
  c.http.request_timeout = std::chrono::milliseconds(30000);
  return c;
}

Emulators& shared_emulators() {
  static std::mutex mu;
  static std::unique_ptr<Emulators> instance;  // destroyed (child stopped) at exit
  static std::string failure;
  std::lock_guard lock(mu);
  if (instance) return *instance;
  if (!failure.empty()) throw std::runtime_error(failure);
  auto r = Emulators::start(true, true);
  if (!r.ok()) {
    failure = "shared_emulators: " + r.status().to_string();
    throw std::runtime_error(failure);
  }
  instance = std::move(r).value();
  return *instance;
}

std::string unique_name(std::string_view prefix) {
  static std::atomic<unsigned> counter{0};
  static const unsigned salt = [] {
    std::random_device rd;
    return static_cast<unsigned>(rd());
  }();
  thread_local std::mt19937 rng(
      salt ^ static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id())));
  char tail[16];
  std::snprintf(tail, sizeof tail, "%06x", static_cast<unsigned>(rng() & 0xFFFFFF));
  std::string name(prefix.empty() ? std::string_view("kcl-test") : prefix);
  name += '-';
  name += std::to_string(::getpid());
  name += '-';
  name += std::to_string(counter.fetch_add(1) + 1);
  name += '-';
  name += tail;
  return name;
}

}  // namespace kcl::testing
