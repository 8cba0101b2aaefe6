#include "retrieval/resume.h"

#include <iterator>

#include "retrieval/kpl_deaggregator.h"

namespace kcl::retrieval {

kinesis::IteratorPosition resume_position(const StartPosition& start,
                                          const std::string& last_fetched) {
  kinesis::IteratorPosition p;
  if (!last_fetched.empty()) {
    p.type = kinesis::IteratorType::kAfterSequenceNumber;
    p.sequence_number = last_fetched;
    return p;
  }
  switch (start.kind) {
    case StartPosition::Kind::kTrimHorizon:
      p.type = kinesis::IteratorType::kTrimHorizon;
      break;
    case StartPosition::Kind::kLatest:
      p.type = kinesis::IteratorType::kLatest;
      break;
    case StartPosition::Kind::kAtTimestamp:
      p.type = kinesis::IteratorType::kAtTimestamp;
      p.timestamp = start.timestamp;
      break;
    case StartPosition::Kind::kAfterCheckpoint:
      p.type = kinesis::IteratorType::kAtSequenceNumber;
      p.sequence_number = start.sequence_number;
      break;
  }
  return p;
}

void BatchBuilder::add(const kinesis::KinesisRecord& record) {
  if (!received_any_) {
    received_any_ = true;
    // The records point into the answer's buffer, and so does their shard id.
    owner_ = result_.buffer;
    buffer_ = result_.buffer.get();
    buffer_->shard_id.assign(shard_id_);
    if (batch_.records.empty()) {
      batch_.records = record_vector_recycler().take(expected_);
    } else {
      batch_.records.reserve(batch_.records.size() + expected_);
    }
  }
  if (deaggregate(record, buffer_->shard_id, owner_, batch_.records).corrupt()) ++corrupt_;
  last_sequence_ = record.sequence_number;
  answer_bytes_ += record.data.size() + record.partition_key.size();
  ++answer_records_;
}

BatchCounts BatchBuilder::finish(kinesis::GetRecordsResult& result, const StartPosition& start,
                                 bool& resume_filter) {
  BatchCounts counts;
  counts.corrupt_aggregates = corrupt_;
  // The batch's records alone keep the answer's buffer: a result reused for the next call
  // would otherwise hold this answer's whole body until that call's answer replaced it (an
  // answer more per shard than the prefetch bound counts, never handed back to be reused).
  const std::shared_ptr<kinesis::RecordsBuffer> held = std::move(result.buffer);
  owner_.reset();
  buffer_ = nullptr;
  if (!received_any_ || held == nullptr) return counts;
  std::vector<kcl::Record>& records = batch_.records;
  if (records.capacity() / 2 > records.size() &&
      records.capacity() * sizeof(kcl::Record) >=
          base::CapacityRecycler<std::vector<kcl::Record>>::kMinBytes) {
    std::vector<kcl::Record> fitted;
    fitted.reserve(records.size());
    std::move(records.begin(), records.end(), std::back_inserter(fitted));
    record_vector_recycler().give(std::move(records));
    records = std::move(fitted);
  }
  if (resume_filter) {
    counts.skipped_by_checkpoint =
        drop_through_checkpoint(records, start.sequence_number, start.sub_sequence_number);
    // Sequence numbers only grow along a shard: once past S, nothing later can be <= it.
    if (compare_sequence_numbers(last_sequence_, start.sequence_number) > 0) {
      resume_filter = false;
    }
  }
  // What the batch holds: the buffer (the body its records point into) and the records.
  batch_.bytes = held->footprint() + records.capacity() * sizeof(kcl::Record);
  return counts;
}

}  // namespace kcl::retrieval
