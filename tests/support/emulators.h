// Test fixture: kinesalite (Kinesis) and dynalite (DynamoDB) on 127.0.0.1, in one node
// child process running tools/emulators/serve.js.
//
// The child cannot outlive the test process: it exits when its stdin pipe (whose write end
// only this process holds) closes, which the kernel does however this process dies, even
// by SIGKILL; as a second guard it is started with PR_SET_PDEATHSIG(SIGKILL) when started
// from the main thread (the death signal follows the thread that forked, so it is not used
// from other threads).
//
// node_modules is found via KCL_NODE_MODULES (env), else <source dir>/node_modules; node via
// KCL_NODE (env, a path), else `node` on PATH.
//
// Typical use in a test binary (all tests of a binary share one pair of emulators, so give
// each test its own stream / table names):
//
//   auto& emu = kcl::testing::shared_emulators();
//   auto config = emu.aws_config();
//   std::string stream = kcl::testing::unique_name("orders");
//
// Thread safety: Emulators methods may be called from many threads; restart()/stop() while
// another thread talks to the emulators makes that thread's calls fail (as they would
// against a crashed service).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "kcl/aws_config.h"
#include "kcl/status.h"

namespace kcl::testing {

class Emulators {
 public:
  struct Options {
    bool kinesis = true;
    bool dynamodb = true;
    // How long to wait for the "listening" line and for the ports to answer.
    std::chrono::milliseconds ready_timeout{30000};
  };

  // Starts node with serve.js and waits until the requested emulators answer.
  // Errors: kFailedPrecondition when node or node_modules cannot be found or node exits
  // early (its exit status and the path tried are in the message), kDeadlineExceeded when
  // it is not ready in time.
  static Result<std::unique_ptr<Emulators>> start(bool kinesis = true, bool dynamodb = true);
  static Result<std::unique_ptr<Emulators>> start(const Options& options);

  Emulators(const Emulators&) = delete;
  Emulators& operator=(const Emulators&) = delete;
  // Stops the child (see stop()).
  ~Emulators();

  // "http://127.0.0.1:<port>"; empty when that emulator was not requested or is stopped.
  std::string kinesis_url() const;
  std::string dynamodb_url() const;

  // Endpoints of the running emulators, region us-east-1, static fake credentials, TLS
  // verification off, request timeout 30 s (kinesalite can hang on AT_TIMESTAMP).
  kcl::AwsConfig aws_config() const;

  // Closes the child's stdin, sends SIGTERM, waits up to 5 s, then SIGKILL. Idempotent.
  void stop();

  // stop() then start again with the same options: all streams and tables are gone.
  // Tries to keep the same ports (so clients built from the old aws_config() keep working),
  // else takes new ones; read the URLs again afterwards.
  Status restart();

  bool running() const;
  pid_t pid() const;

 private:
  explicit Emulators(Options options) : options_(std::move(options)) {}
  Status launch(int kinesis_port, int dynamodb_port);  // requires mu_
  void stop_locked();                                  // requires mu_

  const Options options_;
  mutable std::mutex mu_;
  pid_t pid_ = -1;
  int stdin_fd_ = -1;  // write end of the child's stdin pipe
  std::string kinesis_url_;
  std::string dynamodb_url_;
};

// The emulators of this test binary (both kinesalite and dynalite), started on first use and
// stopped at exit. Throws std::runtime_error (reported by GoogleTest as a test failure) when
// they cannot be started; a failed start is remembered so later tests fail fast.
Emulators& shared_emulators();

// A name no other test in this or a concurrent test process uses:
// "<prefix>-<pid>-<counter>-<random>", valid as a Kinesis stream or DynamoDB table name
// (prefix should be [A-Za-z0-9_.-], a few characters).
std::string unique_name(std::string_view prefix = "kcl-test");

// Directory that holds kinesalite and dynalite (KCL_NODE_MODULES or the source tree's).
std::string node_modules_dir();

}  // namespace kcl::testing
