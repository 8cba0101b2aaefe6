// `kcl status` as a user runs it, against dynalite, on a lease table the test writes item by
// item in the Java KCL's schema: piped, it prints one JSON object listing every lease with its
// owner (null when free), checkpoint, state and lineage, and the workers with their lease
// counts. A missing table is an error naming it.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dynamodb/dynamodb_client.h"
#include "leases/dynamodb_lease_store.h"
#include "support/kcl_process.h"

namespace kcl::cli {
namespace {

using dynamodb::AttributeValue;
using nlohmann::json;

class StatusTest : public CliTest {
 protected:
  void SetUp() override {
    aws_ = testing::shared_emulators().aws_config();
    make_dynamodb();
    app_ = testing::unique_name("status-app");
    LeaseConfig config;
    config.application_name = app_;
    leases::DynamoDbLeaseStore store(ddb_, config);
    ASSERT_TRUE(store.create_table_if_not_exists().ok());
  }

  // One lease item as the Java KCL writes it.
  void put_lease(const std::string& shard, const std::string& owner, const std::string& checkpoint,
                 long long sub_sequence, std::vector<std::string> parents = {},
                 std::vector<std::string> children = {}) {
    dynamodb::Item item = {{"leaseKey", AttributeValue::S(shard)},
                           {"leaseCounter", AttributeValue::N(7)},
                           {"ownerSwitchesSinceCheckpoint", AttributeValue::N(0)},
                           {"checkpoint", AttributeValue::S(checkpoint)},
                           {"checkpointSubSequenceNumber", AttributeValue::N(sub_sequence)}};
    if (!owner.empty()) item["leaseOwner"] = AttributeValue::S(owner);
    if (!parents.empty()) item["parentShardId"] = AttributeValue::SS(std::move(parents));
    if (!children.empty()) item["childShardIds"] = AttributeValue::SS(std::move(children));
    auto r = ddb_->put_item(app_, item);
    ASSERT_TRUE(r.ok()) << r.status();
  }

  std::string app_;
};

TEST_F(StatusTest, PipedItPrintsEveryLeaseWithOwnerAndCheckpointAsJson) {
  const std::string seq = "49590338271490256608559692538361571095921575989136588898";
  put_lease("shardId-000000000000", "worker-a", "SHARD_END", 0, {},
            {"shardId-000000000003", "shardId-000000000004"});
  put_lease("shardId-000000000001", "worker-b", seq, 0);
  put_lease("shardId-000000000002", "", "LATEST", 0);
  put_lease("shardId-000000000003", "worker-a", seq, 3, {"shardId-000000000000"});
  put_lease("shardId-000000000004", "worker-b", "TRIM_HORIZON", 0, {"shardId-000000000000"});

  const std::string base = ::testing::TempDir() + "/" + app_;
  KclProcess p(aws_, {"status", "--app", app_, "--stream", "orders"}, base + ".out", base + ".err");
  ASSERT_TRUE(p.started());
  ASSERT_EQ(p.wait(), 0);
  const auto lines = p.lines();
  ASSERT_EQ(lines.size(), 1u) << "one JSON object when piped";
  const json doc = json::parse(lines[0], nullptr, false);
  ASSERT_TRUE(doc.is_object()) << lines[0];
  EXPECT_EQ(doc["application"], app_);
  EXPECT_EQ(doc["stream"], "orders");
  EXPECT_EQ(doc["table"], app_);

  struct Expected {
    json owner;
    std::string checkpoint, state;
    std::vector<std::string> parents, children;
  };
  const std::map<std::string, Expected> expected = {
      {"shardId-000000000000",
       {"worker-a", "SHARD_END", "ended", {}, {"shardId-000000000003", "shardId-000000000004"}}},
      {"shardId-000000000001", {"worker-b", seq, "reading", {}, {}}},
      {"shardId-000000000002", {nullptr, "LATEST", "unassigned", {}, {}}},
      {"shardId-000000000003", {"worker-a", seq + "#3", "reading", {"shardId-000000000000"}, {}}},
      {"shardId-000000000004",
       {"worker-b", "TRIM_HORIZON", "reading", {"shardId-000000000000"}, {}}},
  };
  ASSERT_TRUE(doc["shards"].is_array()) << lines[0];
  std::map<std::string, json> listed;
  for (const json& s : doc["shards"]) listed[s.value("shard_id", "")] = s;
  ASSERT_EQ(listed.size(), expected.size()) << lines[0];
  for (const auto& [shard, e] : expected) {
    ASSERT_TRUE(listed.count(shard)) << shard << " missing from " << lines[0];
    const json& s = listed[shard];
    EXPECT_EQ(s["owner"], e.owner) << shard;
    EXPECT_EQ(s["checkpoint"], e.checkpoint) << shard;
    EXPECT_EQ(s["state"], e.state) << shard;
    EXPECT_EQ(s["parents"].get<std::vector<std::string>>(), e.parents) << shard;
    EXPECT_EQ(s["children"].get<std::vector<std::string>>(), e.children) << shard;
  }
  std::map<std::string, int> workers;
  for (const json& w : doc["workers"]) workers[w["worker_id"]] = w["leases"];
  EXPECT_EQ(workers, (std::map<std::string, int>{{"worker-a", 2}, {"worker-b", 2}}));
}

TEST_F(StatusTest, AMissingLeaseTableIsAnErrorNamingIt) {
  const std::string missing = testing::unique_name("no-such-app");
  const std::string base = ::testing::TempDir() + "/" + missing;
  KclProcess p(aws_, {"status", "--app", missing, "--stream", "orders"}, base + ".out",
               base + ".err");
  ASSERT_TRUE(p.started());
  EXPECT_EQ(p.wait(), 1);
  std::ifstream err(base + ".err");
  const std::string text((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("kcl status: "), std::string::npos) << text;
  EXPECT_NE(text.find("reading lease table " + missing), std::string::npos) << text;
  EXPECT_TRUE(p.lines().empty());
}

}  // namespace
}  // namespace kcl::cli
