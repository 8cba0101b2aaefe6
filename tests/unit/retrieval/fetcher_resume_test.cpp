// ShardFetcher start positions: resuming after plain and KPL-aggregated checkpoints,
// sequence-number order, LATEST, AT_TIMESTAMP, deaggregation and corrupt aggregates.
#include <gtest/gtest.h>

#include "support/fetcher_fake_kinesis.h"
#include "support/kpl_builder.h"

namespace kcl::retrieval {
namespace {

using namespace std::chrono_literals;
using testing::FetcherHarness;
using testing::seq_number;

// (data, sub-sequence) of what was delivered, for compact comparisons.
std::vector<std::pair<std::string, std::uint64_t>> delivered(
    const std::vector<kcl::Record>& records) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (const auto& r : records) out.emplace_back(r.data(), r.sub_sequence_number());
  return out;
}

std::vector<kcl::Record> read_all(FetcherHarness& h, ShardFetcher& f, std::size_t steps = 20) {
  std::vector<kcl::Record> out;
  h.run(f, out, steps);
  return out;
}

TEST(FetcherResumeTest, PlainCheckpointResumesAtAndDropsTheCheckpointedRecord) {
  FetcherHarness h;
  h.fake->add_records(10);
  auto f = h.make(StartPosition::after_checkpoint(seq_number(4), 0));
  auto out = read_all(h, *f);
  ASSERT_EQ(out.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(out[i].sequence_number(), seq_number(5 + i));
  EXPECT_EQ(f->records_skipped_by_checkpoint(), 1u);
  const auto its = h.fake->calls_of("GetShardIterator");
  ASSERT_EQ(its.size(), 1u);
  EXPECT_EQ(its[0].body.at("ShardIteratorType"), "AT_SEQUENCE_NUMBER");
  EXPECT_EQ(its[0].body.at("StartingSequenceNumber"), seq_number(4));
}

class AggregateCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h.fake->add_record("plain-0");  // seq_number(0)
    std::vector<kcl::testing::SubRecord> subs;
    for (int i = 0; i < 5; ++i) {
      subs.push_back(
          {"user-pk-" + std::to_string(i), std::nullopt, "sub-" + std::to_string(i), {}});
    }
    h.fake->add_record(kcl::testing::build_aggregate(subs), "agg-pk");  // seq_number(1)
    h.fake->add_record("plain-2");                                      // seq_number(2)
  }
  std::vector<std::pair<std::string, std::uint64_t>> resume(std::string seq, std::uint64_t sub) {
    auto f = h.make(StartPosition::after_checkpoint(std::move(seq), sub));
    auto out = read_all(h, *f);
    for (const auto& r : out) EXPECT_EQ(r.shard_id(), testing::kShard);
    return delivered(out);
  }
  FetcherHarness h;
};

using Delivered = std::vector<std::pair<std::string, std::uint64_t>>;

TEST_F(AggregateCheckpointTest, FromTheStartEverySubRecordIsDelivered) {
  auto f = h.make(StartPosition::trim_horizon());
  auto out = read_all(h, *f);
  EXPECT_EQ(delivered(out), (Delivered{{"plain-0", 0},
                                       {"sub-0", 0},
                                       {"sub-1", 1},
                                       {"sub-2", 2},
                                       {"sub-3", 3},
                                       {"sub-4", 4},
                                       {"plain-2", 0}}));
  ASSERT_EQ(out.size(), 7u);
  EXPECT_TRUE(out[1].aggregated());
  EXPECT_EQ(out[1].partition_key(), "user-pk-0");
  EXPECT_EQ(out[3].sequence_number(), seq_number(1));
  EXPECT_EQ(f->corrupt_aggregates(), 0u);
}

TEST_F(AggregateCheckpointTest, MidAggregateKeepsOnlyLaterSubRecords) {
  EXPECT_EQ(resume(seq_number(1), 2), (Delivered{{"sub-3", 3}, {"sub-4", 4}, {"plain-2", 0}}));
}

TEST_F(AggregateCheckpointTest, SubRecordZeroDoesNotLoseTheRestOfTheAggregate) {
  // The case AFTER_SEQUENCE_NUMBER would get wrong.
  EXPECT_EQ(resume(seq_number(1), 0),
            (Delivered{{"sub-1", 1}, {"sub-2", 2}, {"sub-3", 3}, {"sub-4", 4}, {"plain-2", 0}}));
}

TEST_F(AggregateCheckpointTest, LastSubRecordResumesAtTheNextRecord) {
  EXPECT_EQ(resume(seq_number(1), 4), (Delivered{{"plain-2", 0}}));
}

TEST_F(AggregateCheckpointTest, PlainCheckpointBeforeAnAggregate) {
  EXPECT_EQ(
      resume(seq_number(0), 0),
      (Delivered{
          {"sub-0", 0}, {"sub-1", 1}, {"sub-2", 2}, {"sub-3", 3}, {"sub-4", 4}, {"plain-2", 0}}));
}

TEST(FetcherResumeTest, SequenceNumbersCompareAsNumbersNotText) {
  for (const auto& [checkpoint, expected] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"9", {"10", "11", "100"}}, {"10", {"11", "100"}}, {"99", {"100"}}}) {
    FetcherHarness h;
    for (const char* s : {"8", "9", "10", "11", "100"}) h.fake->add_record_with_seq(s, s);
    auto f = h.make(StartPosition::after_checkpoint(checkpoint));
    auto out = read_all(h, *f);
    std::vector<std::string> got;
    for (const auto& r : out) got.emplace_back(r.sequence_number());
    EXPECT_EQ(got, expected) << "checkpoint " << checkpoint;
  }
}

TEST(FetcherResumeTest, FilterSurvivesAnIteratorThatExpiredBeforeAnyRecord) {
  FetcherHarness h;
  h.fake->add_records(6);
  auto f = h.make(StartPosition::after_checkpoint(seq_number(2)));
  FetchStep s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kGotIterator);
  h.fake->expire_all_iterators();
  h.advance_to(s);
  EXPECT_EQ(f->fetch_step().outcome, FetchOutcome::kIteratorExpired);
  auto out = read_all(h, *f);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].sequence_number(), seq_number(3));
  const auto its = h.fake->calls_of("GetShardIterator");
  ASSERT_EQ(its.size(), 2u);
  EXPECT_EQ(its[1].body.at("ShardIteratorType"), "AT_SEQUENCE_NUMBER");
  EXPECT_EQ(its[1].body.at("StartingSequenceNumber"), seq_number(2));
}

TEST(FetcherResumeTest, CorruptAggregateIsCountedAndDeliveredAsItCame) {
  FetcherHarness h;
  const std::string bad =
      kcl::testing::with_bad_md5(kcl::testing::build_aggregate({{"k", std::nullopt, "v", {}}}));
  h.fake->add_record("before");
  h.fake->add_record(bad, "outer");
  h.fake->add_record("after");
  auto f = h.make(StartPosition::trim_horizon());
  auto out = read_all(h, *f);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].data(), bad);
  EXPECT_EQ(out[1].partition_key(), "outer");
  EXPECT_FALSE(out[1].aggregated());
  EXPECT_EQ(f->corrupt_aggregates(), 1u);
}

TEST(FetcherResumeTest, LatestReadsOnlyWhatComesAfterTheIterator) {
  FetcherHarness h;
  h.fake->add_records(5, "old-");
  auto f = h.make(StartPosition::latest());
  FetchStep s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kGotIterator);
  EXPECT_EQ(h.fake->calls()[0].body.at("ShardIteratorType"), "LATEST");
  h.fake->add_record("new-1");
  h.fake->add_record("new-2");
  auto out = read_all(h, *f);
  EXPECT_EQ(delivered(out), (Delivered{{"new-1", 0}, {"new-2", 0}}));
}

TEST(FetcherResumeTest, AtTimestampSendsSecondsAndStartsThere) {
  FetcherHarness h;
  h.fake->add_records(3, "early-");
  h.clock.advance(10s);
  const auto t = h.clock.wall_now();
  h.clock.advance(1s);
  h.fake->add_record("late-a");
  h.fake->add_record("late-b");
  auto f = h.make(StartPosition::at_timestamp(t));
  auto out = read_all(h, *f);
  EXPECT_EQ(delivered(out), (Delivered{{"late-a", 0}, {"late-b", 0}}));
  const auto its = h.fake->calls_of("GetShardIterator");
  ASSERT_EQ(its.size(), 1u);
  EXPECT_EQ(its[0].body.at("ShardIteratorType"), "AT_TIMESTAMP");
  const double secs = its[0].body.at("Timestamp").get<double>();
  const double expected =
      static_cast<double>(
          std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count()) /
      1000.0;
  EXPECT_DOUBLE_EQ(secs, expected);
}

TEST(FetcherResumeTest, InvalidCheckpointOrConfigEndsTheFetcherWithoutCalls) {
  {
    FetcherHarness h;
    auto f = h.make(StartPosition::after_checkpoint("SHARD_END"));
    EXPECT_EQ(f->fetch_step().outcome, FetchOutcome::kFailed);
    EXPECT_EQ(f->terminal_error().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(f->terminal_error().message().find("SHARD_END"), std::string::npos);
    EXPECT_EQ(h.fake->call_count(), 0u);
  }
  {
    FetcherHarness h;
    RetrievalConfig cfg;
    cfg.max_records_per_call = 0;
    cfg.throttle_backoff_max = 1ms;
    auto f = h.make(StartPosition::trim_horizon(), cfg);
    EXPECT_EQ(f->fetch_step().outcome, FetchOutcome::kFailed);
    const Status err = f->terminal_error();
    EXPECT_EQ(err.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(err.message().find("max_records_per_call"), std::string::npos) << err;
    EXPECT_NE(err.message().find("throttle_backoff_max"), std::string::npos) << err;
    EXPECT_NE(err.message().find("orders"), std::string::npos) << err;
    EXPECT_EQ(h.fake->call_count(), 0u);
  }
}

TEST(FetcherResumeTest, StartPositionToString) {
  EXPECT_EQ(StartPosition::trim_horizon().to_string(), "TRIM_HORIZON");
  EXPECT_EQ(StartPosition::latest().to_string(), "LATEST");
  EXPECT_EQ(StartPosition::after_checkpoint("123", 4).to_string(), "AFTER 123/4");
  EXPECT_EQ(StartPosition::at_timestamp(std::chrono::system_clock::time_point(1500ms)).to_string(),
            "AT_TIMESTAMP 1500");
}

}  // namespace
}  // namespace kcl::retrieval
