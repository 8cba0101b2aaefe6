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

// An answer parsed as the polling fetcher does: each record straight into the batch (a full
// answer, for a fetcher that asks for kRecords a call).
FetchedBatch batch_of(int generation) {
  kinesis::GetRecordsResult result;
  FetchedBatch batch;
  BatchBuilder builder(result, "shardId-000000000001", batch, kRecords);
  EXPECT_TRUE(
      kinesis::parse_get_records_response_in_place(get_records_body(generation), result, &builder)
          .ok());
  bool resume_filter = false;
  builder.finish(result, StartPosition::trim_horizon(), resume_filter);
  EXPECT_EQ(batch.records.size(), static_cast<std::size_t>(kRecords));
  return batch;
}

// The same answer parsed into a vector of Kinesis records first, then deaggregated one by one:
// what a sink must give the same records as.
FetchedBatch vector_path_batch_of(int generation) {
  kinesis::GetRecordsResult result;
  EXPECT_TRUE(
      kinesis::parse_get_records_response_in_place(get_records_body(generation), result).ok());
  FetchedBatch batch;
  BatchBuilder builder(result, "shardId-000000000001", batch, result.records.size());
  for (const kinesis::KinesisRecord& record : result.records) builder.add(record);
  result.records.clear();
  bool resume_filter = false;
  builder.finish(result, StartPosition::trim_horizon(), resume_filter);
  return batch;
}

void expect_same_records(const FetchedBatch& batch, const FetchedBatch& expected) {
  ASSERT_EQ(batch.records.size(), expected.records.size());
  for (std::size_t i = 0; i < batch.records.size(); ++i) {
    ASSERT_EQ(batch.records[i], expected.records[i]) << "at " << i;
  }
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
    FetchedBatch batch;
    BatchBuilder builder(reused, "shardId-000000000002", batch, 10000);
    ASSERT_TRUE(
        kinesis::parse_get_records_response_in_place(get_records_body(5), reused, &builder).ok());
    body = reused.buffer;
    bool resume_filter = false;
    builder.finish(reused, StartPosition::trim_horizon(), resume_filter);
    ASSERT_EQ(batch.records.size(), static_cast<std::size_t>(kRecords));
    EXPECT_EQ(reused.buffer, nullptr);
    EXPECT_TRUE(reused.records.empty());
    EXPECT_FALSE(body.expired()) << "the batch's records point into it";
    EXPECT_EQ(batch.records[42].data(), "gen 5 record 42");
  }
  EXPECT_TRUE(body.expired()) << "the batch is gone; nothing else may keep its body";
  EXPECT_EQ(bodies.counts().kept_blocks, 1u);

  // An answer without records lets go of its (small) body too.
  FetchedBatch empty;
  BatchBuilder builder(reused, "shardId-000000000002", empty, 10000);
  ASSERT_TRUE(
      kinesis::parse_get_records_response_in_place(
          std::string("{\"Records\":[],\"NextShardIterator\":\"it\",\"MillisBehindLatest\":0}"),
          reused, &builder)
          .ok());
  body = reused.buffer;
  ASSERT_FALSE(body.expired());
  EXPECT_FALSE(builder.received_any());
  bool resume_filter = false;
  builder.finish(reused, StartPosition::trim_horizon(), resume_filter);
  EXPECT_TRUE(empty.records.empty());
  EXPECT_TRUE(body.expired());
}

// The fetchers have each record go from the parser straight into the batch. The batch
// must be what the vector path gives (same records, same order, the shard id, the body let go
// of by the reused result), without a vector of parsed records in between.
TEST(BufferRecyclingTest, RecordsParsedStraightIntoABatchAreThoseOfTheVectorPath) {
  const FetchedBatch expected = vector_path_batch_of(6);
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
  expect_same_records(batch, expected);
  EXPECT_EQ(batch.records[7].shard_id(), "shardId-000000000001");
  EXPECT_GT(batch.bytes, batch.records.size() * sizeof(kcl::Record));
  batch = FetchedBatch();
  EXPECT_TRUE(body.expired());
}

// Fan-out's source has each event's records go straight into the batch too. The event's JSON
// lies inside its event-stream frame, and the source reuses one result from event to event:
// after an event it must keep nothing of it (100 shards would otherwise each hold a vector of
// parsed records, or their last frame, outside the prefetch bound).
TEST(BufferRecyclingTest, AnEventParsedStraightIntoABatchLeavesNothingInTheSourcesResult) {
  const FetchedBatch expected = vector_path_batch_of(8);
  std::string payload = get_records_body(8);
  const std::string tail = "\"NextShardIterator\":\"it\"";
  payload.replace(
      payload.find(tail), tail.size(),
      "\"ContinuationSequenceNumber\":\"49590338271490256608559692538361571095921575989136\"");
  // The frame: a prelude and headers before the payload, a CRC after it.
  const std::string frame = std::string(37, '\x01') + payload + std::string(4, '\x02');

  kinesis::GetRecordsResult event;
  FetchedBatch batch;
  BatchBuilder builder(event, "shardId-000000000001", batch, 10000);
  ASSERT_TRUE(kinesis::parse_subscribe_to_shard_event_in_place(std::string(frame), 37,
                                                               payload.size(), event, &builder)
                  .ok());
  ASSERT_TRUE(event.continuation_sequence_number.has_value());
  EXPECT_EQ(*event.continuation_sequence_number,
            "49590338271490256608559692538361571095921575989136");
  std::weak_ptr<kinesis::RecordsBuffer> held = event.buffer;
  bool resume_filter = false;
  builder.finish(event, StartPosition::trim_horizon(), resume_filter);
  EXPECT_EQ(event.buffer, nullptr);
  EXPECT_EQ(event.records.capacity(), 0u) << "no vector of parsed records";
  expect_same_records(batch, expected);
  batch = FetchedBatch();
  EXPECT_TRUE(held.expired()) << "the batch was all that kept the frame";
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
