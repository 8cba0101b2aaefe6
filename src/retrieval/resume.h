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

// Deaggregates result.records (cleared) into `batch` in shard order, the records pointing into
// result.buffer (which gets the shard id, and which `result` lets go of: the batch's records
// alone keep it, so it goes back to be reused once they are gone), drops what the resume filter
// covers while `resume_filter` is on (and turns it off once past the checkpoint), and sets
// batch.bytes to what the batch holds in memory.
BatchCounts fill_batch(kinesis::GetRecordsResult& result, std::string_view shard_id,
                       const StartPosition& start, bool& resume_filter, FetchedBatch& batch);

}  // namespace kcl::retrieval
