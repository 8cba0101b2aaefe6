// retrieval/resume.h: what both records sources do with a start position and with each answer
// (a GetRecords response or a SubscribeToShardEvent).
//
// Positions: TRIM_HORIZON, LATEST and AT_TIMESTAMP as they are; a checkpoint (S, N) resumes
// AT S (not AFTER: the checkpoint may be sub-record N of an aggregate whose later sub-records
// are still to be delivered) and the resume filter drops every record <= (S, N). Once records
// were fetched, a new iterator or subscription starts AFTER the last whole Kinesis record
// fetched (all its sub-records were queued).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/start_position.h"
#include "kinesis/kinesis_types.h"
#include "retrieval/records_source.h"

namespace kcl::retrieval {

// Where to read from: after `last_fetched` when not empty, else from `start`.
kinesis::IteratorPosition resume_position(const StartPosition& start,
                                          const std::string& last_fetched);

struct BatchCounts {
  std::size_t corrupt_aggregates = 0;
  std::size_t skipped_by_checkpoint = 0;
};

// Turns one answer's records into `batch`, one Kinesis record at a time as the parser hands
// them over (a kinesis::RecordSink), deaggregated in shard order; the records point into
// result.buffer, which gets the shard id. finish() then:
//   - lets go of result.buffer: the batch's records alone keep it, so it goes back to be
//     reused once they are gone;
//   - drops what the resume filter covers while `resume_filter` is on (and turns it off once
//     past the checkpoint);
//   - sets batch.bytes to what the batch holds in memory.
// The batch's vector comes from record_vector_recycler() with room for `expected` records
// (an answer's size is known only at its end); an answer that filled less than half of it
// moves into a vector of its own size, and the large one goes back for the next answer, so
// what a batch holds stays within twice its records.
class BatchBuilder final : public kinesis::RecordSink {
 public:
  BatchBuilder(const kinesis::GetRecordsResult& result, std::string_view shard_id,
               FetchedBatch& batch, std::size_t expected)
      : result_(result), shard_id_(shard_id), batch_(batch), expected_(expected) {}

  void add(const kinesis::KinesisRecord& record) override;

  // Whether the answer had any Kinesis record (an empty aggregate delivers none), and the
  // last one's sequence number (valid until finish()).
  bool received_any() const noexcept { return received_any_; }
  std::string_view last_sequence() const noexcept { return last_sequence_; }
  // The answer's size as the service counts it against the shard's read rate: every Kinesis
  // record's data and partition key (an aggregate counted once, as it came).
  std::size_t answer_bytes() const noexcept { return answer_bytes_; }
  // Kinesis records in the answer (an aggregate counts once).
  std::size_t answer_records() const noexcept { return answer_records_; }

  // After the answer is parsed. The builder then keeps nothing of it.
  BatchCounts finish(kinesis::GetRecordsResult& result, const StartPosition& start,
                     bool& resume_filter);

 private:
  const kinesis::GetRecordsResult& result_;
  std::string_view shard_id_;
  FetchedBatch& batch_;
  std::size_t expected_;
  std::shared_ptr<const void> owner_;  // result_.buffer, once a record came
  kinesis::RecordsBuffer* buffer_ = nullptr;
  std::string_view last_sequence_;
  std::size_t corrupt_ = 0;
  std::size_t answer_bytes_ = 0;
  std::size_t answer_records_ = 0;
  bool received_any_ = false;
};

}  // namespace kcl::retrieval
