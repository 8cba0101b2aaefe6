// The kcl binary (KCL_CLI_PATH) run as a user runs it, against the test's emulators, with
// its stdout in a file; and a wait on a condition with a deadline.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kcl/aws_config.h"
#include "kinesis/kinesis_client.h"
#include "support/emulators.h"

namespace kcl::cli {

using namespace std::chrono_literals;

// The kcl binary run with the emulators' endpoints, its stdout in a file.
class KclProcess {
 public:
  KclProcess(const AwsConfig& aws, std::vector<std::string> args, std::string stdout_path)
      : out_path_(std::move(stdout_path)) {
    std::vector<std::string> argv_s = {KCL_CLI_PATH, "--endpoint-url", aws.kinesis_endpoint_url};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<std::string> env_s = {"AWS_REGION=us-east-1",
                                      "AWS_ACCESS_KEY_ID=" + aws.credentials->access_key_id,
                                      "AWS_SECRET_ACCESS_KEY=" + aws.credentials->secret_access_key,
                                      "AWS_ENDPOINT_URL_KINESIS=" + aws.kinesis_endpoint_url,
                                      "AWS_ENDPOINT_URL_DYNAMODB=" + aws.dynamodb_endpoint_url,
                                      "PATH=/usr/bin:/bin"};
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) pid_ = -1;
  }
  ~KclProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool started() const { return pid_ > 0; }
  // SIGTERM (graceful stop) and the exit status.
  int stop() {
    kill(pid_, SIGTERM);
    return wait();
  }
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::vector<std::string> lines() const {
    std::ifstream in(out_path_);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }

 private:
  std::string out_path_;
  pid_t pid_ = -1;
};

// A fixture with the emulators' configuration, a Kinesis client for the test itself and a
// fresh stream of `shards` shards.
class CliTest : public ::testing::Test {
 protected:
  void make_stream(std::string_view prefix, int shards) {
    aws_ = testing::shared_emulators().aws_config();
    auto k = aws::make_aws_json_client(aws::kinesis_service(), aws_);
    ASSERT_TRUE(k.ok()) << k.status();
    kinesis_ = std::make_unique<kinesis::KinesisClient>(
        std::shared_ptr<aws::AwsJsonClient>(std::move(*k)));
    stream_ = testing::unique_name(prefix);
    ASSERT_TRUE(kinesis_->create_stream(stream_, shards).ok());
    ASSERT_TRUE(kinesis_->wait_for_active(stream_, 30s).ok());
  }

  AwsConfig aws_;
  std::unique_ptr<kinesis::KinesisClient> kinesis_;
  std::string stream_;
};

template <typename F>
inline bool eventually(F f, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (f()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

}  // namespace kcl::cli
