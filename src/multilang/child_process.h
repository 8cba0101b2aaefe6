// multilang/child_process.h: one record processor child process (MultiLangDaemon protocol):
// started with a command line, spoken to over its stdin (lines written and flushed) and
// stdout (lines read), each with a deadline; its stderr is forwarded line by line to the
// logger with the shard's name by one thread shared by every child of the process. The child
// gets only its three pipes (no other descriptor of this process, such as its connections)
// and the default disposition and an empty mask for every signal.
//
// Thread safety: write_line(), read_line() and stop() from one thread at a time (the shard's
// processor).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kcl/logging.h"
#include "kcl/status.h"

namespace kcl::multilang {

class ChildProcess {
 public:
  // Starts `argv` (argv[0] looked up on PATH). Errors: kFailedPrecondition naming the program.
  static Result<std::unique_ptr<ChildProcess>> start(const std::vector<std::string>& argv,
                                                     std::shared_ptr<Logger> logger,
                                                     std::string component);
  ~ChildProcess();  // stop()

  // Writes `line` and a newline. kUnavailable when the child closed its input (exited);
  // kDeadlineExceeded when it had not read enough of it by `deadline` (its pipe full).
  Status write_line(const std::string& line, std::chrono::steady_clock::time_point deadline);
  // The next non-blank line (without its \r\n). kDeadlineExceeded when none came by
  // `deadline`; kUnavailable when the child closed its output (exited); kInvalidArgument for
  // a line longer than 16 MiB.
  Result<std::string> read_line(std::chrono::steady_clock::time_point deadline);
  // Closes its input, waits up to `grace` for it to exit (reading and dropping what it still
  // writes to its output, so a child flushing at exit does not block), then kills it.
  // Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  pid_t pid() const { return pid_; }
  // Kills (SIGKILL) every child this process started and has not reaped: a daemon whose
  // graceful stop waits on children that never answer. Their reads then end (kUnavailable).
  static void kill_all();
  // How it ended, once stopped or exited ("exit status 3", "killed by signal 9").
  std::string exit_description();

 private:
  ChildProcess() = default;
  // Reaps the child if it exited (waiting for it when `wait`); whether it is reaped now.
  bool reap(bool wait);
  // Reads and drops what the child writes to its output, waiting up to `wait` for some.
  void drain_output(std::chrono::milliseconds wait);
  // Reads what the child wrote to its output (readable now) into buffer_; false, with the
  // output closed, at its end or on an error.
  bool take_output();
  // The longest line read_line() takes.
  static constexpr std::size_t kMaxLineBytes = std::size_t{16} << 20;
  pid_t pid_ = -1;
  int in_ = -1;   // the child's stdin (we write)
  int out_ = -1;  // the child's stdout (we read)
  std::string buffer_;
  int status_ = 0;
  bool reaped_ = false;
};

// Splits a command line on whitespace, keeping "double" or 'single' quoted parts together
// (as the Java MultiLangDaemon's executableName).
std::vector<std::string> split_command(const std::string& command);

}  // namespace kcl::multilang
