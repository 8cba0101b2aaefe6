// Value types of the Kinesis operations kcl-cpp uses.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/record.h"
#include "kcl/status.h"

namespace kcl::kinesis {

// How the data calls (GetRecords, PutRecord(s), SubscribeToShard) are encoded: AWS JSON 1.1
// (record data in base64) or CBOR (application/x-amz-cbor-1.1, record data as raw bytes; see
// kinesis/kinesis_cbor.h). The control-plane calls are JSON either way.
enum class Wire { kJson, kCbor };

struct HashKeyRange {
  std::string starting_hash_key;  // decimal, 128-bit
  std::string ending_hash_key;
};

struct SequenceNumberRange {
  std::string starting_sequence_number;
  std::string ending_sequence_number;  // empty while the shard is open
};

struct Shard {
  std::string shard_id;
  std::string parent_shard_id;           // empty when none
  std::string adjacent_parent_shard_id;  // empty when none (set for a merge child)
  HashKeyRange hash_key_range;
  SequenceNumberRange sequence_number_range;
  bool closed() const { return !sequence_number_range.ending_sequence_number.empty(); }
};

enum class ShardFilterType {
  kNone,
  kAfterShardId,
  kAtTrimHorizon,
  kFromTrimHorizon,
  kAtLatest,
  kAtTimestamp,
  kFromTimestamp,
};

struct ShardFilter {
  ShardFilterType type = ShardFilterType::kNone;
  std::string shard_id;                                            // kAfterShardId
  std::optional<std::chrono::system_clock::time_point> timestamp;  // k*Timestamp
};

struct StreamSummary {
  std::string stream_name;
  std::string stream_arn;
  std::string stream_status;  // CREATING, ACTIVE, DELETING, UPDATING
  int open_shard_count = 0;
  int retention_period_hours = 0;
  std::chrono::system_clock::time_point creation_timestamp{};
};

// A registered enhanced fan-out consumer of a stream.
struct StreamConsumer {
  std::string consumer_name;
  std::string consumer_arn;
  std::string consumer_status;  // CREATING, ACTIVE, DELETING
  std::chrono::system_clock::time_point creation_timestamp{};
};

enum class IteratorType {
  kTrimHorizon,
  kLatest,
  kAtSequenceNumber,
  kAfterSequenceNumber,
  kAtTimestamp,
};

// The name the API gives an iterator type ("TRIM_HORIZON", "AT_SEQUENCE_NUMBER", ...).
inline const char* iterator_type_name(IteratorType t) {
  switch (t) {
    case IteratorType::kTrimHorizon:
      return "TRIM_HORIZON";
    case IteratorType::kLatest:
      return "LATEST";
    case IteratorType::kAtSequenceNumber:
      return "AT_SEQUENCE_NUMBER";
    case IteratorType::kAfterSequenceNumber:
      return "AFTER_SEQUENCE_NUMBER";
    case IteratorType::kAtTimestamp:
      return "AT_TIMESTAMP";
  }
  return "TRIM_HORIZON";
}

struct IteratorPosition {
  IteratorType type = IteratorType::kTrimHorizon;
  std::string sequence_number;                        // AT_/AFTER_SEQUENCE_NUMBER
  std::chrono::system_clock::time_point timestamp{};  // AT_TIMESTAMP
};

struct ChildShard {
  std::string shard_id;
  std::vector<std::string> parent_shards;
  HashKeyRange hash_key_range;
};

// The bytes a batch of records points into: a GetRecords answer's body (base64 data decoded
// in place, strings read where they lie) plus the few strings that could not be views (a
// JSON string with escapes, unescaped). Records hold it through a shared_ptr; once records
// point into it, it is never written again.
struct RecordsBuffer {
  RecordsBuffer() = default;
  RecordsBuffer(const RecordsBuffer&) = delete;
  RecordsBuffer& operator=(const RecordsBuffer&) = delete;
  // Hands a large body back to the transport for a later answer (aws::response_body_recycler).
  ~RecordsBuffer();

  std::string body;
  std::deque<std::string> unescaped;  // a deque: adding one never moves the others
  std::string shard_id;               // set by the records source, for the records' shard_id
  // Bytes this buffer holds (for the prefetch bound).
  std::size_t footprint() const noexcept;
};

// One record as Kinesis returns it (before KPL deaggregation). Views: into the
// GetRecordsResult's buffer for a parsed answer, or into whatever the builder keeps alive.
struct KinesisRecord {
  std::string_view sequence_number;
  std::string_view partition_key;
  std::string_view explicit_hash_key;  // rarely returned; empty when absent
  std::chrono::system_clock::time_point approximate_arrival_timestamp{};
  std::string_view data;  // base64-decoded bytes
};

// Takes an answer's records one at a time, in order, as they are parsed, instead of
// GetRecordsResult::records (which then stays empty): a caller that turns each into something
// else saves writing and reading them back through a vector. The views point into the
// result's buffer, which is set before the first record. A parse that fails part-way has
// handed over the records before the failure: they are not an answer, and the caller drops
// them.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual void add(const KinesisRecord& record) = 0;
};

struct GetRecordsResult {
  // What `records` point into; a fresh buffer per answer (the previous one lives on in the
  // records made from it).
  std::shared_ptr<RecordsBuffer> buffer;
  std::vector<KinesisRecord> records;
  // Absent when the shard is closed and fully read (end of shard).
  std::optional<std::string> next_shard_iterator;
  // SubscribeToShardEvent only: where to resubscribe after; absent at the shard's end.
  std::optional<std::string> continuation_sequence_number;
  std::int64_t millis_behind_latest = 0;
  std::vector<ChildShard> child_shards;
  bool shard_ended() const { return !next_shard_iterator.has_value(); }
  std::size_t payload_bytes = 0;  // sum of decoded data sizes
  // Empties everything an answer sets (before a parse, and after a failed one); the buffer
  // and the records vector's capacity stay.
  void reset_answer() {
    records.clear();
    next_shard_iterator.reset();
    continuation_sequence_number.reset();
    millis_behind_latest = 0;
    child_shards.clear();
    payload_bytes = 0;
  }
};

// Whether [offset, offset + size) lies within a buffer of `buffer_size` bytes (a
// SubscribeToShardEvent's payload in its frame), and the error when it does not.
inline bool range_within(std::size_t buffer_size, std::size_t offset, std::size_t size) {
  return offset <= buffer_size && size <= buffer_size - offset;
}
inline Status payload_range_error() {
  return Status(StatusCode::kInvalidArgument,
                "SubscribeToShardEvent: payload range outside its buffer");
}

struct PutRecordsEntry {
  std::string data;
  std::string partition_key;
  std::string explicit_hash_key;  // optional
};

struct PutRecordsEntryResult {
  bool ok = false;
  std::uint32_t shard = 0;      // when ok: its shard id's index in PutRecordsResult::shard_ids
  std::string shard_id;         // when ok (empty when the request did not keep positions)
  std::string sequence_number;  // likewise
  std::string error_code;       // e.g. ProvisionedThroughputExceededException
  std::string error_message;
};

struct PutRecordsResult {
  int failed_record_count = 0;
  std::vector<PutRecordsEntryResult> records;  // same order as the request
  // The shard ids the service wrote to, each once, in the order they first appear.
  std::vector<std::string> shard_ids;
};

struct PutRecordResult {
  std::string shard_id;
  std::string sequence_number;
};

}  // namespace kcl::kinesis
