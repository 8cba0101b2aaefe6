// kcl::Record: views that stay valid as long as the record (or a copy) lives; setters copy on
// write; a moved-from record is empty; owned() drops the shared bytes.
#include "kcl/record.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

namespace kcl {
namespace {

Record::Fields sample() {
  Record::Fields f;
  f.shard_id = "shardId-000000000001";
  f.sequence_number = "49590338271490256608559692538361571095921575989136588898";
  f.sub_sequence_number = 3;
  f.aggregated = true;
  f.partition_key = "a partition key longer than the small-string buffer";
  f.explicit_hash_key = "42";
  f.approximate_arrival_timestamp =
      std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000000123));
  f.data = std::string(200, 'd');
  return f;
}

TEST(RecordTest, FieldsRoundTripAndAnEmptyRecordIsEmpty) {
  const Record r(sample());
  const Record::Fields f = r.fields();
  EXPECT_EQ(f.shard_id, sample().shard_id);
  EXPECT_EQ(r.sequence_number(), sample().sequence_number);
  EXPECT_EQ(r.sub_sequence_number(), 3u);
  EXPECT_TRUE(r.aggregated());
  EXPECT_EQ(r.partition_key(), sample().partition_key);
  EXPECT_EQ(r.explicit_hash_key(), "42");
  EXPECT_EQ(r.approximate_arrival_timestamp(), sample().approximate_arrival_timestamp);
  EXPECT_EQ(r.data(), sample().data);
  const Record empty;
  EXPECT_TRUE(empty.data().empty());
  EXPECT_TRUE(empty.sequence_number().empty());
  EXPECT_EQ(r, Record(sample()));
  EXPECT_FALSE(r == empty);
}

TEST(RecordTest, ACopyOutlivesTheOriginalAndItsOwner) {
  Record copy;
  {
    auto bytes = std::make_shared<std::string>("shardId-7|12|pk|payload");
    const std::string_view all = *bytes;
    Record::Views v;
    v.shard_id = all.substr(0, 9);
    v.sequence_number = all.substr(10, 2);
    v.partition_key = all.substr(13, 2);
    v.data = all.substr(16);
    Record original(bytes, v);
    EXPECT_EQ(original.data().data(), bytes->data() + 16) << "zero copy";
    copy = original;
  }
  EXPECT_EQ(copy.shard_id(), "shardId-7");
  EXPECT_EQ(copy.sequence_number(), "12");
  EXPECT_EQ(copy.partition_key(), "pk");
  EXPECT_EQ(copy.data(), "payload");
}

TEST(RecordTest, SettersCopyOnWriteAndLeaveCopiesAlone) {
  Record a(sample());
  Record b = a;
  b.set_data("changed");
  b.set_sequence_number(b.sequence_number().substr(0, 4));  // from its own bytes
  EXPECT_EQ(a.data(), sample().data);
  EXPECT_EQ(a.sequence_number(), sample().sequence_number);
  EXPECT_EQ(b.data(), "changed");
  EXPECT_EQ(b.sequence_number(), "4959");
  EXPECT_EQ(b.partition_key(), sample().partition_key);

  // A zero-copy record whose owner only it holds: the setter reads the old bytes first.
  auto bytes = std::make_shared<std::string>("abcdef");
  Record::Views v;
  v.data = *bytes;
  Record z(std::move(bytes), v);
  z.set_data(z.data().substr(2));
  EXPECT_EQ(z.data(), "cdef");
}

TEST(RecordTest, AMovedFromRecordIsEmpty) {
  Record a(sample());
  Record b = std::move(a);
  EXPECT_EQ(b.data(), sample().data);
  EXPECT_TRUE(a.data().empty());  // NOLINT(bugprone-use-after-move): specified as empty
  EXPECT_TRUE(a.shard_id().empty());
  Record c;
  c = std::move(b);
  EXPECT_EQ(c.partition_key(), sample().partition_key);
  EXPECT_TRUE(b.partition_key().empty());  // NOLINT(bugprone-use-after-move)
}

TEST(RecordTest, OwnedHoldsItsOwnBytes) {
  auto bytes = std::make_shared<std::string>(1 << 20, 'x');
  Record::Views v;
  v.data = std::string_view(*bytes).substr(0, 10);
  Record r(bytes, v);
  const Record mine = r.owned();
  EXPECT_EQ(bytes.use_count(), 2) << "owned() does not hold the megabyte";
  EXPECT_EQ(mine.data(), std::string(10, 'x'));
  EXPECT_NE(mine.data().data(), bytes->data());
}

}  // namespace
}  // namespace kcl
