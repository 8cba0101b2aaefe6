// KinesisClient against kinesalite (see ARCHITECTURE.md, "The emulators", for what it does
// and does not do). Every test uses its own stream; all share this binary's emulators.
#include "kinesis/kinesis_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "aws/aws_json_client.h"
#include "aws/credentials.h"
#include "aws/http_transport.h"
#include "support/emulators.h"

namespace kcl::kinesis {
namespace {

using namespace std::chrono_literals;
using testing::shared_emulators;
using testing::unique_name;

const std::string kMaxHashKey = "340282366920938463463374607431768211455";  // 2^128 - 1

// --- decimal helpers for 128-bit hash keys ---

std::string decimal_add(const std::string& a, const std::string& b) {
  std::string out;
  int carry = 0;
  for (std::size_t i = 0; i < std::max(a.size(), b.size()) || carry; ++i) {
    int d = carry;
    if (i < a.size()) d += a[a.size() - 1 - i] - '0';
    if (i < b.size()) d += b[b.size() - 1 - i] - '0';
    out += static_cast<char>('0' + d % 10);
    carry = d / 10;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::string decimal_half(const std::string& a) {
  std::string out;
  int rem = 0;
  for (char c : a) {
    int cur = rem * 10 + (c - '0');
    out += static_cast<char>('0' + cur / 2);
    rem = cur % 2;
  }
  auto nz = out.find_first_not_of('0');
  return nz == std::string::npos ? "0" : out.substr(nz);
}

std::string decimal_add_one(const std::string& a) { return decimal_add(a, "1"); }

// Sequence numbers compare as big decimals.
bool seq_less(std::string_view a, std::string_view b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

class KinesisIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& emu = shared_emulators();
    config_ = emu.aws_config();
    std::shared_ptr<aws::AwsJsonClient> json = aws::make_aws_json_client(
        aws::kinesis_service(), config_, aws::make_curl_transport(config_.http),
        aws::make_static_provider(*config_.credentials));
    client_ = std::make_unique<KinesisClient>(std::move(json));
  }

  void TearDown() override {
    for (const auto& s : streams_) (void)client_->delete_stream(s);
  }

  // Creates a stream with `shards` shards and waits until it is ACTIVE.
  std::string make_stream(int shards) {
    std::string name = unique_name("kin");
    Status s = client_->create_stream(name, shards);
    EXPECT_TRUE(s.ok()) << s;
    streams_.push_back(name);
    Status a = client_->wait_for_active(name, 30s);
    EXPECT_TRUE(a.ok()) << a;
    return name;
  }

  // Reads a shard from `position` until a response brings nothing more (open shard) or the
  // shard ends. `responses` counts GetRecords calls; `ended` tells whether the end was seen.
  std::vector<KinesisRecord> read_shard(const std::string& stream, const std::string& shard_id,
                                        IteratorPosition position, bool* ended = nullptr,
                                        int* responses = nullptr, int limit = 10000) {
    std::vector<KinesisRecord> all;
    auto it = client_->get_shard_iterator(stream, shard_id, position);
    EXPECT_TRUE(it.ok()) << it.status();
    if (!it.ok()) return all;
    std::string iterator = *it;
    int calls = 0;
    bool end = false;
    for (int guard = 0; guard < 1000; ++guard) {
      auto r = client_->get_records(iterator, limit);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) break;
      ++calls;
      const bool empty = r->records.empty();
      // The records are views into their answer's buffer: keep it for the test program.
      static std::vector<std::shared_ptr<RecordsBuffer>> kept;
      kept.push_back(r->buffer);
      for (auto& rec : r->records) all.push_back(rec);
      if (r->shard_ended()) {
        end = true;
        break;
      }
      iterator = *r->next_shard_iterator;
      if (empty && !ended) break;  // open shard (or caller does not care about the end)
      if (empty && ended && calls > 50) break;
    }
    if (ended) *ended = end;
    if (responses) *responses = calls;
    return all;
  }

  AwsConfig config_;
  std::unique_ptr<KinesisClient> client_;
  std::vector<std::string> streams_;
};

TEST_F(KinesisIntegrationTest, PutRecordsThenReadEveryShardBackByteForByte) {
  const std::string stream = make_stream(4);
  std::mt19937_64 rng(12345);
  struct Sent {
    std::string data, key;
  };
  std::map<std::pair<std::string, std::string>, Sent> sent;  // (shard, seq) -> record
  const auto before = std::chrono::system_clock::now() - 1min;
  for (int batch = 0; batch < 2; ++batch) {
    std::vector<PutRecordsEntry> entries;
    for (int i = 0; i < 500; ++i) {
      PutRecordsEntry e;
      e.data.resize(1 + rng() % 2000);
      for (auto& c : e.data) c = static_cast<char>(rng());
      e.partition_key = "pk-" + std::to_string(batch * 500 + i);
      entries.push_back(std::move(e));
    }
    auto r = client_->put_records(stream, entries);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->failed_record_count, 0);
    ASSERT_EQ(r->records.size(), entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      ASSERT_TRUE(r->records[i].ok) << r->records[i].error_code;
      sent[{r->records[i].shard_id, r->records[i].sequence_number}] = {entries[i].data,
                                                                       entries[i].partition_key};
    }
  }
  ASSERT_EQ(sent.size(), 1000u);

  auto shards = client_->list_shards(stream);
  ASSERT_TRUE(shards.ok()) << shards.status();
  ASSERT_EQ(shards->size(), 4u);
  std::size_t received = 0;
  std::set<std::string> shards_with_data;
  for (const auto& shard : *shards) {
    auto records = read_shard(stream, shard.shard_id, {IteratorType::kTrimHorizon, "", {}});
    for (std::size_t i = 0; i < records.size(); ++i) {
      const auto& rec = records[i];
      auto found = sent.find({shard.shard_id, std::string(rec.sequence_number)});
      ASSERT_NE(found, sent.end()) << shard.shard_id << " " << rec.sequence_number;
      EXPECT_EQ(rec.data, found->second.data) << rec.sequence_number;
      EXPECT_EQ(rec.partition_key, found->second.key);
      EXPECT_GT(rec.approximate_arrival_timestamp, before);
      EXPECT_LT(rec.approximate_arrival_timestamp, std::chrono::system_clock::now() + 1min);
      if (i > 0) {
        EXPECT_TRUE(seq_less(records[i - 1].sequence_number, rec.sequence_number));
      }
    }
    if (!records.empty()) shards_with_data.insert(shard.shard_id);
    received += records.size();
  }
  EXPECT_EQ(received, 1000u);
  EXPECT_EQ(shards_with_data.size(), 4u);  // 1000 keys spread over every shard
}

TEST_F(KinesisIntegrationTest, ListShardsCoversTheHashSpace) {
  const std::string stream = make_stream(3);
  auto shards = client_->list_shards(stream);
  ASSERT_TRUE(shards.ok()) << shards.status();
  ASSERT_EQ(shards->size(), 3u);
  std::string expected_start = "0";
  for (const auto& s : *shards) {
    EXPECT_FALSE(s.closed());
    EXPECT_TRUE(s.parent_shard_id.empty());
    EXPECT_TRUE(s.adjacent_parent_shard_id.empty());
    EXPECT_FALSE(s.sequence_number_range.starting_sequence_number.empty());
    EXPECT_EQ(s.hash_key_range.starting_hash_key, expected_start);
    expected_start = decimal_add_one(s.hash_key_range.ending_hash_key);
  }
  EXPECT_EQ(shards->back().hash_key_range.ending_hash_key, kMaxHashKey);

  auto page = client_->list_shards_page(stream, {}, "", 2);
  ASSERT_TRUE(page.ok()) << page.status();
  // kinesalite ignores MaxResults and never pages; real Kinesis would return 2 and a token.
  EXPECT_GE(page->shards.size(), 2u);

  auto summary = client_->describe_stream_summary(stream);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->stream_name, stream);
  EXPECT_EQ(summary->stream_status, "ACTIVE");
  EXPECT_EQ(summary->open_shard_count, 3);
  EXPECT_GT(summary->retention_period_hours, 0);
  EXPECT_NE(summary->stream_arn.find(stream), std::string::npos);
  EXPECT_GT(summary->creation_timestamp, std::chrono::system_clock::now() - 10min);
}

TEST_F(KinesisIntegrationTest, SplitThenMergeRecordsLineage) {
  const std::string stream = make_stream(2);
  auto shards = client_->list_shards(stream);
  ASSERT_TRUE(shards.ok()) << shards.status();
  ASSERT_EQ(shards->size(), 2u);
  const Shard parent = (*shards)[0];
  const std::string mid = decimal_half(
      decimal_add(parent.hash_key_range.starting_hash_key, parent.hash_key_range.ending_hash_key));

  Status split = client_->split_shard(stream, parent.shard_id, mid);
  ASSERT_TRUE(split.ok()) << split;
  ASSERT_TRUE(client_->wait_for_active(stream, 30s).ok());

  auto after_split = client_->list_shards(stream);
  ASSERT_TRUE(after_split.ok()) << after_split.status();
  ASSERT_EQ(after_split->size(), 4u);  // kinesalite lists closed shards too
  std::vector<Shard> children;
  for (const auto& s : *after_split) {
    if (s.shard_id == parent.shard_id) {
      EXPECT_TRUE(s.closed()) << "split parent should be closed";
    } else if (s.parent_shard_id == parent.shard_id) {
      EXPECT_FALSE(s.closed());
      EXPECT_TRUE(s.adjacent_parent_shard_id.empty());
      children.push_back(s);
    }
  }
  ASSERT_EQ(children.size(), 2u);
  std::sort(children.begin(), children.end(), [](const Shard& a, const Shard& b) {
    return seq_less(a.hash_key_range.starting_hash_key, b.hash_key_range.starting_hash_key);
  });
  EXPECT_EQ(children[0].hash_key_range.starting_hash_key, parent.hash_key_range.starting_hash_key);
  EXPECT_EQ(decimal_add_one(children[0].hash_key_range.ending_hash_key), mid);
  EXPECT_EQ(children[1].hash_key_range.starting_hash_key, mid);
  EXPECT_EQ(children[1].hash_key_range.ending_hash_key, parent.hash_key_range.ending_hash_key);

  Status merge = client_->merge_shards(stream, children[0].shard_id, children[1].shard_id);
  ASSERT_TRUE(merge.ok()) << merge;
  ASSERT_TRUE(client_->wait_for_active(stream, 30s).ok());
  auto after_merge = client_->list_shards(stream);
  ASSERT_TRUE(after_merge.ok()) << after_merge.status();
  ASSERT_EQ(after_merge->size(), 5u);
  int merged_children = 0;
  for (const auto& s : *after_merge) {
    if (s.shard_id == children[0].shard_id || s.shard_id == children[1].shard_id) {
      EXPECT_TRUE(s.closed()) << s.shard_id;
    }
    if (s.parent_shard_id == children[0].shard_id) {
      ++merged_children;
      EXPECT_EQ(s.adjacent_parent_shard_id, children[1].shard_id);
      EXPECT_FALSE(s.closed());
      EXPECT_EQ(s.hash_key_range.starting_hash_key, parent.hash_key_range.starting_hash_key);
      EXPECT_EQ(s.hash_key_range.ending_hash_key, parent.hash_key_range.ending_hash_key);
    }
  }
  EXPECT_EQ(merged_children, 1);
  auto summary = client_->describe_stream_summary(stream);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->open_shard_count, 2);
}

TEST_F(KinesisIntegrationTest, ReadsAClosedShardToItsEnd) {
  const std::string stream = make_stream(1);
  std::vector<PutRecordsEntry> entries;
  for (int i = 0; i < 10; ++i)
    entries.push_back({"before-split-" + std::to_string(i), "k" + std::to_string(i), ""});
  auto put = client_->put_records(stream, entries);
  ASSERT_TRUE(put.ok()) << put.status();
  auto shards = client_->list_shards(stream);
  ASSERT_TRUE(shards.ok() && shards->size() == 1u);
  const Shard parent = (*shards)[0];
  ASSERT_TRUE(client_->split_shard(stream, parent.shard_id, decimal_half(kMaxHashKey)).ok());
  ASSERT_TRUE(client_->wait_for_active(stream, 30s).ok());
  // Written after the split: goes to a child, never to the closed parent.
  auto late = client_->put_record(stream, {"after-split", "late", ""});
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_NE(late->shard_id, parent.shard_id);

  bool ended = false;
  int responses = 0;
  auto records = read_shard(stream, parent.shard_id, {IteratorType::kTrimHorizon, "", {}}, &ended,
                            &responses, 4);
  EXPECT_TRUE(ended) << "no end of shard after " << responses << " responses";
  RecordProperty("get_records_responses_to_end", responses);
  ASSERT_EQ(records.size(), 10u);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(records[static_cast<std::size_t>(i)].data, "before-split-" + std::to_string(i));
  // 10 records by 4: three responses with records, then (kinesalite) one more empty
  // response before the one without a NextShardIterator.
  EXPECT_GE(responses, 3);
  EXPECT_LE(responses, 6);

  // The child that holds the late record starts at TRIM_HORIZON and has it.
  auto child = read_shard(stream, late->shard_id, {IteratorType::kTrimHorizon, "", {}});
  ASSERT_EQ(child.size(), 1u);
  EXPECT_EQ(child[0].data, "after-split");
}

TEST_F(KinesisIntegrationTest, SequenceNumberAndTimestampPositions) {
  const std::string stream = make_stream(1);
  auto shards = client_->list_shards(stream);
  ASSERT_TRUE(shards.ok() && shards->size() == 1u);
  const std::string shard = (*shards)[0].shard_id;

  // LATEST taken before anything is written sees only what comes after.
  auto latest = client_->get_shard_iterator(stream, shard, {IteratorType::kLatest, "", {}});
  ASSERT_TRUE(latest.ok()) << latest.status();

  std::vector<PutRecordResult> first;
  for (int i = 0; i < 3; ++i) {
    auto r = client_->put_record(stream, {"a" + std::to_string(i), "k", ""});
    ASSERT_TRUE(r.ok()) << r.status();
    first.push_back(*r);
  }
  auto all_first = read_shard(stream, shard, {IteratorType::kTrimHorizon, "", {}});
  ASSERT_EQ(all_first.size(), 3u);
  // Wait (on the condition, not a fixed time) until the wall clock is clearly past the first
  // batch's arrival times, so the second batch arrives at later milliseconds.
  const auto last_first = all_first.back().approximate_arrival_timestamp;
  while (std::chrono::system_clock::now() < last_first + 20ms) std::this_thread::sleep_for(2ms);
  std::vector<PutRecordResult> second;
  for (int i = 0; i < 3; ++i) {
    auto r = client_->put_record(stream, {"b" + std::to_string(i), "k", ""});
    ASSERT_TRUE(r.ok()) << r.status();
    second.push_back(*r);
  }
  auto everything = read_shard(stream, shard, {IteratorType::kTrimHorizon, "", {}});
  ASSERT_EQ(everything.size(), 6u);

  auto from_latest = client_->get_records(*latest);
  ASSERT_TRUE(from_latest.ok()) << from_latest.status();
  ASSERT_EQ(from_latest->records.size(), 6u);
  EXPECT_EQ(from_latest->records[0].data, "a0");

  auto at =
      read_shard(stream, shard, {IteratorType::kAtSequenceNumber, first[1].sequence_number, {}});
  ASSERT_EQ(at.size(), 5u);
  EXPECT_EQ(at[0].data, "a1");
  EXPECT_EQ(at[0].sequence_number, first[1].sequence_number);

  auto after =
      read_shard(stream, shard, {IteratorType::kAfterSequenceNumber, first[1].sequence_number, {}});
  ASSERT_EQ(after.size(), 4u);
  EXPECT_EQ(after[0].data, "a2");

  auto after_last = read_shard(stream, shard,
                               {IteratorType::kAfterSequenceNumber, second[2].sequence_number, {}});
  EXPECT_TRUE(after_last.empty());

  // AT_TIMESTAMP at the first record of the second batch: exactly the second batch.
  // (kinesalite hangs when no record lies at or after the timestamp; one does here.)
  const auto ts = everything[3].approximate_arrival_timestamp;
  ASSERT_GT(ts, last_first);
  auto by_time = read_shard(stream, shard, {IteratorType::kAtTimestamp, "", ts});
  ASSERT_EQ(by_time.size(), 3u);
  EXPECT_EQ(by_time[0].data, "b0");
  EXPECT_EQ(by_time[2].data, "b2");
}

TEST_F(KinesisIntegrationTest, MissingStreamIsNotFoundNamingOperationAndEndpoint) {
  const std::string missing = unique_name("missing");
  auto d = client_->describe_stream_summary(missing);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound) << d.status();
  const std::string text = d.status().to_string();
  RecordProperty("error_text", text);
  EXPECT_NE(text.find("Kinesis.DescribeStreamSummary"), std::string::npos) << text;
  EXPECT_NE(text.find(shared_emulators().kinesis_url()), std::string::npos) << text;
  ASSERT_TRUE(d.status().aws().has_value());
  EXPECT_EQ(d.status().aws()->error_type, "ResourceNotFoundException");
  EXPECT_EQ(d.status().aws()->http_status, 400);

  auto ls = client_->list_shards(missing);
  EXPECT_EQ(ls.status().code(), StatusCode::kNotFound) << ls.status();
  EXPECT_NE(ls.status().to_string().find("Kinesis.ListShards"), std::string::npos);

  auto it = client_->get_shard_iterator(missing, "shardId-000000000000", {});
  EXPECT_EQ(it.status().code(), StatusCode::kNotFound) << it.status();
  EXPECT_NE(it.status().to_string().find("Kinesis.GetShardIterator"), std::string::npos);

  auto put = client_->put_record(missing, {"x", "k", ""});
  EXPECT_EQ(put.status().code(), StatusCode::kNotFound) << put.status();

  Status del = client_->delete_stream(missing);
  EXPECT_EQ(del.code(), StatusCode::kNotFound) << del;
}

TEST_F(KinesisIntegrationTest, CreateExistingIsAlreadyExistsAndDeleteRemoves) {
  const std::string stream = make_stream(1);
  Status again = client_->create_stream(stream, 1);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists) << again;
  ASSERT_TRUE(client_->delete_stream(stream).ok());
  // Deleting takes effect shortly after (deleteStreamMs is 0): wait for that condition.
  StatusCode code = StatusCode::kOk;
  for (int i = 0; i < 500; ++i) {
    code = client_->describe_stream_summary(stream).status().code();
    if (code == StatusCode::kNotFound) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(code, StatusCode::kNotFound);
}

TEST_F(KinesisIntegrationTest, ExplicitHashKeyRoutesToTheOwningShard) {
  const std::string stream = make_stream(2);
  auto shards = client_->list_shards(stream);
  ASSERT_TRUE(shards.ok() && shards->size() == 2u);
  auto low = client_->put_record(stream, {"low", "any", "0"});
  auto high = client_->put_record(stream, {"high", "any", kMaxHashKey});
  ASSERT_TRUE(low.ok()) << low.status();
  ASSERT_TRUE(high.ok()) << high.status();
  EXPECT_EQ(low->shard_id, (*shards)[0].shard_id);
  EXPECT_EQ(high->shard_id, (*shards)[1].shard_id);
  auto records = client_->put_records(stream, {{"r0", "any", "0"}, {"r1", "any", kMaxHashKey}});
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(records->records[0].shard_id, (*shards)[0].shard_id);
  EXPECT_EQ(records->records[1].shard_id, (*shards)[1].shard_id);
}

TEST_F(KinesisIntegrationTest, InvalidRequestIsInvalidArgument) {
  const std::string stream = make_stream(1);
  auto shards = client_->list_shards(stream);
  ASSERT_TRUE(shards.ok() && shards->size() == 1u);
  // Not a number: the service rejects the sequence number.
  auto it = client_->get_shard_iterator(stream, (*shards)[0].shard_id,
                                        {IteratorType::kAfterSequenceNumber, "not-a-number", {}});
  EXPECT_EQ(it.status().code(), StatusCode::kInvalidArgument) << it.status();
  auto bad_iter = client_->get_records("bm90IGFuIGl0ZXJhdG9y");
  EXPECT_FALSE(bad_iter.ok());
  EXPECT_EQ(bad_iter.status().code(), StatusCode::kInvalidArgument) << bad_iter.status();
}

}  // namespace
}  // namespace kcl::kinesis
