// The leaseLoad text of a coordination entry: what is written reads back the same (to one
// decimal), shares prefixes so that 50 leases fit a write unit with the rest of the entry, and
// a damaged text is refused with where it went wrong.
#include "coordination/lease_load_text.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

namespace kcl::coordination {
namespace {

std::string shard(int n) {
  char text[32];
  std::snprintf(text, sizeof text, "shardId-%012d", n);
  return text;
}

TEST(LeaseLoadTextTest, ReadsBackWhatWasWrittenToOneDecimal) {
  const std::map<std::string, double> kbps = {{shard(1), 12.5},     {shard(2), 0.0},
                                              {shard(10), 1234.56}, {"a:b;c", 3.04},
                                              {"a:b;c,d", 7.0},     {"", 1.0}};
  const std::string text = encode_lease_load(kbps);
  auto back = decode_lease_load(text);
  ASSERT_TRUE(back.ok()) << back.status() << " in " << text;
  ASSERT_EQ(back->size(), kbps.size());
  for (const auto& [key, v] : kbps) {
    ASSERT_TRUE(back->count(key)) << key;
    EXPECT_NEAR(back->at(key), v, 0.05) << key;
  }
  EXPECT_EQ(encode_lease_load({}), "");
  EXPECT_TRUE(decode_lease_load("").value().empty());
}

TEST(LeaseLoadTextTest, FiftyShardLeasesTakeUnderTwelveBytesEach) {
  std::map<std::string, double> kbps;
  for (int i = 1000; i < 1050; ++i) kbps[shard(i)] = 12.3;
  const std::string text = encode_lease_load(kbps);
  EXPECT_LT(text.size(), 50u * 12u) << text;
  EXPECT_EQ(text.substr(0, 30), "0,20:shardId-00000000100012.3;");
  EXPECT_EQ(text.substr(30, 9), "19,1:112.");  // the next key shares 19 bytes
}

TEST(LeaseLoadTextTest, ADamagedTextIsRefusedWithItsPlace) {
  const std::string good = encode_lease_load({{shard(1), 1.5}, {shard(2), 2.0}});
  for (const std::string& bad :
       std::vector<std::string>{good.substr(0, good.size() - 1),  // no closing ';'
                                "0,5:abc",                        // key shorter than said
                                "x,1:a1;",                        // no count
                                "0,1:a-1;",                       // negative figure
                                "0,1:a1;9,1:b1;",                 // shares more than there is
                                "0,1:b1;0,1:a1;",                 // out of order
                                "0,1:anan;"}) {
    auto r = decode_lease_load(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("at byte"), std::string::npos) << r.status();
  }
}

}  // namespace
}  // namespace kcl::coordination
