// What the pull consumer's end-to-end tests share: clients of the emulators (started once per
// test program) and the lease table of the application under test.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "aws/aws_json_client.h"
#include "dynamodb/dynamodb_client.h"
#include "kinesis/kinesis_client.h"
#include "leases/dynamodb_lease_store.h"
#include "support/aws_clients.h"
#include "support/emulators.h"

namespace kcl::pull {

class PullFixture : public ::testing::Test {
 protected:
  // Clients of the emulators, and unique names for the stream and the application.
  void connect(const std::string& prefix) {
    aws_ = testing::shared_emulators().aws_config();
    kinesis_ = testing::kinesis_client(aws_);
    ddb_ = testing::dynamodb_client(aws_);
    ASSERT_TRUE(kinesis_ && ddb_);
    stream_ = testing::unique_name(prefix);
    app_ = testing::unique_name(prefix + "-app");
  }

  // The application's leases as stored; empty when they cannot be read (yet).
  std::vector<Lease> leases() {
    LeaseConfig lc;
    lc.application_name = app_;
    leases::DynamoDbLeaseStore store(ddb_, lc);
    auto all = store.list_leases();
    return all.ok() ? *all : std::vector<Lease>{};
  }

  AwsConfig aws_;
  std::shared_ptr<kinesis::KinesisClient> kinesis_;
  std::shared_ptr<dynamodb::DynamoDbClient> ddb_;
  std::string stream_, app_;
};

}  // namespace kcl::pull
