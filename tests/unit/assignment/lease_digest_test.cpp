// lease_set_digest: the same set gives the same digest whatever its order or repeats; a
// different set (one lease more, less, or marked differently) a different one.
#include "assignment/lease_digest.h"

#include <gtest/gtest.h>

namespace kcl::leases {
namespace {

using namespace ::kcl::assignment;

TEST(LeaseDigestTest, OrderAndRepeatsDoNotMatterButEveryKeyAndMarkDoes) {
  const std::string a = lease_set_digest({"shardId-000000000001", "shardId-000000000002"});
  EXPECT_EQ(a, lease_set_digest(
                   {"shardId-000000000002", "shardId-000000000001", "shardId-000000000002"}));
  EXPECT_EQ(a.substr(0, 2), "2:");
  EXPECT_NE(a, lease_set_digest({"shardId-000000000001"}));
  EXPECT_NE(a, lease_set_digest(
                   {"shardId-000000000001", "shardId-000000000002", "shardId-000000000003"}));
  EXPECT_NE(a,
            lease_set_digest({"shardId-000000000001",
                              lease_claim_mark("shardId-000000000002", LeaseClaim::kHandingOff)}));
  EXPECT_NE(lease_set_digest({lease_claim_mark("shardId-000000000002", LeaseClaim::kIncoming)}),
            lease_set_digest({lease_claim_mark("shardId-000000000002", LeaseClaim::kHandingOff)}));
  // Keys are not concatenated ambiguously.
  EXPECT_NE(lease_set_digest({"ab", "c"}), lease_set_digest({"a", "bc"}));
  EXPECT_EQ(lease_set_digest({}), lease_set_digest(std::vector<std::string>{}));
  EXPECT_EQ(lease_set_digest({}).substr(0, 2), "0:");
}

}  // namespace
}  // namespace kcl::leases
