// A scripted, in-memory Kinesis for unit tests of ShardFetcher: one stream with one shard,
// spoken to through the aws::AwsJsonClient seam (GetShardIterator and GetRecords only).
//
// It is a fake of the service's behaviour that the fetcher relies on, not of the wire layer:
// iterators name a position; GetRecords returns up to Limit records from it and a new
// iterator; a closed shard answers one more empty response at its end, then no
// NextShardIterator (as kinesalite does); MillisBehindLatest is > 0 while records remain
// after the response. Faults are scripted per operation (fail_next), an answer can take
// time (during_call moves the clock), iterators can be expired and the stream deleted.
// Every call is logged with the clock's time.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aws/aws_json_client.h"
#include "aws/base64.h"
#include "kcl/clock.h"
#include "kcl/status.h"
#include "kinesis/kinesis_client.h"
#include "retrieval/shard_fetcher.h"

namespace kcl::retrieval::testing {

inline constexpr const char* kStream = "orders";
inline constexpr const char* kShard = "shardId-000000000007";

// Sequence number i of the fake shard: 56 digits, increasing with i.
inline std::string seq_number(std::size_t i) {
  std::string digits = std::to_string(100000 + i * 7);
  return "49590338271490256608559692538361571095921575989136" +
         std::string(6 - std::min<std::size_t>(6, digits.size()), '0') + digits;
}

// `out` is records 0..n-1 of the fake shard (as add_records() makes them), each once, in order.
inline void expect_all_in_order(const std::vector<kcl::Record>& out, std::size_t n) {
  ASSERT_EQ(out.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i].sequence_number(), seq_number(i)) << "at " << i;
    ASSERT_EQ(out[i].data(), "record-" + std::to_string(i)) << "at " << i;
    ASSERT_EQ(out[i].shard_id(), kShard) << "at " << i;
  }
}

class FakeKinesis final : public aws::AwsJsonClient {
 public:
  struct Call {
    std::string operation;
    nlohmann::json body;
    Clock::MonoTime at;
    aws::CallOptions options;
  };
  struct StoredRecord {
    std::string sequence_number;
    std::string partition_key;
    std::string data;
    std::chrono::system_clock::time_point arrival{};
  };

  explicit FakeKinesis(const Clock& clock) : clock_(clock) {}

  // ---- the shard ----
  // Appends a record with sequence number seq_number(index); returns that number.
  std::string add_record(std::string data, std::string partition_key = "pk") {
    std::lock_guard<std::mutex> lock(mu_);
    std::string seq = seq_number(records_.size());
    records_.push_back({seq, std::move(partition_key), std::move(data), clock_.wall_now()});
    return seq;
  }
  // Appends a record with a given sequence number (callers keep them increasing).
  void add_record_with_seq(std::string seq, std::string data, std::string partition_key = "pk") {
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back(
        {std::move(seq), std::move(partition_key), std::move(data), clock_.wall_now()});
  }
  void add_records(std::size_t n, const std::string& prefix = "record-") {
    for (std::size_t i = 0; i < n; ++i) {
      std::size_t index;
      {
        std::lock_guard<std::mutex> lock(mu_);
        index = records_.size();
      }
      add_record(prefix + std::to_string(index));
    }
  }
  // Closes the shard; GetRecords then reports its end (with these children).
  void close_shard(nlohmann::json child_shards = nlohmann::json::array()) {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    child_shards_ = std::move(child_shards);
  }
  // With true, the response that returns a closed shard's last records already carries no
  // NextShardIterator (AWS may do this); with false (default) one more empty response does.
  void end_with_last_records(bool v) {
    std::lock_guard<std::mutex> lock(mu_);
    end_with_last_records_ = v;
  }
  void delete_stream() {
    std::lock_guard<std::mutex> lock(mu_);
    deleted_ = true;
  }
  // The shard is gone while the stream stays (a closed shard past the stream's retention):
  // GetShardIterator and GetRecords answer ResourceNotFoundException for it.
  void expire_shard() {
    std::lock_guard<std::mutex> lock(mu_);
    shard_expired_ = true;
  }
  // Every iterator handed out so far answers ExpiredIteratorException from now on.
  void expire_all_iterators() {
    std::lock_guard<std::mutex> lock(mu_);
    iterators_.clear();
  }
  // Overrides MillisBehindLatest of every GetRecords response.
  void set_millis_behind(std::optional<std::int64_t> v) {
    std::lock_guard<std::mutex> lock(mu_);
    millis_behind_override_ = v;
  }

  // ---- scripted faults ----
  // The next `times` calls of `operation` fail with `status` (before anything else).
  void fail_next(const std::string& operation, const Status& status, int times = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < times; ++i) faults_[operation].push_back(status);
  }
  // ListShards answers with the shard, open or closed (by default it is not answered: an
  // unknown operation).
  void answer_list_shards(bool v) {
    std::lock_guard<std::mutex> lock(mu_);
    answer_list_shards_ = v;
  }
  // The next GetRecords answer has its records but neither NextShardIterator nor ChildShards,
  // the shard open (a proxy that dropped the iterator).
  void drop_next_iterator_once() {
    std::lock_guard<std::mutex> lock(mu_);
    drop_next_iterator_ = true;
  }
  // The next call of `operation` returns this body verbatim.
  void reply_next(const std::string& operation, std::string body) {
    std::lock_guard<std::mutex> lock(mu_);
    canned_[operation].push_back(std::move(body));
  }

  static Status throttled(const std::string& op = "GetRecords") {
    return Status(StatusCode::kUnavailable, "Rate exceeded for shard " + std::string(kShard),
                  AwsErrorDetails{"Kinesis." + op, "http://fake", 400,
                                  "ProvisionedThroughputExceededException", "req-1", 3});
  }

  // Runs at every call, after it is logged and before it is answered (e.g. to move a manual
  // clock: an answer that takes time).
  void during_call(std::function<void(const std::string& operation)> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    during_call_ = std::move(hook);
  }

  // ---- observations ----
  std::vector<Call> calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  std::vector<Call> calls_of(const std::string& operation) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Call> out;
    for (const auto& c : calls_) {
      if (c.operation == operation) out.push_back(c);
    }
    return out;
  }
  std::size_t call_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_.size();
  }
  std::size_t record_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return records_.size();
  }

  // ---- aws::AwsJsonClient ----
  Result<std::string> call(std::string_view operation, std::string json_body,
                           const aws::CallOptions& options) override {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string op(operation);
    auto body = nlohmann::json::parse(json_body);
    calls_.push_back(Call{op, body, clock_.now(), options});
    if (during_call_) during_call_(op);
    if (auto f = faults_.find(op); f != faults_.end() && !f->second.empty()) {
      Status s = f->second.front();
      f->second.pop_front();
      return s;
    }
    if (auto c = canned_.find(op); c != canned_.end() && !c->second.empty()) {
      std::string reply = std::move(c->second.front());
      c->second.pop_front();
      return reply;
    }
    if (deleted_) {
      return error(StatusCode::kNotFound, op, "ResourceNotFoundException",
                   "Stream " + std::string(kStream) + " under account 000000000000 not found.");
    }
    if (op == "DescribeStreamSummary") {
      return nlohmann::json{
          {"StreamDescriptionSummary", {{"StreamName", kStream}, {"StreamStatus", "ACTIVE"}}}}
          .dump();
    }
    if (shard_expired_ && (op == "GetShardIterator" || op == "GetRecords")) {
      return error(StatusCode::kNotFound, op, "ResourceNotFoundException",
                   "Shard " + std::string(kShard) + " in stream " + kStream +
                       " under account 000000000000 does not exist");
    }
    if (op == "ListShards" && answer_list_shards_) return list_shards();
    if (op == "GetShardIterator") return get_shard_iterator(body);
    if (op == "GetRecords") return get_records(body);
    return error(StatusCode::kInvalidArgument, op, "UnknownOperationException", "unknown");
  }
  const std::string& endpoint() const override { return endpoint_; }
  const std::string& region() const override { return region_; }

 private:
  Status error(StatusCode code, const std::string& op, const std::string& type,
               const std::string& message) const {
    return Status(code, message, AwsErrorDetails{"Kinesis." + op, endpoint_, 400, type, "req", 1});
  }

  // Index of the first record whose sequence number compares >= (or >, when after) `seq`.
  std::size_t position_of(const std::string& seq, bool after) const {
    auto less = [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    };
    std::size_t i = 0;
    while (i < records_.size()) {
      const auto& s = records_[i].sequence_number;
      const bool past = after ? less(seq, s) : !less(s, seq);
      if (past) break;
      ++i;
    }
    return i;
  }

  std::string new_iterator(std::size_t position) {
    const std::string id = "iter-" + std::to_string(next_iterator_++);
    iterators_[id] = position;
    return id;
  }

  Result<std::string> get_shard_iterator(const nlohmann::json& body) {
    if (body.value("StreamName", "") != kStream || body.value("ShardId", "") != kShard) {
      return error(StatusCode::kNotFound, "GetShardIterator", "ResourceNotFoundException",
                   "Shard not found");
    }
    const std::string type = body.value("ShardIteratorType", "");
    std::size_t pos = 0;
    if (type == "TRIM_HORIZON") {
      pos = 0;
    } else if (type == "LATEST") {
      pos = records_.size();
    } else if (type == "AT_SEQUENCE_NUMBER" || type == "AFTER_SEQUENCE_NUMBER") {
      pos = position_of(body.at("StartingSequenceNumber").get<std::string>(),
                        type == "AFTER_SEQUENCE_NUMBER");
    } else if (type == "AT_TIMESTAMP") {
      const double secs = body.at("Timestamp").get<double>();
      const auto t = std::chrono::system_clock::time_point(
          std::chrono::duration_cast<std::chrono::system_clock::duration>(
              std::chrono::milliseconds(static_cast<std::int64_t>(secs * 1000.0 + 0.5))));
      while (pos < records_.size() && records_[pos].arrival < t) ++pos;
    } else {
      return error(StatusCode::kInvalidArgument, "GetShardIterator", "InvalidArgumentException",
                   "bad type " + type);
    }
    nlohmann::json reply;
    reply["ShardIterator"] = new_iterator(pos);
    return reply.dump();
  }

  Result<std::string> list_shards() const {
    nlohmann::json range = {{"StartingSequenceNumber", "1"}};
    if (closed_) {
      range["EndingSequenceNumber"] =
          records_.empty() ? std::string("1") : records_.back().sequence_number;
    }
    nlohmann::json shard = {
        {"ShardId", kShard},
        {"HashKeyRange",
         {{"StartingHashKey", "0"}, {"EndingHashKey", "340282366920938463463374607431768211455"}}},
        {"SequenceNumberRange", range}};
    return nlohmann::json{{"Shards", nlohmann::json::array({shard})}}.dump();
  }

  Result<std::string> get_records(const nlohmann::json& body) {
    const std::string it = body.at("ShardIterator").get<std::string>();
    auto found = iterators_.find(it);
    if (found == iterators_.end()) {
      return error(StatusCode::kExpiredIterator, "GetRecords", "ExpiredIteratorException",
                   "Iterator expired");
    }
    const std::size_t pos = found->second;
    const std::size_t limit = body.value("Limit", std::size_t{10000});
    const std::size_t end = std::min(records_.size(), pos + limit);
    nlohmann::json reply;
    reply["Records"] = nlohmann::json::array();
    for (std::size_t i = pos; i < end; ++i) {
      const auto& r = records_[i];
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(r.arrival.time_since_epoch())
              .count();
      reply["Records"].push_back({{"SequenceNumber", r.sequence_number},
                                  {"PartitionKey", r.partition_key},
                                  {"Data", aws::base64_encode(r.data)},
                                  {"ApproximateArrivalTimestamp", static_cast<double>(ms) / 1e3}});
    }
    const bool at_end = closed_ && end == records_.size() && (pos == end || end_with_last_records_);
    if (std::exchange(drop_next_iterator_, false)) {
      // Neither: the answer lost its iterator.
    } else if (at_end) {
      reply["ChildShards"] = child_shards_;
    } else {
      reply["NextShardIterator"] = new_iterator(end);
    }
    reply["MillisBehindLatest"] = millis_behind_override_
                                      ? *millis_behind_override_
                                      : (end < records_.size() ? std::int64_t{5000} : 0);
    return reply.dump();
  }

  const Clock& clock_;
  const std::string endpoint_ = "http://fake-kinesis";
  const std::string region_ = "us-east-1";
  mutable std::mutex mu_;
  std::vector<StoredRecord> records_;
  bool closed_ = false;
  bool answer_list_shards_ = false;
  bool drop_next_iterator_ = false;
  bool end_with_last_records_ = false;
  bool deleted_ = false;
  bool shard_expired_ = false;
  nlohmann::json child_shards_ = nlohmann::json::array();
  std::optional<std::int64_t> millis_behind_override_;
  std::map<std::string, std::size_t> iterators_;
  std::uint64_t next_iterator_ = 1;
  std::map<std::string, std::deque<Status>> faults_;
  std::map<std::string, std::deque<std::string>> canned_;
  std::function<void(const std::string&)> during_call_;
  std::vector<Call> calls_;
};

// A fetcher over a FakeKinesis with a ManualClock, and helpers to drive it.
struct FetcherHarness {
  ManualClock clock;
  std::shared_ptr<FakeKinesis> fake = std::make_shared<FakeKinesis>(clock);
  kinesis::KinesisClient client{fake};

  std::unique_ptr<ShardFetcher> make(StartPosition start, RetrievalConfig config = {},
                                     std::uint64_t seed = 42) {
    return std::make_unique<ShardFetcher>(client, kStream, kShard, std::move(start),
                                          std::move(config), clock, seed);
  }

  // Advances the clock to the step's next time (if finite and in the future).
  void advance_to(const FetchStep& step) {
    if (step.next_step_at == Clock::MonoTime::max()) return;
    const auto now = clock.now();
    if (step.next_step_at > now) clock.advance(step.next_step_at - now);
  }

  // Drives the fetcher (advancing the clock as told) for at most `max_steps`, taking every
  // batch into `out` when `consume`; stops when finished or when `until()` holds.
  void run(ShardFetcher& f, std::vector<kcl::Record>& out, std::size_t max_steps,
           const std::function<bool()>& until = {}, bool consume = true) {
    for (std::size_t i = 0; i < max_steps && !f.finished(); ++i) {
      if (until && until()) return;
      FetchStep step = f.fetch_step();
      if (consume) {
        while (auto b = f.take_batch()) {
          for (auto& r : b->records) out.push_back(std::move(r));
        }
      }
      if (step.wait_for_take && !consume) return;
      advance_to(step);
    }
    if (consume) {
      while (auto b = f.take_batch()) {
        for (auto& r : b->records) out.push_back(std::move(r));
      }
    }
  }
};

}  // namespace kcl::retrieval::testing
