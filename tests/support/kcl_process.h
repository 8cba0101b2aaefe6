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

#include "dynamodb/dynamodb_client.h"
#include "kcl/aws_config.h"
#include "kinesis/kinesis_client.h"
#include "support/child_process.h"
#include "support/emulators.h"

namespace kcl::cli {

using namespace std::chrono_literals;

// The kcl binary run with the emulators' endpoints, its stdout in a file (and its stderr,
// when `stderr_path` is given; its stdin a pipe the test writes, with `pipe_stdin`).
class KclProcess : public testing::ChildProcess {
 public:
  KclProcess(const AwsConfig& aws, std::vector<std::string> args, std::string stdout_path,
             const std::string& stderr_path = "", bool pipe_stdin = false)
      : ChildProcess(argv(aws, std::move(args)), testing::emulator_environment(aws),
                     std::move(stdout_path), stderr_path, pipe_stdin) {}

 private:
  static std::vector<std::string> argv(const AwsConfig& aws, std::vector<std::string> args) {
    std::vector<std::string> a = {KCL_CLI_PATH, "--endpoint-url", aws.kinesis_endpoint_url};
    a.insert(a.end(), args.begin(), args.end());
    return a;
  }
};

// A fixture with the emulators' configuration, a Kinesis client for the test itself and a
// fresh stream of `shards` shards.
class CliTest : public ::testing::Test {
 protected:
  // The emulators' configuration in aws_, and a Kinesis client on them in kinesis_.
  void make_kinesis() {
    aws_ = testing::shared_emulators().aws_config();
    auto k = aws::make_aws_json_client(aws::kinesis_service(), aws_);
    ASSERT_TRUE(k.ok()) << k.status();
    kinesis_ = std::make_unique<kinesis::KinesisClient>(
        std::shared_ptr<aws::AwsJsonClient>(std::move(*k)));
  }

  void make_stream(std::string_view prefix, int shards) {
    make_kinesis();
    stream_ = testing::unique_name(prefix);
    ASSERT_TRUE(kinesis_->create_stream(stream_, shards).ok());
    ASSERT_TRUE(kinesis_->wait_for_active(stream_, 30s).ok());
  }

  // A DynamoDB client on the emulators of aws_ (set by make_stream), in ddb_.
  void make_dynamodb() {
    auto d = aws::make_aws_json_client(aws::dynamodb_service(), aws_);
    ASSERT_TRUE(d.ok()) << d.status();
    ddb_ = std::make_shared<dynamodb::DynamoDbClient>(
        std::shared_ptr<aws::AwsJsonClient>(std::move(*d)));
  }

  AwsConfig aws_;
  std::unique_ptr<kinesis::KinesisClient> kinesis_;
  std::shared_ptr<dynamodb::DynamoDbClient> ddb_;
  std::string stream_;
};

using testing::eventually;

}  // namespace kcl::cli
