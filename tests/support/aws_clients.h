// The clients an integration test talks to the emulators (or a scripted server) through,
// built one way for every test from an AwsConfig (Emulators::aws_config(), say). A client
// that cannot be built is a test failure naming the service, and a null pointer.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "aws/aws_json_client.h"
#include "dynamodb/dynamodb_client.h"
#include "kcl/aws_config.h"
#include "kinesis/kinesis_client.h"
#include "leases/dynamodb_lease_store.h"

namespace kcl::testing {

inline std::shared_ptr<aws::AwsJsonClient> aws_client(const aws::ServiceSpec& service,
                                                      const AwsConfig& config) {
  auto made = aws::make_aws_json_client(service, config);
  if (!made.ok()) {
    ADD_FAILURE() << "the " << service.display_name << " client: " << made.status();
    return nullptr;
  }
  return std::shared_ptr<aws::AwsJsonClient>(std::move(made).value());
}

inline std::shared_ptr<kinesis::KinesisClient> kinesis_client(const AwsConfig& config) {
  auto raw = aws_client(aws::kinesis_service(), config);
  return raw ? std::make_shared<kinesis::KinesisClient>(std::move(raw)) : nullptr;
}

inline std::shared_ptr<dynamodb::DynamoDbClient> dynamodb_client(const AwsConfig& config) {
  auto raw = aws_client(aws::dynamodb_service(), config);
  return raw ? std::make_shared<dynamodb::DynamoDbClient>(std::move(raw)) : nullptr;
}

// A lease store on `table` whose scans are consistent (the tests read back what they just
// wrote); the table is not created here.
inline std::unique_ptr<leases::DynamoDbLeaseStore> dynamodb_lease_store(const AwsConfig& config,
                                                                        std::string table) {
  leases::DynamoDbLeaseStoreOptions options;
  options.table_name = std::move(table);
  options.table_active_timeout = std::chrono::seconds(30);
  options.consistent_scan = true;
  return std::make_unique<leases::DynamoDbLeaseStore>(dynamodb_client(config), options);
}

}  // namespace kcl::testing
