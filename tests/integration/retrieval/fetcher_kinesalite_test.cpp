// ShardFetcher against kinesalite: everything read byte for byte, resuming after a
// checkpoint (plain and inside a KPL aggregate), a split parent read to its end,
// AT_TIMESTAMP (including kinesalite's hang when nothing lies after the timestamp), and a
// stream deleted while it is read.
//
// The fetcher runs on the real clock here; the loop sleeps until the time each step returns
// (capped at 50 ms) and every wait has a deadline.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "aws/aws_json_client.h"
#include "aws/credentials.h"
#include "aws/http_transport.h"
#include "kinesis/kinesis_client.h"
#include "retrieval/shard_fetcher.h"
#include "support/aws_clients.h"
#include "support/emulators.h"
#include "support/kpl_builder.h"

namespace kcl::retrieval {
namespace {

using namespace std::chrono_literals;

class FetcherKinesaliteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& emu = kcl::testing::shared_emulators();
    config_ = emu.aws_config();
    client_ = kcl::testing::kinesis_client(config_);
    ASSERT_TRUE(client_);
    stream_ = kcl::testing::unique_name("fetch");
  }

  // Creates a one-shard stream and returns its shard id.
  std::string create_stream() {
    Status s = client_->create_stream(stream_, 1);
    EXPECT_TRUE(s.ok()) << s;
    s = client_->wait_for_active(stream_, 30s);
    EXPECT_TRUE(s.ok()) << s;
    auto shards = client_->list_shards(stream_);
    EXPECT_TRUE(shards.ok()) << shards.status();
    if (!shards.ok() || shards->size() != 1) return "";
    return shards->front().shard_id;
  }

  // Puts the entries (in chunks of 500) and returns their sequence numbers, in order.
  std::vector<std::string> put(const std::vector<kinesis::PutRecordsEntry>& entries) {
    std::vector<std::string> seqs;
    for (std::size_t at = 0; at < entries.size(); at += 500) {
      std::vector<kinesis::PutRecordsEntry> chunk(
          entries.begin() + static_cast<std::ptrdiff_t>(at),
          entries.begin() + static_cast<std::ptrdiff_t>(std::min(entries.size(), at + 500)));
      auto r = client_->put_records(stream_, chunk);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) return seqs;
      EXPECT_EQ(r->failed_record_count, 0);
      for (const auto& e : r->records) seqs.push_back(e.sequence_number);
    }
    return seqs;
  }

  static std::string payload(std::size_t i) {
    // Every byte value appears, zero bytes included; sizes vary from 1 to 700 bytes.
    std::string data(1 + (i * 37) % 700, '\0');
    for (std::size_t j = 0; j < data.size(); ++j) {
      data[j] = static_cast<char>((i * 131 + j * 7) & 0xFF);
    }
    return data;
  }

  static std::vector<kinesis::PutRecordsEntry> entries(std::size_t n, std::size_t first = 0) {
    std::vector<kinesis::PutRecordsEntry> out;
    for (std::size_t i = first; i < first + n; ++i) {
      out.push_back({payload(i), "pk-" + std::to_string(i), ""});
    }
    return out;
  }

  std::unique_ptr<ShardFetcher> make(const std::string& shard, StartPosition start,
                                     RetrievalConfig cfg = quick_config()) {
    return std::make_unique<ShardFetcher>(*client_, stream_, shard, std::move(start),
                                          std::move(cfg), SystemClock::instance());
  }

  static RetrievalConfig quick_config() {
    RetrievalConfig cfg;
    cfg.idle_time_between_calls = 200ms;
    return cfg;
  }

  // Steps `f` until done() holds, the fetcher is finished and drained, or `limit` passes;
  // every batch taken goes to `batches`. Returns whether done() held.
  static bool drive(ShardFetcher& f, std::vector<FetchedBatch>& batches,
                    const std::function<bool()>& done, std::chrono::milliseconds limit = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      const FetchStep step = step_and_take(f, batches);
      if (f.drained()) return done();
      pause_after(step);
    }
    return true;
  }

  // Drives until the fetcher has read everything there is: a GetRecords answer with no
  // records while not behind. Records still in flight would show up before that.
  static bool drive_until_caught_up(ShardFetcher& f, std::vector<FetchedBatch>& batches,
                                    std::chrono::milliseconds limit = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline && !f.finished()) {
      const FetchStep step = step_and_take(f, batches);
      if (step.outcome == FetchOutcome::kNoRecords && f.millis_behind_latest() == 0) return true;
      pause_after(step);
    }
    return false;
  }

  static FetchStep step_and_take(ShardFetcher& f, std::vector<FetchedBatch>& batches) {
    const FetchStep step = f.fetch_step();
    while (auto b = f.take_batch()) batches.push_back(std::move(*b));
    return step;
  }

  // Sleeps until the step's next call is due (at most 50 ms); not at all when the step only
  // waited for its batches to be taken (they just were).
  static void pause_after(const FetchStep& step) {
    if (step.wait_for_take) return;
    const auto cap = std::chrono::steady_clock::now() + 50ms;
    std::this_thread::sleep_until(std::min(step.next_step_at, cap));
  }

  // Waits until the wall clock is past `t` by `margin`: arrival timestamps of records put
  // after it are then later than `t` (they have millisecond resolution).
  static void wall_clock_past(std::chrono::system_clock::time_point t,
                              std::chrono::milliseconds margin = 5ms) {
    while (std::chrono::system_clock::now() < t + margin) std::this_thread::sleep_for(1ms);
  }

  static std::vector<kcl::Record> records_of(const std::vector<FetchedBatch>& batches) {
    std::vector<kcl::Record> out;
    for (const auto& b : batches) out.insert(out.end(), b.records.begin(), b.records.end());
    return out;
  }

  static std::size_t count(const std::vector<FetchedBatch>& batches) {
    std::size_t n = 0;
    for (const auto& b : batches) n += b.records.size();
    return n;
  }

  AwsConfig config_;
  std::shared_ptr<kinesis::KinesisClient> client_;
  std::string stream_;
};

TEST_F(FetcherKinesaliteTest, ReadsTwoThousandRecordsByteForByte) {
  const std::string shard = create_stream();
  ASSERT_FALSE(shard.empty());
  const auto seqs = put(entries(2000));
  ASSERT_EQ(seqs.size(), 2000u);

  RetrievalConfig cfg = quick_config();
  cfg.max_records_per_call = 300;  // several pages
  auto f = make(shard, StartPosition::trim_horizon(), cfg);
  std::vector<FetchedBatch> batches;
  ASSERT_TRUE(drive(*f, batches, [&] { return count(batches) >= 2000; }))
      << count(batches) << " records; " << f->terminal_error();
  // Caught up: nothing more arrives.
  ASSERT_TRUE(drive_until_caught_up(*f, batches)) << f->terminal_error();

  const auto got = records_of(batches);
  ASSERT_EQ(got.size(), 2000u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].data(), payload(i)) << "record " << i;
    ASSERT_EQ(got[i].sequence_number(), seqs[i]) << "record " << i;
    ASSERT_EQ(got[i].partition_key(), "pk-" + std::to_string(i));
    ASSERT_EQ(got[i].shard_id(), shard);
    ASSERT_EQ(got[i].sub_sequence_number(), 0u);
    ASSERT_FALSE(got[i].aggregated());
  }
  EXPECT_GE(batches.size(), 7u);
  EXPECT_TRUE(f->terminal_error().ok()) << f->terminal_error();
  EXPECT_FALSE(f->finished());
  EXPECT_EQ(f->corrupt_aggregates(), 0u);
  EXPECT_EQ(f->throttles_seen(), 0u);
}

TEST_F(FetcherKinesaliteTest, ResumesAfterAPlainCheckpointMidStream) {
  const std::string shard = create_stream();
  ASSERT_FALSE(shard.empty());
  const auto seqs = put(entries(400));
  ASSERT_EQ(seqs.size(), 400u);

  auto f = make(shard, StartPosition::after_checkpoint(seqs[149], 0));
  std::vector<FetchedBatch> batches;
  ASSERT_TRUE(drive(*f, batches, [&] { return count(batches) >= 250; })) << f->terminal_error();
  // Caught up: nothing more arrives.
  ASSERT_TRUE(drive_until_caught_up(*f, batches)) << f->terminal_error();
  const auto got = records_of(batches);
  ASSERT_EQ(got.size(), 250u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].sequence_number(), seqs[150 + i]);
    ASSERT_EQ(got[i].data(), payload(150 + i));
  }
  EXPECT_EQ(f->records_skipped_by_checkpoint(), 1u);
}

TEST_F(FetcherKinesaliteTest, ResumesInsideAKplAggregate) {
  const std::string shard = create_stream();
  ASSERT_FALSE(shard.empty());
  std::vector<kcl::testing::SubRecord> subs;
  for (int i = 0; i < 6; ++i) {
    subs.push_back({"user-" + std::to_string(i), std::nullopt, "sub-" + std::to_string(i), {}});
  }
  std::vector<kinesis::PutRecordsEntry> list = entries(3);
  list.push_back({kcl::testing::build_aggregate(subs), "agg", ""});
  for (auto& e : entries(3, 10)) list.push_back(e);
  const auto seqs = put(list);
  ASSERT_EQ(seqs.size(), 7u);

  // Checkpointed at sub-record 0 of the aggregate: sub-records 1..5 must not be lost.
  auto f = make(shard, StartPosition::after_checkpoint(seqs[3], 0));
  std::vector<FetchedBatch> batches;
  ASSERT_TRUE(drive(*f, batches, [&] { return count(batches) >= 8; })) << f->terminal_error();
  const auto got = records_of(batches);
  ASSERT_EQ(got.size(), 8u);
  for (std::size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(got[k].data(), "sub-" + std::to_string(k + 1));
    EXPECT_EQ(got[k].sub_sequence_number(), k + 1);
    EXPECT_EQ(got[k].sequence_number(), seqs[3]);
    EXPECT_TRUE(got[k].aggregated());
  }
  for (std::size_t k = 0; k < 3; ++k) EXPECT_EQ(got[5 + k].data(), payload(10 + k));

  // Checkpointed at sub-record 4: only sub-record 5, then the plain records.
  auto g = make(shard, StartPosition::after_checkpoint(seqs[3], 4));
  std::vector<FetchedBatch> more;
  ASSERT_TRUE(drive(*g, more, [&] { return count(more) >= 4; })) << g->terminal_error();
  const auto got2 = records_of(more);
  ASSERT_EQ(got2.size(), 4u);
  EXPECT_EQ(got2[0].data(), "sub-5");
  EXPECT_EQ(got2[1].data(), payload(10));
}

TEST_F(FetcherKinesaliteTest, ReadsASplitParentToItsEnd) {
  const std::string shard = create_stream();
  ASSERT_FALSE(shard.empty());
  const auto seqs = put(entries(120));
  ASSERT_EQ(seqs.size(), 120u);
  Status s = client_->split_shard(stream_, shard, "170141183460469231731687303715884105728");
  ASSERT_TRUE(s.ok()) << s;
  s = client_->wait_for_active(stream_, 30s);
  ASSERT_TRUE(s.ok()) << s;

  RetrievalConfig cfg = quick_config();
  cfg.max_records_per_call = 50;
  auto f = make(shard, StartPosition::trim_horizon(), cfg);
  std::vector<FetchedBatch> batches;
  ASSERT_TRUE(drive(*f, batches, [&] { return f->drained(); })) << f->terminal_error();
  EXPECT_TRUE(f->shard_ended());
  EXPECT_TRUE(f->terminal_error().ok()) << f->terminal_error();
  ASSERT_FALSE(batches.empty());
  EXPECT_TRUE(batches.back().shard_end);
  for (std::size_t i = 0; i + 1 < batches.size(); ++i) EXPECT_FALSE(batches[i].shard_end);
  const auto got = records_of(batches);
  ASSERT_EQ(got.size(), 120u);
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].sequence_number(), seqs[i]);
  // Finished: no more calls.
  const auto calls = f->calls_made();
  EXPECT_EQ(f->fetch_step().outcome, FetchOutcome::kFinished);
  EXPECT_EQ(f->calls_made(), calls);
}

TEST_F(FetcherKinesaliteTest, StartsAtATimestamp) {
  const std::string shard = create_stream();
  ASSERT_FALSE(shard.empty());
  const auto early = put(entries(50));
  ASSERT_EQ(early.size(), 50u);
  wall_clock_past(std::chrono::system_clock::now());  // after every early arrival
  const auto t = std::chrono::system_clock::now();
  wall_clock_past(t);
  const auto late = put(entries(50, 50));
  ASSERT_EQ(late.size(), 50u);

  auto f = make(shard, StartPosition::at_timestamp(t));
  std::vector<FetchedBatch> batches;
  ASSERT_TRUE(drive(*f, batches, [&] { return count(batches) >= 50; })) << f->terminal_error();
  // Caught up: nothing more arrives.
  ASSERT_TRUE(drive_until_caught_up(*f, batches)) << f->terminal_error();
  const auto got = records_of(batches);
  ASSERT_EQ(got.size(), 50u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].sequence_number(), late[i]);
    ASSERT_EQ(got[i].data(), payload(50 + i));
  }
}

TEST_F(FetcherKinesaliteTest, AtTimestampWithNothingAfterItRetriesUntilARecordArrives) {
  // kinesalite does not answer GetShardIterator AT_TIMESTAMP while no record lies at or after
  // the timestamp: the request times out, the fetcher backs off and asks again.
  const std::string shard = create_stream();
  ASSERT_FALSE(shard.empty());
  ASSERT_EQ(put(entries(5)).size(), 5u);
  wall_clock_past(std::chrono::system_clock::now());
  const auto t = std::chrono::system_clock::now();
  wall_clock_past(t);

  RetrievalConfig cfg = quick_config();
  cfg.iterator_request_timeout = 300ms;
  cfg.call_max_attempts = 1;
  cfg.throttle_backoff_base = 50ms;
  cfg.throttle_backoff_max = 200ms;
  auto f = make(shard, StartPosition::at_timestamp(t), cfg);
  std::vector<FetchedBatch> batches;
  ASSERT_TRUE(drive(
      *f, batches, [&] { return f->throttles_seen() >= 2; }, 20s))
      << f->terminal_error();
  EXPECT_FALSE(f->finished()) << f->terminal_error();

  const auto late = put(entries(3, 100));
  ASSERT_EQ(late.size(), 3u);
  ASSERT_TRUE(drive(
      *f, batches, [&] { return count(batches) >= 3; }, 30s))
      << f->terminal_error();
  const auto got = records_of(batches);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].sequence_number(), late[0]);
  EXPECT_EQ(got[2].data(), payload(102));
}

TEST_F(FetcherKinesaliteTest, StreamDeletedWhileReadingEndsWithAClearError) {
  const std::string shard = create_stream();
  ASSERT_FALSE(shard.empty());
  ASSERT_EQ(put(entries(1000)).size(), 1000u);

  RetrievalConfig cfg = quick_config();
  cfg.max_records_per_call = 100;
  auto f = make(shard, StartPosition::trim_horizon(), cfg);
  std::vector<FetchedBatch> batches;
  ASSERT_TRUE(drive(*f, batches, [&] { return count(batches) >= 200; })) << f->terminal_error();

  Status s = client_->delete_stream(stream_);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(drive(
      *f, batches, [&] { return f->finished(); }, 30s))
      << "still reading after the stream was deleted";
  const Status err = f->terminal_error();
  EXPECT_EQ(err.code(), StatusCode::kNotFound) << err;
  EXPECT_NE(err.message().find("stream " + stream_ + " was deleted or shard " + shard +
                               " no longer exists"),
            std::string::npos)
      << err;
  EXPECT_FALSE(f->shard_ended());
  // What was fetched before the end is intact and in order.
  const auto got = records_of(batches);
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].data(), payload(i));
  EXPECT_EQ(f->fetch_step().outcome, FetchOutcome::kFinished);
}

}  // namespace
}  // namespace kcl::retrieval
