// Stream identifiers and multi-stream lease keys in the Java KCL's format.
#include "leases/stream_identifier.h"

#include <gtest/gtest.h>

namespace kcl::leases {
namespace {

TEST(StreamIdentifierTest, SerializesAndParsesTheJavaForm) {
  const StreamIdentifier id{"123456789012", "orders", 1700000000};
  EXPECT_EQ(id.serialize(), "123456789012:orders:1700000000");
  EXPECT_EQ(StreamIdentifier::parse("123456789012:orders:1700000000"), id);
  for (const char* bad : {"", "orders", "123:orders", "12a:orders:1", "1::2", "1:orders:0",
                          "1:orders:-5", "1:orders:x", ":orders:1"}) {
    EXPECT_EQ(StreamIdentifier::parse(bad), std::nullopt) << bad;
  }
}

TEST(StreamIdentifierTest, ALeaseTellsItsStreamAndShardByAttributeOrByKey) {
  Lease one;
  one.lease_key = "shardId-000000000007";
  EXPECT_EQ(lease_shard_id(one), "shardId-000000000007");
  EXPECT_EQ(lease_stream_identifier(one), "");
  EXPECT_EQ(lease_stream_name(one), "");

  Lease keyed;
  keyed.lease_key = multi_stream_lease_key("123456789012:orders:1700000000", "shardId-000000000003");
  EXPECT_EQ(keyed.lease_key, "123456789012:orders:1700000000:shardId-000000000003");
  EXPECT_EQ(lease_shard_id(keyed), "shardId-000000000003");
  EXPECT_EQ(lease_stream_identifier(keyed), "123456789012:orders:1700000000");
  EXPECT_EQ(lease_stream_name(keyed), "orders");

  Lease attributed = keyed;  // the attributes win where present
  attributed.stream_identifier = "123456789012:audit:1600000000";
  attributed.shard_id = "shardId-000000000009";
  EXPECT_EQ(lease_shard_id(attributed), "shardId-000000000009");
  EXPECT_EQ(lease_stream_name(attributed), "audit");
}

}  // namespace
}  // namespace kcl::leases
