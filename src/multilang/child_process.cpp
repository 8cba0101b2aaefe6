#include "multilang/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "base/thread_name.h"

extern char** environ;

namespace kcl::multilang {

// One thread forwards every child's stderr, polling all their pipes (and a wake-up pipe for
// new ones): a daemon with hundreds of shards has one such thread, not one per child. A
// pipe is closed when its child's end closes (the child exited).
class StderrPump {
 public:
  static StderrPump& instance() {
    static StderrPump* pump = new StderrPump();  // lives as long as the process
    return *pump;
  }
  void add(int fd, std::shared_ptr<Logger> logger, std::string component) {
    std::lock_guard<std::mutex> lock(mu_);
    added_.push_back(Source{fd, std::move(logger), std::move(component), {}});
    const char c = 1;
    (void)!::write(wake_[1], &c, 1);
  }

 private:
  struct Source {
    int fd;
    std::shared_ptr<Logger> logger;
    std::string component;
    std::string pending;
  };
  StderrPump() {
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
    base::named_thread("kcl-child-err", [this] { run(); }).detach();
  }
  static void emit(Source& s, const std::string& line) {
    // At WARN: what a child writes there is mostly why it fails (a stack trace), and must
    // show with the daemon's log turned down to warnings (the Java daemon logs it at ERROR).
    if (s.logger && !line.empty()) s.logger->log(LogLevel::kWarn, s.component, "stderr: " + line);
  }
  // A line ends at \n or \r (a progress bar rewriting its line writes only \r); one longer
  // than kLongestLine is logged in pieces, so a child that never ends a line holds no more.
  static constexpr std::size_t kLongestLine = 64 * 1024;
  static void emit_lines(Source& s) {
    std::size_t start = 0;
    for (;;) {
      const std::size_t end = s.pending.find_first_of("\r\n", start);
      if (end == std::string::npos) break;
      emit(s, s.pending.substr(start, end - start));
      start = end + 1;
    }
    s.pending.erase(0, start);
    while (s.pending.size() >= kLongestLine) {
      emit(s, s.pending.substr(0, kLongestLine) + " [line continues]");
      s.pending.erase(0, kLongestLine);
    }
  }
  void run() {
    std::vector<Source> sources;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& a : added_) sources.push_back(std::move(a));
        added_.clear();
      }
      std::vector<pollfd> fds;
      fds.push_back(pollfd{wake_[0], POLLIN, 0});
      for (const auto& s : sources) fds.push_back(pollfd{s.fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents) {
        char buf[64];
        while (::read(wake_[0], buf, sizeof buf) > 0) {
        }
      }
      for (std::size_t i = sources.size(); i-- > 0;) {
        if (!fds[i + 1].revents) continue;
        Source& s = sources[i];
        char buf[4096];
        const ssize_t n = ::read(s.fd, buf, sizeof buf);
        if (n > 0) {
          s.pending.append(buf, static_cast<std::size_t>(n));
          emit_lines(s);
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        emit(s, s.pending);  // the child's end closed
        ::close(s.fd);
        sources.erase(sources.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
  }
  std::mutex mu_;
  std::vector<Source> added_;
  int wake_[2] = {-1, -1};
};

namespace {

// Children started and not yet reaped, for kill_all(). A pid leaves the set in the same locked
// step that reaps it, so kill_all() never signals a pid that could have been reused.
std::mutex g_children_mu;
std::set<pid_t>& live_children() {
  static auto* children = new std::set<pid_t>();  // lives as long as the process
  return *children;
}

}  // namespace

void ChildProcess::kill_all() {
  std::lock_guard<std::mutex> lock(g_children_mu);
  for (pid_t pid : live_children()) ::kill(pid, SIGKILL);
}

bool ChildProcess::reap(bool wait) {
  std::lock_guard<std::mutex> lock(g_children_mu);
  int st = 0;
  if (::waitpid(pid_, &st, wait ? 0 : WNOHANG) != pid_) return false;
  reaped_ = true;
  status_ = st;
  live_children().erase(pid_);
  return true;
}

std::vector<std::string> split_command(const std::string& command) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (char c : command) {
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else {
        cur += c;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) out.push_back(std::move(cur));
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (in_word) out.push_back(std::move(cur));
  return out;
}

Result<std::unique_ptr<ChildProcess>> ChildProcess::start(const std::vector<std::string>& argv,
                                                          std::shared_ptr<Logger> logger,
                                                          std::string component) {
  if (argv.empty()) {
    return Status(StatusCode::kInvalidArgument, "the record processor's command is empty");
  }
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    return Status(StatusCode::kUnavailable, std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  // Nothing else of this process goes to the child: not every library marks its descriptors
  // close-on-exec (sockets, files), and a child holding a connection's socket keeps it open
  // after this process closed it.
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  // Signals as a fresh program has them: this process ignores SIGPIPE (a write to a child that
  // exited must not kill it), and an ignored signal would stay ignored across the exec.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  // A process group of its own: a Ctrl-C on the terminal (SIGINT to the foreground group)
  // reaches this process alone, which then stops each child through the protocol
  // (shutdownRequested, its last checkpoint) instead of the child dying at once beside it.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  std::vector<std::string> copy = argv;
  for (auto& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  auto child = std::unique_ptr<ChildProcess>(new ChildProcess());
  const int rc = posix_spawnp(&child->pid_, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    child->pid_ = -1;
    return Status(StatusCode::kFailedPrecondition,
                  "cannot start the record processor '" + argv[0] + "': " + std::strerror(rc));
  }
  {
    std::lock_guard<std::mutex> lock(g_children_mu);
    live_children().insert(child->pid_);
  }
  child->in_ = in[1];
  child->out_ = out[0];
  // Written with a deadline: a child that stops reading must not block this thread for ever.
  (void)::fcntl(child->in_, F_SETFL, ::fcntl(child->in_, F_GETFL) | O_NONBLOCK);
  // A write to a child that exited must fail with EPIPE, not kill the daemon.
  signal(SIGPIPE, SIG_IGN);
  StderrPump::instance().add(err[0], std::move(logger), std::move(component));
  return child;
}

ChildProcess::~ChildProcess() { stop(std::chrono::milliseconds(500)); }

Status ChildProcess::write_line(const std::string& line,
                                std::chrono::steady_clock::time_point deadline) {
  if (in_ < 0) return Status(StatusCode::kUnavailable, "the record processor's input is closed");
  std::string data = line + "\n";
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(in_, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        return Status(StatusCode::kDeadlineExceeded,
                      "the record processor did not read its input in time (" +
                          std::to_string(off) + " of " + std::to_string(data.size()) +
                          " bytes written)");
      }
      // A child that cannot take more input may itself be blocked writing its output (it
      // prints while it works): that is read meanwhile, for read_line(), as the Java daemon
      // reads while it writes, or neither side moves until the deadline.
      pollfd p[2] = {{in_, POLLOUT, 0}, {out_, POLLIN, 0}};
      const bool read_too = out_ >= 0 && buffer_.size() <= kMaxLineBytes;
      const auto wait =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
      const int r = ::poll(p, read_too ? 2 : 1, static_cast<int>(std::min<long long>(wait, 1000)));
      if (r > 0 && read_too && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        (void)take_output();
      }
      continue;
    }
    if (n <= 0) {
      return Status(StatusCode::kUnavailable, std::string("writing to the record processor: ") +
                                                  std::strerror(errno) + " (it exited?)");
    }
    off += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

Result<std::string> ChildProcess::read_line(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    std::size_t nl;
    while ((nl = buffer_.find('\n')) != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") != std::string::npos) return line;  // blank: skipped
    }
    if (buffer_.size() > kMaxLineBytes) {
      return Status(StatusCode::kInvalidArgument,
                    "the record processor wrote a line longer than 16 MiB");
    }
    if (out_ < 0)
      return Status(StatusCode::kUnavailable, "the record processor's output is closed");
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return Status(StatusCode::kDeadlineExceeded, "the record processor did not answer in time");
    }
    pollfd p{out_, POLLIN, 0};
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(wait, 1000)));
    if (r < 0 && errno != EINTR) {
      return Status(StatusCode::kUnavailable, std::string("poll: ") + std::strerror(errno));
    }
    if (r <= 0) continue;
    if (!take_output()) {
      return Status(StatusCode::kUnavailable, "the record processor closed its output");
    }
  }
}

bool ChildProcess::take_output() {
  char buf[65536];
  const ssize_t n = ::read(out_, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    ::close(out_);
    out_ = -1;
    return false;
  }
  buffer_.append(buf, static_cast<std::size_t>(n));
  return true;
}

void ChildProcess::drain_output(std::chrono::milliseconds wait) {
  if (out_ < 0) {
    std::this_thread::sleep_for(wait);
    return;
  }
  pollfd p{out_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return;
  char buf[65536];
  const ssize_t n = ::read(out_, buf, sizeof buf);
  if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
    ::close(out_);
    out_ = -1;
  }
}

std::string ChildProcess::exit_description() {
  if (!reaped_ && pid_ > 0) (void)reap(false);
  if (!reaped_) return "still running";
  if (WIFEXITED(status_)) return "exit status " + std::to_string(WEXITSTATUS(status_));
  if (WIFSIGNALED(status_)) return "killed by signal " + std::to_string(WTERMSIG(status_));
  return "ended";
}

void ChildProcess::stop(std::chrono::milliseconds grace) {
  if (in_ >= 0) {
    ::close(in_);
    in_ = -1;
  }
  if (pid_ > 0 && !reaped_) {
    const auto until = std::chrono::steady_clock::now() + grace;
    while (std::chrono::steady_clock::now() < until && !reap(false)) {
      drain_output(std::chrono::milliseconds(10));
    }
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      (void)reap(true);
    }
  }
  if (out_ >= 0) {
    ::close(out_);
    out_ = -1;
  }
}

}  // namespace kcl::multilang
