#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "retrieval/kpl_deaggregator.h"
#include "support/kpl_builder.h"

namespace kcl::retrieval {
namespace {

namespace t = kcl::testing;

kcl::Record rec(std::string seq, std::uint64_t sub, bool aggregated = true) {
  kcl::Record r;
  r.set_sequence_number(std::move(seq));
  r.set_sub_sequence_number(sub);
  r.set_aggregated(aggregated);
  return r;
}

TEST(KplResumeTest, CompareSequenceNumbersByLengthThenDigits) {
  EXPECT_EQ(compare_sequence_numbers("1", "1"), 0);
  EXPECT_LT(compare_sequence_numbers("9", "10"), 0);  // lexicographic alone would say ">"
  EXPECT_GT(compare_sequence_numbers("10", "9"), 0);
  EXPECT_LT(compare_sequence_numbers("123", "124"), 0);
  EXPECT_EQ(compare_sequence_numbers("007", "7"), 0);  // leading zeros ignored
  EXPECT_EQ(compare_sequence_numbers("0", "000"), 0);
  EXPECT_LT(compare_sequence_numbers("", "1"), 0);
  // Real 56-digit Kinesis sequence numbers, and 2^128-1 vs 2^128.
  const std::string a = "49590338271490256608559692538361571095921575989136588898";
  const std::string b = "49590338271490256608559692540925702759324208523137515618";
  EXPECT_LT(compare_sequence_numbers(a, b), 0);
  EXPECT_GT(compare_sequence_numbers(b, a), 0);
  EXPECT_LT(compare_sequence_numbers("340282366920938463463374607431768211455",
                                     "340282366920938463463374607431768211456"),
            0);
  EXPECT_LT(compare_sequence_numbers("99999999999999999999999999999999999999",
                                     "340282366920938463463374607431768211455"),
            0);
}

TEST(KplResumeTest, AfterCheckpointComparesSequenceThenSubSequence) {
  const std::string cp = "2000";
  EXPECT_FALSE(after_checkpoint(rec("1999", 9), cp, 3));
  EXPECT_FALSE(after_checkpoint(rec("2000", 0), cp, 3));
  EXPECT_FALSE(after_checkpoint(rec("2000", 3), cp, 3));  // at the checkpoint: processed
  EXPECT_TRUE(after_checkpoint(rec("2000", 4), cp, 3));
  EXPECT_TRUE(after_checkpoint(rec("2001", 0), cp, 3));
  EXPECT_TRUE(after_checkpoint(rec("10000", 0), cp, 3));  // longer means larger
  // A plain record at the checkpoint's sequence number was processed.
  EXPECT_FALSE(after_checkpoint(rec("2000", 0, false), cp, 0));
  EXPECT_TRUE(after_checkpoint(rec("2000", 1), cp, 0));
}

// Resume AT_SEQUENCE_NUMBER 200 with checkpoint (200, 2): GetRecords returns the aggregate at
// 200 again and what follows; the filter leaves exactly what was not processed.
TEST(KplResumeTest, DropThroughCheckpointAfterResumingAtTheAggregate) {
  std::vector<t::SubRecord> subs;
  for (int i = 0; i < 5; ++i) subs.push_back({"pk" + std::to_string(i), std::nullopt, "d", {}});
  std::vector<kinesis::KinesisRecord> batch;
  batch.push_back(t::kinesis_record(t::build_aggregate(subs), "200"));
  batch.push_back(t::kinesis_record("plain", "201"));
  batch.push_back(t::kinesis_record(t::build_aggregate(subs), "1000"));
  std::vector<kcl::Record> out;
  const DeaggregationStats stats = deaggregate_all(std::move(batch), "shardId-0", out);
  ASSERT_EQ(stats.sub_records, 10u);
  ASSERT_EQ(out.size(), 11u);

  EXPECT_EQ(drop_through_checkpoint(out, "200", 2), 3u);
  ASSERT_EQ(out.size(), 8u);
  EXPECT_EQ(out[0].sequence_number(), "200");
  EXPECT_EQ(out[0].sub_sequence_number(), 3u);
  EXPECT_EQ(out[1].sub_sequence_number(), 4u);
  EXPECT_EQ(out[2].data(), "plain");
  EXPECT_EQ(out[3].sequence_number(), "1000");
  EXPECT_EQ(out[3].sub_sequence_number(), 0u);

  // Checkpoint at the last sub-record of 200: the whole aggregate goes.
  EXPECT_EQ(drop_through_checkpoint(out, "200", 4), 2u);
  EXPECT_EQ(out.front().data(), "plain");
  // Nothing below: nothing dropped.
  EXPECT_EQ(drop_through_checkpoint(out, "199", 99), 0u);
  EXPECT_EQ(out.size(), 6u);
  // Past everything: all dropped.
  EXPECT_EQ(drop_through_checkpoint(out, "1000", 4), 6u);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace kcl::retrieval
