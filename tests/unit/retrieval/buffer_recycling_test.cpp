// The buffers of a GetRecords answer go back to their recyclers once nothing points into
// them, and the next answer is received and deaggregated into them: the body when the last
// record made from it is gone, the records vector when its batch is destroyed. Records
// copied out of a batch keep their body (and so their bytes) alive.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "aws/base64.h"
#include "aws/http_transport.h"
#include "kinesis/kinesis_client.h"
#include "retrieval/records_source.h"
#include "retrieval/resume.h"

namespace kcl::retrieval {
namespace {

// 4,000 records: a records vector of 4,000 * sizeof(Record) and a body of about 600 KB,
// both above the recyclers' minimum.
constexpr int kRecords = 4000;

std::string get_records_body(int generation) {
  std::string json = "{\"Records\":[";
  for (int i = 0; i < kRecords; ++i) {
    char seq[64];
    std::snprintf(seq, sizeof seq, "495903382714902566085596925383615710959215759891%08d", i);
    const std::string data = "gen " + std::to_string(generation) + " record " + std::to_string(i);
    if (i > 0) json += ',';
    json += "{\"SequenceNumber\":\"";
    json += seq;
    json += "\",\"ApproximateArrivalTimestamp\":1.7E9,\"Data\":\"" + aws::base64_encode(data) +
            "\",\"PartitionKey\":\"pk-" + std::to_string(i) + "\"}";
  }
  json += "],\"NextShardIterator\":\"it\",\"MillisBehindLatest\":0}";
  return json;
}

FetchedBatch batch_of(int generation) {
  kinesis::GetRecordsResult result;
  EXPECT_TRUE(
      kinesis::parse_get_records_response_in_place(get_records_body(generation), result).ok());
  FetchedBatch batch;
  bool resume_filter = false;
  fill_batch(result, "shardId-000000000001", StartPosition::trim_horizon(), resume_filter, batch);
  EXPECT_EQ(batch.records.size(), static_cast<std::size_t>(kRecords));
  return batch;
}

TEST(BufferRecyclingTest, ADestroyedBatchsRecordsVectorHoldsTheNextBatch) {
  auto& vectors = record_vector_recycler();
  vectors.trim();  // what earlier tests left
  const kcl::Record* memory = nullptr;
  {
    FetchedBatch first = batch_of(1);
    memory = first.records.data();
    FetchedBatch moved = std::move(first);  // a move hands the vector on, not back
    EXPECT_EQ(vectors.counts().kept_blocks, 0u);
  }
  EXPECT_EQ(vectors.counts().kept_blocks, 1u);

  FetchedBatch second = batch_of(2);
  EXPECT_EQ(second.records.data(), memory);
  EXPECT_EQ(vectors.counts().kept_blocks, 0u);
  EXPECT_EQ(second.records[17].data(), "gen 2 record 17");
  EXPECT_EQ(second.records[17].shard_id(), "shardId-000000000001");
  EXPECT_EQ(second.records.back().data(), "gen 2 record " + std::to_string(kRecords - 1));
}

TEST(BufferRecyclingTest, ABodyGoesBackOnlyWhenItsLastRecordIsGone) {
  auto& bodies = aws::response_body_recycler();
  bodies.trim();
  kcl::Record kept;
  {
    FetchedBatch batch = batch_of(3);
    kept = batch.records[1234];
  }
  EXPECT_EQ(bodies.counts().kept_blocks, 0u) << "a record copied out still points into it";
  EXPECT_EQ(kept.data(), "gen 3 record 1234");
  const char* body_memory = kept.sequence_number().data();

  kept = kcl::Record();
  ASSERT_EQ(bodies.counts().kept_blocks, 1u);
  // The transport takes its next large body from the recycler; so does this.
  std::string next = bodies.take(get_records_body(4).size() + aws::HttpResponse::kBodySlack);
  EXPECT_LE(next.data(), body_memory);
  EXPECT_GT(next.data() + next.capacity(), body_memory);
}

// The fetcher keeps one GetRecordsResult from call to call. Its batch's records must be all
// that keeps an answer's body: if the result held it too, each shard would keep its last body
// until its next answer arrived (an answer more per shard than the prefetch bound counts), and
// that next answer would be received into fresh memory rather than into the body it replaces.
TEST(BufferRecyclingTest, AResultReusedForTheNextCallLetsGoOfItsBody) {
  auto& bodies = aws::response_body_recycler();
  bodies.trim();
  kinesis::GetRecordsResult reused;
  std::weak_ptr<kinesis::RecordsBuffer> body;
  {
    ASSERT_TRUE(kinesis::parse_get_records_response_in_place(get_records_body(5), reused).ok());
    body = reused.buffer;
    FetchedBatch batch;
    bool resume_filter = false;
    fill_batch(reused, "shardId-000000000002", StartPosition::trim_horizon(), resume_filter, batch);
    ASSERT_EQ(batch.records.size(), static_cast<std::size_t>(kRecords));
    EXPECT_EQ(reused.buffer, nullptr);
    EXPECT_TRUE(reused.records.empty());
    EXPECT_FALSE(body.expired()) << "the batch's records point into it";
    EXPECT_EQ(batch.records[42].data(), "gen 5 record 42");
  }
  EXPECT_TRUE(body.expired()) << "the batch is gone; nothing else may keep its body";
  EXPECT_EQ(bodies.counts().kept_blocks, 1u);

  // An answer without records lets go of its (small) body too.
  ASSERT_TRUE(
      kinesis::parse_get_records_response_in_place(
          std::string("{\"Records\":[],\"NextShardIterator\":\"it\",\"MillisBehindLatest\":0}"),
          reused)
          .ok());
  body = reused.buffer;
  ASSERT_FALSE(body.expired());
  FetchedBatch empty;
  bool resume_filter = false;
  fill_batch(reused, "shardId-000000000002", StartPosition::trim_horizon(), resume_filter, empty);
  EXPECT_TRUE(empty.records.empty());
  EXPECT_TRUE(body.expired());
}

// Fan-out's source parses each event into a vector lent for that event only: a source keeps
// none between events (100 shards would otherwise hold up to 720 KB each,
// outside the prefetch bound), and the next answer, of any shard, reuses the same memory.
TEST(BufferRecyclingTest, TheParseVectorIsLentForOneAnswerAndThenReused) {
  auto& parsed = parsed_record_recycler();
  parsed.trim();
  std::vector<kinesis::KinesisRecord> first_source;
  const kinesis::KinesisRecord* memory = nullptr;
  {
    const ParsedRecordsLoan loan(first_source, 10000);
    ASSERT_GE(first_source.capacity(), 10000u);
    memory = first_source.data();
    first_source.emplace_back().partition_key = "pk";
  }
  EXPECT_EQ(first_source.capacity(), 0u) << "the source keeps nothing between answers";
  EXPECT_EQ(parsed.counts().kept_blocks, 1u);

  std::vector<kinesis::KinesisRecord> second_source;
  {
    const ParsedRecordsLoan loan(second_source, 9000);
    EXPECT_EQ(second_source.data(), memory);
    EXPECT_TRUE(second_source.empty());
    EXPECT_EQ(parsed.counts().kept_blocks, 0u);
  }
  EXPECT_EQ(parsed.counts().kept_blocks, 1u);
}

// The polling fetcher has each record go from the parser straight into the batch. The batch
// must be what the vector path gives (same records, same order, the shard id, the body let go
// of by the reused result), without a vector of parsed records in between.
TEST(BufferRecyclingTest, RecordsParsedStraightIntoABatchAreThoseOfTheVectorPath) {
  const FetchedBatch expected = batch_of(6);
  kinesis::GetRecordsResult reused;
  FetchedBatch batch;
  BatchBuilder builder(reused, "shardId-000000000001", batch, 10000);
  ASSERT_TRUE(
      kinesis::parse_get_records_response_in_place(get_records_body(6), reused, &builder).ok());
  EXPECT_TRUE(reused.records.empty()) << "no vector of parsed records";
  EXPECT_TRUE(builder.received_any());
  EXPECT_EQ(builder.last_sequence(), expected.records.back().sequence_number());
  std::weak_ptr<kinesis::RecordsBuffer> body = reused.buffer;
  bool resume_filter = false;
  builder.finish(reused, StartPosition::trim_horizon(), resume_filter);
  EXPECT_EQ(reused.buffer, nullptr);
  ASSERT_EQ(batch.records.size(), expected.records.size());
  for (std::size_t i = 0; i < batch.records.size(); ++i) {
    ASSERT_EQ(batch.records[i], expected.records[i]) << "at " << i;
  }
  EXPECT_EQ(batch.records[7].shard_id(), "shardId-000000000001");
  EXPECT_GT(batch.bytes, batch.records.size() * sizeof(kcl::Record));
  batch = FetchedBatch();
  EXPECT_TRUE(body.expired());
}

// An answer's size is known only at its end, so the batch starts with room for a full answer
// (from the recycler). A small answer must not keep that room while it waits to be processed
// (the prefetch bound counts it): it moves into a vector of its own size, and the large one
// goes back for the next answer.
TEST(BufferRecyclingTest, ASmallAnswerParsedIntoABatchGivesBackTheFullSizedVector) {
  auto& vectors = record_vector_recycler();
  vectors.trim();
  kinesis::GetRecordsResult reused;
  FetchedBatch batch;
  BatchBuilder builder(reused, "shardId-000000000003", batch, 10000);
  std::string body = get_records_body(7);
  // The first three records only.
  std::size_t cut = 0;
  for (int i = 0; i < 3; ++i) cut = body.find("\"},{", cut) + 2;
  body = body.substr(0, cut) + "],\"NextShardIterator\":\"it\",\"MillisBehindLatest\":0}";
  ASSERT_TRUE(kinesis::parse_get_records_response_in_place(std::move(body), reused, &builder).ok());
  ASSERT_EQ(batch.records.size(), 3u);
  EXPECT_GE(batch.records.capacity(), 10000u) << "room for a full answer while parsing";
  bool resume_filter = false;
  builder.finish(reused, StartPosition::trim_horizon(), resume_filter);
  ASSERT_EQ(batch.records.size(), 3u);
  EXPECT_LT(batch.records.capacity(), 10u);
  EXPECT_LT(batch.bytes, std::size_t{64} * 1024);
  EXPECT_EQ(vectors.counts().kept_blocks, 1u) << "the full-sized vector went back";
  EXPECT_EQ(batch.records[2].data(), "gen 7 record 2");
  EXPECT_EQ(batch.records[2].partition_key(), "pk-2");
}

}  // namespace
}  // namespace kcl::retrieval
