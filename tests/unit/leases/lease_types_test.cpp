// ExtendedSequenceNumber ordering and parsing; LeaseConfig defaults and validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kcl/lease.h"
#include "kcl/lease_config.h"

namespace kcl {
namespace {

using namespace std::chrono_literals;
using ESN = ExtendedSequenceNumber;

TEST(ExtendedSequenceNumberTest, SentinelsOrderAroundSequenceNumbers) {
  std::vector<ESN> ordered = {ESN::at_timestamp(),
                              ESN::trim_horizon(),
                              ESN::latest(),
                              ESN("0"),
                              ESN("1"),
                              ESN("9"),
                              ESN("10"),
                              ESN("10", 1),
                              ESN("10", 2),
                              ESN("49590338271490256608559692538361571095921575989136588898"),
                              ESN("49590338271490256608559692538361571095921575989136588899"),
                              ESN("149590338271490256608559692538361571095921575989136588898"),
                              ESN::shard_end()};
  for (std::size_t i = 0; i < ordered.size(); ++i) {
    for (std::size_t j = 0; j < ordered.size(); ++j) {
      EXPECT_EQ(ordered[i] < ordered[j], i < j)
          << ordered[i].to_string() << " vs " << ordered[j].to_string();
      EXPECT_EQ(ordered[i] == ordered[j], i == j);
    }
  }
}

TEST(ExtendedSequenceNumberTest, ComparesNumbersNotText) {
  EXPECT_LT(ESN("9"), ESN("10"));
  EXPECT_LT(ESN("999"), ESN("1000"));
  EXPECT_EQ(ESN("0010"), ESN("10"));
  EXPECT_LT(ESN("10", 5), ESN("11", 0));
}

TEST(ExtendedSequenceNumberTest, KindsAndParse) {
  EXPECT_TRUE(ESN("123").is_sequence_number());
  EXPECT_TRUE(ESN::shard_end().is_shard_end());
  EXPECT_TRUE(ESN::latest().is_sentinel());
  EXPECT_TRUE(ESN().is_sentinel());
  EXPECT_EQ(ESN().sequence_number(), "TRIM_HORIZON");
  EXPECT_FALSE(ESN("12a").valid());
  EXPECT_FALSE(ESN("").valid());
  EXPECT_EQ(ESN::parse("12a").status().code(), StatusCode::kInvalidArgument);
  auto ok = ESN::parse("SHARD_END");
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->is_shard_end());
  EXPECT_EQ(ESN("5", 3).to_string(), "5#3");
  EXPECT_EQ(ESN("5").to_string(), "5");
}

LeaseConfig valid_config() {
  LeaseConfig c;
  c.application_name = "orders-app";
  c.worker_id = "host-1:123:abc";
  return c;
}

bool mentions(const std::vector<std::string>& problems, const std::string& word) {
  return std::any_of(problems.begin(), problems.end(),
                     [&](const std::string& p) { return p.find(word) != std::string::npos; });
}

TEST(LeaseConfigTest, DefaultsAreValidAndFollowTheJavaKcl) {
  LeaseConfig c = valid_config();
  EXPECT_TRUE(c.validate().empty());
  EXPECT_EQ(c.failover_time, 10s);
  EXPECT_EQ(c.assignment, LeaseAssignment::kLeader);
  EXPECT_EQ(c.effective_renew_interval(), 5s) << "one heartbeat per worker, every failover / 2";
  EXPECT_EQ(c.effective_renew_call_timeout(), 2500ms);
  EXPECT_EQ(c.effective_coordinator_table_name(), "orders-app-CoordinatorState");
  EXPECT_EQ(c.poll_interval, 1s);
  EXPECT_EQ(c.handoff_timeout, 30s);
  c.assignment = LeaseAssignment::kWorkerTakes;
  EXPECT_EQ(c.effective_renew_interval(), 3333ms) << "each lease, every failover / 3";
  EXPECT_EQ(c.effective_take_interval(), 20s);
  EXPECT_EQ(c.effective_lost_lease_margin(), 1s);
  EXPECT_EQ(c.max_leases_to_steal_at_once, 1);
  EXPECT_EQ(c.effective_table_name(), "orders-app");
  EXPECT_EQ(c.billing_mode, BillingMode::kPayPerRequest);
  c.table_name = "orders-leases";
  EXPECT_EQ(c.effective_table_name(), "orders-leases");
}

TEST(LeaseConfigTest, ReportsEveryProblemInPlainWords) {
  LeaseConfig c;
  c.failover_time = 50ms;
  c.max_leases_per_worker = 0;
  c.max_leases_to_steal_at_once = 0;
  c.take_ramp_floor = -1;
  c.interval_jitter = 0.9;
  c.billing_mode = BillingMode::kProvisioned;
  c.read_capacity_units = 0;
  c.write_capacity_units = 0;
  c.table_active_timeout = 10ms;
  auto problems = c.validate();
  EXPECT_TRUE(mentions(problems, "application_name"));
  EXPECT_TRUE(mentions(problems, "worker_id"));
  EXPECT_TRUE(mentions(problems, "failover_time"));
  EXPECT_TRUE(mentions(problems, "max_leases_per_worker"));
  EXPECT_TRUE(mentions(problems, "max_leases_to_steal_at_once"));
  EXPECT_TRUE(mentions(problems, "take_ramp_floor"));
  EXPECT_TRUE(mentions(problems, "interval_jitter"));
  EXPECT_TRUE(mentions(problems, "read_capacity_units"));
  EXPECT_TRUE(mentions(problems, "write_capacity_units"));
  EXPECT_TRUE(mentions(problems, "table_active_timeout"));
  EXPECT_GE(problems.size(), 10u);
}

TEST(LeaseConfigTest, RenewIntervalAndMarginMustFitTheFailoverTime) {
  LeaseConfig c = valid_config();
  c.renew_interval = 6s;
  EXPECT_TRUE(mentions(c.validate(), "renew_interval"));
  c.renew_interval = 3s;
  c.lost_lease_margin = 7s;
  EXPECT_TRUE(mentions(c.validate(), "lost_lease_margin"));
  c.lost_lease_margin = 2s;
  EXPECT_TRUE(c.validate().empty());
}

TEST(LeaseConfigTest, TableNameMustBeAValidDynamoDbName) {
  LeaseConfig c = valid_config();
  c.application_name = "my app!";
  EXPECT_TRUE(mentions(c.validate(), "not a valid DynamoDB table name"));
  c.table_name = "my-app";
  EXPECT_TRUE(c.validate().empty());
}

}  // namespace
}  // namespace kcl
