#include "retrieval/resume.h"

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

BatchCounts fill_batch(kinesis::GetRecordsResult& result, std::string_view shard_id,
                       const StartPosition& start, bool& resume_filter, FetchedBatch& batch) {
  BatchCounts counts;
  std::vector<kinesis::KinesisRecord>& records = result.records;
  // The batch's records alone keep the answer's buffer: a result reused for the next call
  // would otherwise hold this answer's whole body until that call's answer replaced it (an
  // answer more per shard than the prefetch bound counts, never handed back to be reused).
  const std::shared_ptr<kinesis::RecordsBuffer> held = std::move(result.buffer);
  if (records.empty() || !held) {
    records.clear();
    return counts;
  }
  // The records point into the answer's buffer, and so does their shard id.
  kinesis::RecordsBuffer& buffer = *held;
  buffer.shard_id.assign(shard_id);
  const std::shared_ptr<const void> owner = held;
  const std::string_view last_sequence = records.back().sequence_number;
  if (batch.records.empty()) batch.records = record_vector_recycler().take(records.size());
  batch.records.reserve(batch.records.size() + records.size());
  for (const kinesis::KinesisRecord& kr : records) {
    if (deaggregate(kr, buffer.shard_id, owner, batch.records).corrupt()) {
      ++counts.corrupt_aggregates;
    }
  }
  records.clear();
  if (resume_filter) {
    counts.skipped_by_checkpoint =
        drop_through_checkpoint(batch.records, start.sequence_number, start.sub_sequence_number);
    // Sequence numbers only grow along a shard: once past S, nothing later can be <= it.
    if (compare_sequence_numbers(last_sequence, start.sequence_number) > 0) resume_filter = false;
  }
  // What the batch holds: the buffer (the body its records point into) and the records.
  batch.bytes = buffer.footprint() + batch.records.capacity() * sizeof(kcl::Record);
  return counts;
}

}  // namespace kcl::retrieval
