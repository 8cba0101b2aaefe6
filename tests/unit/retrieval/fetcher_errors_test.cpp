// ShardFetcher errors and endings: expired iterators, deleted streams, non-retryable
// failures, malformed answers, end of shard.
#include <gtest/gtest.h>

#include "aws/base64.h"
#include "support/fetcher_fake_kinesis.h"

namespace kcl::retrieval {
namespace {

using namespace std::chrono_literals;
using testing::expect_all_in_order;
using testing::FakeKinesis;
using testing::FetcherHarness;
using testing::seq_number;

TEST(FetcherErrorsTest, ExpiredIteratorResumesAfterTheLastFetchedRecord) {
  FetcherHarness h;
  h.fake->add_records(500);
  RetrievalConfig cfg;
  cfg.max_records_per_call = 100;
  auto f = h.make(StartPosition::trim_horizon(), cfg);
  std::vector<kcl::Record> out;
  h.run(*f, out, 100, [&] { return out.size() >= 200; });
  ASSERT_EQ(out.size(), 200u);

  h.fake->expire_all_iterators();
  FetchStep s;
  do {
    h.advance_to(s);
    s = f->fetch_step();
  } while (s.outcome == FetchOutcome::kNotDue);
  EXPECT_EQ(s.outcome, FetchOutcome::kIteratorExpired);
  EXPECT_EQ(f->iterators_expired(), 1u);
  EXPECT_FALSE(f->finished());

  h.run(*f, out, 100, [&] { return out.size() >= 500; });
  expect_all_in_order(out, 500);

  const auto its = h.fake->calls_of("GetShardIterator");
  ASSERT_EQ(its.size(), 2u);
  EXPECT_EQ(its[1].body.at("ShardIteratorType"), "AFTER_SEQUENCE_NUMBER");
  EXPECT_EQ(its[1].body.at("StartingSequenceNumber"), seq_number(199));
  // The new iterator was asked for no sooner than min_call_interval after the failed call,
  // and GetRecords calls stay that far apart.
  const auto calls = h.fake->calls();
  for (std::size_t i = 1; i < calls.size(); ++i) {
    if (calls[i].operation == "GetShardIterator") {
      EXPECT_GE(calls[i].at - calls[i - 1].at, RetrievalConfig{}.min_call_interval);
    }
  }
  const auto pages = h.fake->calls_of("GetRecords");
  for (std::size_t i = 1; i < pages.size(); ++i)
    EXPECT_GE(pages[i].at - pages[i - 1].at, RetrievalConfig{}.min_call_interval);
}

TEST(FetcherErrorsTest, ExpiredIteratorBeforeAnyRecordRestartsFromTheStart) {
  FetcherHarness h;
  auto f = h.make(StartPosition::trim_horizon());
  std::vector<kcl::Record> out;
  h.run(*f, out, 3);  // iterator, then empty responses
  ASSERT_TRUE(out.empty());
  h.fake->expire_all_iterators();
  h.fake->add_records(3);
  h.run(*f, out, 20, [&] { return out.size() >= 3; });
  expect_all_in_order(out, 3);
  const auto its = h.fake->calls_of("GetShardIterator");
  ASSERT_EQ(its.size(), 2u);
  EXPECT_EQ(its[1].body.at("ShardIteratorType"), "TRIM_HORIZON");
}

TEST(FetcherErrorsTest, StreamDeletedIsTerminalAndNamesStreamAndShard) {
  FetcherHarness h;
  h.fake->add_records(300);
  RetrievalConfig cfg;
  cfg.max_records_per_call = 100;
  auto f = h.make(StartPosition::trim_horizon(), cfg);
  std::vector<kcl::Record> ignored;
  // Fetch two pages without taking them.
  h.run(
      *f, ignored, 100, [&] { return f->queued_records() >= 200; }, /*consume=*/false);
  ASSERT_EQ(f->queued_records(), 200u);

  h.fake->delete_stream();
  FetchStep s;
  do {
    h.advance_to(s);
    s = f->fetch_step();
  } while (s.outcome == FetchOutcome::kNotDue);
  ASSERT_EQ(s.outcome, FetchOutcome::kFailed);
  EXPECT_EQ(s.next_step_at, Clock::MonoTime::max());
  EXPECT_TRUE(f->finished());
  EXPECT_FALSE(f->shard_ended());
  const Status err = f->terminal_error();
  EXPECT_EQ(err.code(), StatusCode::kNotFound);
  EXPECT_NE(err.message().find("stream orders was deleted or shard shardId-000000000007 no "
                               "longer exists"),
            std::string::npos)
      << err;
  EXPECT_NE(err.message().find("under account"), std::string::npos) << "keeps the cause: " << err;
  ASSERT_TRUE(err.aws().has_value());
  EXPECT_EQ(err.aws()->error_type, "ResourceNotFoundException");

  // Nothing more happens, and what was fetched can still be taken.
  const std::size_t calls = h.fake->call_count();
  for (int i = 0; i < 5; ++i) {
    h.clock.advance(10s);
    FetchStep again = f->fetch_step();
    EXPECT_EQ(again.outcome, FetchOutcome::kFinished);
    EXPECT_EQ(again.next_step_at, Clock::MonoTime::max());
  }
  EXPECT_EQ(h.fake->call_count(), calls);
  EXPECT_FALSE(f->drained());
  std::size_t taken = 0;
  while (auto b = f->take_batch()) taken += b->records.size();
  EXPECT_EQ(taken, 200u);
  EXPECT_TRUE(f->drained());
}

TEST(FetcherErrorsTest, ShardGoneAtGetShardIteratorIsTerminal) {
  FetcherHarness h;
  h.fake->delete_stream();
  auto f = h.make(StartPosition::latest());
  FetchStep s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kFailed);
  EXPECT_EQ(f->terminal_error().code(), StatusCode::kNotFound);
  EXPECT_NE(f->terminal_error().message().find("stream orders was deleted or shard "
                                               "shardId-000000000007 no longer exists"),
            std::string::npos);
  EXPECT_TRUE(f->drained());
}

// A closed shard whose records all passed the stream's retention no longer exists while its
// stream does: its reading ends at its end (as the Java KCL's), so that its children start,
// rather than as a deleted stream (which stops a one-stream worker).
TEST(FetcherErrorsTest, AShardGoneWhileItsStreamRemainsEndsAtItsEnd) {
  FetcherHarness h;
  h.fake->expire_shard();
  auto f = h.make(StartPosition::after_checkpoint(seq_number(3)));
  FetchStep s = f->fetch_step();
  EXPECT_TRUE(f->terminal_error().ok()) << f->terminal_error();
  EXPECT_TRUE(f->shard_ended());
  auto b = f->take_batch();
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->shard_end);
  EXPECT_TRUE(b->records.empty());
  EXPECT_NE(s.outcome, FetchOutcome::kFailed);
}

// The same with a role that may not describe the stream (a one-stream worker needs
// kinesis:DescribeStreamSummary nowhere else): the shard still ends at its end, as the Java
// KCL ends it on ResourceNotFound, instead of the worker stopping for a "deleted" stream.
TEST(FetcherErrorsTest, AShardGoneEndsAtItsEndWhenTheStreamMayNotBeDescribed) {
  FetcherHarness h;
  h.fake->expire_shard();
  h.fake->fail_next("DescribeStreamSummary",
                    Status(StatusCode::kPermissionDenied,
                           "User is not authorized to perform: kinesis:DescribeStreamSummary"));
  auto f = h.make(StartPosition::after_checkpoint(seq_number(3)));
  FetchStep s = f->fetch_step();
  EXPECT_NE(s.outcome, FetchOutcome::kFailed);
  EXPECT_TRUE(f->terminal_error().ok()) << f->terminal_error();
  EXPECT_TRUE(f->shard_ended());
  auto b = f->take_batch();
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->shard_end);
}

TEST(FetcherErrorsTest, NonRetryableErrorIsTerminalWithContext) {
  FetcherHarness h;
  h.fake->add_records(10);
  auto f = h.make(StartPosition::trim_horizon());
  h.fake->fail_next("GetRecords",
                    Status(StatusCode::kPermissionDenied, "User is not authorized to GetRecords"));
  FetchStep s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kGotIterator);
  h.advance_to(s);
  s = f->fetch_step();
  ASSERT_EQ(s.outcome, FetchOutcome::kFailed);
  const Status err = f->terminal_error();
  EXPECT_EQ(err.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(err.message().find("orders"), std::string::npos) << err;
  EXPECT_NE(err.message().find("shardId-000000000007"), std::string::npos) << err;
  EXPECT_NE(err.message().find("not authorized"), std::string::npos) << err;
  EXPECT_EQ(f->fetch_step().outcome, FetchOutcome::kFinished);
  EXPECT_EQ(h.fake->call_count(), 2u);
}

TEST(FetcherErrorsTest, AMalformedResponseIsRetriedWithTheSameIterator) {
  FetcherHarness h;
  h.fake->add_records(3);
  auto f = h.make(StartPosition::trim_horizon());
  FetchStep s = f->fetch_step();  // iterator
  ASSERT_EQ(s.outcome, FetchOutcome::kGotIterator);
  h.advance_to(s);
  h.fake->reply_next("GetRecords", R"({"Records":[{"SequenceNumber":"1")");  // cut short
  s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kRetrying);
  EXPECT_FALSE(f->finished());
  h.advance_to(s);
  s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kRecords);
  auto batch = f->take_batch();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->records.size(), 3u);  // nothing lost, nothing repeated
}

// The parser hands records to the batch as it reads them: an answer found broken after two
// whole records must deliver neither (nor count them as fetched), and the retry with the same
// iterator delivers each record once.
TEST(FetcherErrorsTest, AnAnswerFoundBrokenAfterWholeRecordsDeliversNoneOfThem) {
  FetcherHarness h;
  h.fake->add_records(3);
  auto f = h.make(StartPosition::trim_horizon());
  FetchStep s = f->fetch_step();  // iterator
  ASSERT_EQ(s.outcome, FetchOutcome::kGotIterator);
  h.advance_to(s);
  std::string broken = R"({"Records":[)";
  for (std::size_t i = 0; i < 2; ++i) {
    broken += R"({"SequenceNumber":")" + seq_number(i) +
              R"(","ApproximateArrivalTimestamp":1.7E9,"Data":")" +
              aws::base64_encode("record-" + std::to_string(i)) + R"(","PartitionKey":"pk"},)";
  }
  // A third record without Data: well-formed JSON (so the parser reads the first two
  // records before it finds the fault), but not an answer.
  broken += R"({"SequenceNumber":")" + seq_number(2) +
            R"(","PartitionKey":"pk"}],"NextShardIterator":"next","MillisBehindLatest":0})";
  h.fake->reply_next("GetRecords", broken);
  s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kRetrying);
  EXPECT_FALSE(f->take_batch().has_value());
  h.advance_to(s);
  s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kRecords);
  auto batch = f->take_batch();
  ASSERT_TRUE(batch.has_value());
  expect_all_in_order(batch->records, 3);  // nothing lost, nothing repeated
  const auto calls = h.fake->calls_of("GetRecords");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].body.at("ShardIterator"), calls[1].body.at("ShardIterator"));
}

TEST(FetcherErrorsTest, MalformedResponsesInARowAreTerminal) {
  {
    FetcherHarness h;
    auto f = h.make(StartPosition::trim_horizon());
    for (int i = 0; i < 10; ++i) h.fake->reply_next("GetShardIterator", "[1,2]");
    FetchStep s{};
    for (std::size_t i = 0; i < 10 && !f->finished(); ++i) {
      s = f->fetch_step();
      h.advance_to(s);
    }
    EXPECT_EQ(s.outcome, FetchOutcome::kFailed);
    EXPECT_EQ(f->terminal_error().code(), StatusCode::kInternal);
  }
  {
    FetcherHarness h;
    auto f = h.make(StartPosition::trim_horizon());
    FetchStep s = f->fetch_step();
    h.advance_to(s);
    for (int i = 0; i < 10; ++i) {
      h.fake->reply_next("GetRecords", R"({"NextShardIterator":"x","MillisBehindLatest":0})");
    }
    for (std::size_t i = 0; i < 10 && !f->finished(); ++i) {
      s = f->fetch_step();
      h.advance_to(s);
    }
    EXPECT_EQ(s.outcome, FetchOutcome::kFailed);
    EXPECT_EQ(f->terminal_error().code(), StatusCode::kInternal);
    EXPECT_NE(f->terminal_error().message().find("shardId-000000000007"), std::string::npos);
  }
}

TEST(FetcherErrorsTest, ThrottlesDoNotCountTowardsTheMalformedLimit) {
  FetcherHarness h;
  h.fake->add_records(3);
  auto f = h.make(StartPosition::trim_horizon());
  FetchStep s = f->fetch_step();  // iterator
  h.advance_to(s);
  // A throttling storm, then one truncated body: still transient, nothing given up.
  h.fake->fail_next("GetRecords", FakeKinesis::throttled(), 8);
  for (int i = 0; i < 8; ++i) {
    s = f->fetch_step();
    ASSERT_EQ(s.outcome, FetchOutcome::kRetrying) << i;
    h.advance_to(s);
  }
  h.fake->reply_next("GetRecords", R"({"Records":[{"SequenceNumber":"1")");
  s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kRetrying);
  EXPECT_FALSE(f->finished()) << f->terminal_error();
  h.advance_to(s);
  s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kRecords);
}

TEST(FetcherErrorsTest, EndOfShardDeliversAFinalBatchWithChildShards) {
  FetcherHarness h;
  h.fake->add_records(150);
  h.fake->close_shard(nlohmann::json::parse(R"([
    {"ShardId":"shardId-000000000008","ParentShards":["shardId-000000000007"],
     "HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"170141183460469231731687303715884105727"}},
    {"ShardId":"shardId-000000000009","ParentShards":["shardId-000000000007"],
     "HashKeyRange":{"StartingHashKey":"170141183460469231731687303715884105728",
                     "EndingHashKey":"340282366920938463463374607431768211455"}}])"));
  RetrievalConfig cfg;
  cfg.max_records_per_call = 100;
  auto f = h.make(StartPosition::trim_horizon(), cfg);

  std::vector<FetchedBatch> batches;
  FetchStep s;
  for (int i = 0; i < 20 && !f->finished(); ++i) {
    h.advance_to(s);
    s = f->fetch_step();
    while (auto b = f->take_batch()) batches.push_back(std::move(*b));
  }
  ASSERT_TRUE(f->finished());
  EXPECT_TRUE(f->shard_ended());
  EXPECT_TRUE(f->terminal_error().ok());
  EXPECT_EQ(s.outcome, FetchOutcome::kShardEnd);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].records.size(), 100u);
  EXPECT_EQ(batches[1].records.size(), 50u);
  EXPECT_FALSE(batches[0].shard_end);
  EXPECT_FALSE(batches[1].shard_end);
  const FetchedBatch& last = batches[2];
  EXPECT_TRUE(last.shard_end);
  EXPECT_TRUE(last.records.empty());
  ASSERT_EQ(last.child_shards.size(), 2u);
  EXPECT_EQ(last.child_shards[0].shard_id, "shardId-000000000008");
  EXPECT_EQ(last.child_shards[1].parent_shards, std::vector<std::string>{"shardId-000000000007"});

  const std::size_t calls = h.fake->call_count();
  h.clock.advance(1h);
  EXPECT_EQ(f->fetch_step().outcome, FetchOutcome::kFinished);
  EXPECT_EQ(h.fake->call_count(), calls);
  EXPECT_TRUE(f->drained());
}

TEST(FetcherErrorsTest, EndOfShardInTheSameResponseAsTheLastRecords) {
  FetcherHarness h;
  h.fake->add_records(30);
  h.fake->close_shard();
  h.fake->end_with_last_records(true);
  auto f = h.make(StartPosition::trim_horizon());
  FetchStep s = f->fetch_step();
  h.advance_to(s);
  s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kShardEnd);
  EXPECT_EQ(s.records_queued, 30u);
  auto b = f->take_batch();
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->shard_end);
  EXPECT_EQ(b->records.size(), 30u);
  EXPECT_TRUE(b->child_shards.empty());
  EXPECT_FALSE(f->take_batch().has_value());
}

// An answer with neither NextShardIterator nor ChildShards for a shard ListShards shows open
// (a proxy dropped the iterator): it was taken for the shard's end, so the lease got SHARD_END
// on a shard still being written and nothing read it again. Now its records are delivered and
// the shard is read on after them; a real end (the shard closed) still ends it.
TEST(FetcherErrorsTest, AnAnswerEndingAnOpenShardWithoutChildrenIsNotItsEnd) {
  FetcherHarness h;
  h.fake->answer_list_shards(true);
  h.fake->add_records(3, "a");
  h.fake->drop_next_iterator_once();
  auto f = h.make(StartPosition::trim_horizon());
  std::vector<kcl::Record> out;
  h.run(*f, out, 20, [&] { return out.size() >= 3; });
  ASSERT_EQ(out.size(), 3u);
  EXPECT_FALSE(f->finished()) << f->terminal_error();
  EXPECT_FALSE(f->shard_ended());
  h.fake->add_records(2, "b");
  h.run(*f, out, 40, [&] { return out.size() >= 5; });
  ASSERT_EQ(out.size(), 5u) << "the shard was not read on";
  EXPECT_EQ(out[3].data(), "b3");
  EXPECT_FALSE(f->shard_ended());
  EXPECT_EQ(h.fake->calls_of("ListShards").size(), 1u);
  // A real end, without children named (as kinesalite ends a shard): ListShards shows it
  // closed, and it ends.
  h.fake->close_shard();
  h.run(*f, out, 40);
  EXPECT_TRUE(f->shard_ended());
  EXPECT_EQ(out.size(), 5u);
}

// The same for a GetShardIterator answer without an iterator: the end of a closed shard, but
// not of one ListShards shows open.
TEST(FetcherErrorsTest, NoIteratorForAnOpenShardIsNotItsEnd) {
  FetcherHarness h;
  h.fake->answer_list_shards(true);
  h.fake->add_records(2, "a");
  h.fake->reply_next("GetShardIterator", R"({})");
  auto f = h.make(StartPosition::trim_horizon());
  std::vector<kcl::Record> out;
  h.run(*f, out, 20, [&] { return out.size() >= 2; });
  EXPECT_EQ(out.size(), 2u);
  EXPECT_FALSE(f->shard_ended());
  EXPECT_FALSE(f->finished()) << f->terminal_error();
}

// Answers that keep ending an open shard (a proxy that always drops the iterator): the
// source fails after 5 in a row, naming why, instead of reading and listing for ever.
TEST(FetcherErrorsTest, AnOpenShardEndedAgainAndAgainFailsTheSource) {
  FetcherHarness h;
  h.fake->answer_list_shards(true);
  h.fake->add_records(1, "a");
  auto f = h.make(StartPosition::trim_horizon());
  std::vector<kcl::Record> out;
  for (std::size_t i = 0; i < 10 && !f->finished(); ++i) {
    h.fake->drop_next_iterator_once();
    h.run(*f, out, 10, [&] { return f->finished() || h.fake->calls_of("ListShards").size() > i; });
  }
  ASSERT_TRUE(f->finished());
  EXPECT_FALSE(f->shard_ended());
  EXPECT_NE(f->terminal_error().message().find("shows the shard open"), std::string::npos)
      << f->terminal_error();
  EXPECT_EQ(h.fake->calls_of("ListShards").size(), 5u);
}

TEST(FetcherErrorsTest, NullIteratorFromGetShardIteratorIsTheEndOfAClosedShard) {
  FetcherHarness h;
  h.fake->reply_next("GetShardIterator", R"({"ShardIterator":null})");
  auto f = h.make(StartPosition::after_checkpoint(seq_number(3)));
  FetchStep s = f->fetch_step();
  EXPECT_EQ(s.outcome, FetchOutcome::kShardEnd);
  EXPECT_TRUE(f->shard_ended());
  auto b = f->take_batch();
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->shard_end);
  EXPECT_TRUE(b->records.empty());
}

}  // namespace
}  // namespace kcl::retrieval
