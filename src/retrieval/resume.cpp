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

BatchCounts fill_batch(std::vector<kinesis::KinesisRecord>& records, std::string_view shard_id,
                       const StartPosition& start, bool& resume_filter, FetchedBatch& batch) {
  BatchCounts counts;
  if (records.empty()) return counts;
  const std::string last_sequence = records.back().sequence_number;
  batch.records.reserve(batch.records.size() + records.size());
  for (auto& kr : records) {
    if (deaggregate(std::move(kr), shard_id, batch.records).corrupt()) ++counts.corrupt_aggregates;
  }
  if (resume_filter) {
    counts.skipped_by_checkpoint =
        drop_through_checkpoint(batch.records, start.sequence_number, start.sub_sequence_number);
    // Sequence numbers only grow along a shard: once past S, nothing later can be <= it.
    if (compare_sequence_numbers(last_sequence, start.sequence_number) > 0) resume_filter = false;
  }
  batch.bytes = 0;
  for (const auto& r : batch.records) batch.bytes += r.data.size();
  return counts;
}

}  // namespace kcl::retrieval
