// `kcl status` as a user runs it, against dynalite, on a lease table the test writes item by
// item in the Java KCL's schema: piped, it prints one JSON object listing every lease with its
// owner (null when free), checkpoint, state and lineage, and the workers with their lease
// counts. A missing table is an error naming it. --watch keeps watching through failed fetches.
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dynamodb/dynamodb_client.h"
#include "leases/dynamodb_lease_store.h"
#include "support/kcl_process.h"
#include "support/local_http_server.h"

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

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// `kcl status --watch` while the worker's endpoint goes away (a restart) and comes back: it
// ended at the first failed fetch (exit 1). Now the failure is said once, then with its count
// while it repeats, the watch goes on, and the view comes back with the endpoint.
TEST(StatusWatchTest, KeepsWatchingThroughFailedFetchesAndResumes) {
  std::atomic<bool> down{false};
  std::atomic<int> refused{0};
  testing::LocalHttpServer endpoint([&](const testing::ServedRequest&) {
    testing::CannedResponse r;
    if (down.load()) {
      ++refused;
      r.close_without_response = true;
      return r;
    }
    r.headers = {{"Content-Type", "application/json"}};
    r.body = R"({"scope":"fleet","application":"watched","stream":"s","shards":[],"workers":[]})";
    return r;
  });
  const std::string base = ::testing::TempDir() + "/status-watch";
  testing::ChildProcess p({KCL_CLI_PATH, "status", "--endpoint", endpoint.url(), "--watch",
                           "--interval", "1", "--json"},
                          {"PATH=/usr/bin:/bin"}, base + ".out", base + ".err");
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(eventually([&] { return !p.lines().empty(); }, 30s)) << text_of(base + ".err");

  down = true;
  const bool counted = eventually(
      [&] {
        return text_of(base + ".err").find("failed 3 times in a row") != std::string::npos ||
               p.exit_status().has_value();
      },
      30s);
  std::string err = text_of(base + ".err");
  ASSERT_TRUE(counted) << err;
  ASSERT_FALSE(p.exit_status().has_value())
      << "the watch ended at a failed fetch, exit status " << *p.exit_status() << ": " << err;
  EXPECT_EQ(count_of(err, "fetching the fleet view failed: "), 1u) << "said once: " << err;
  EXPECT_NE(err.find(endpoint.url()), std::string::npos) << err;
  EXPECT_GE(refused.load(), 3);

  down = false;
  const std::size_t shown = p.lines().size();
  ASSERT_TRUE(eventually(
      [&] {
        return p.lines().size() > shown &&
               text_of(base + ".err").find("recovered after") != std::string::npos;
      },
      30s))
      << text_of(base + ".err");
  EXPECT_EQ(p.stop(), 0);
  for (const auto& line : p.lines()) {
    EXPECT_EQ(json::parse(line, nullptr, false).value("application", ""), "watched") << line;
  }
}

}  // namespace
}  // namespace kcl::cli
