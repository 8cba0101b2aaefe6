// retrieval/kpl_deaggregator.h: KPL aggregated records -> user records, and the
// "resume with sub-sequence" filter.
//
// Format: kpl/kpl_format.h (the magic F3 89 9A C2, a protobuf AggregatedRecord of partition
// key and explicit hash key tables and Records, the 16-byte MD5 of the protobuf bytes), shared
// with the producer's writer.
//
// What deaggregate() does with one Kinesis record, by case:
//   no magic                         -> kPlain: one Record, sub_sequence 0, aggregated=false.
//   magic, valid, N >= 1 sub-records -> kDeaggregated: N Records, sequence number of the
//                                       aggregate, sub_sequence 0..N-1, aggregated=true, keys
//                                       from the tables, arrival time of the aggregate.
//   magic, valid, 0 sub-records      -> kEmptyAggregate: nothing appended (there is nothing
//                                       to deliver, as in the Java KCL); reason says so, so
//                                       the caller can count or log it. NB: then no delivered
//                                       record carries this sequence number. One difference:
//                                       the magic and MD5("") alone (an empty protobuf), the
//                                       Java KCL delivers as a plain record of those 20 bytes.
//   magic, but shorter than magic + digest, MD5 mismatch, protobuf parse error, index out of
//   range, required field missing, or expanding past DeaggregationLimits
//                                    -> kCorrupt: the record AS IT CAME (one Record,
//                                       aggregated=false, the full original bytes) and a
//                                       reason naming shard, sequence number and cause.
// Nothing is ever dropped, and on kCorrupt nothing partial is appended.
//
// Protobuf rules followed (as libprotobuf parses proto2): unknown fields are skipped by wire
// type; a known field number with an unexpected wire type is an unknown field; a repeated
// scalar occurrence of a non-repeated field keeps the last value; strings are not checked
// for UTF-8. Groups (wire types 3/4), truncated or over-long varints and lengths past the
// end are parse errors. Tags are parsed for validity (a malformed tag is a parse error, as
// in libprotobuf) and otherwise ignored.
//
// Not done here (differences from the Java KCL's AggregatorUtil): on an index error the Java
// KCL keeps the sub-records decoded so far; here nothing partial is kept. Its rule for an
// aggregate holding records that hash outside the shard's range is drop_aggregates_outside()
// below, applied by the shard consumer when RetrievalConfig::drop_aggregates_outside_shard
// asks for it.
//
// Thread safety: free functions over values; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/record.h"
#include "kinesis/kinesis_types.h"
#include "kpl/hash_key.h"

namespace kcl::retrieval {

enum class DeaggregationOutcome {
  kPlain,           // not an aggregate; delivered as one record
  kDeaggregated,    // a valid aggregate; one record per sub-record
  kEmptyAggregate,  // a valid aggregate holding no sub-records; nothing delivered
  kCorrupt,         // magic present but invalid; delivered as it came
};
std::string_view to_string(DeaggregationOutcome outcome) noexcept;

struct DeaggregationLimits {
  // Most bytes of partition keys + explicit hash keys + data that one aggregate may expand
  // into. Guards against an aggregate that references one huge table key from many tiny
  // sub-records (a few bytes of input each -> gigabytes of output). Default 64 MiB: a
  // KPL-written aggregate (default AggregationMaxSize 50 KiB, at most 1 MiB; partition keys at
  // most 256 characters) stays far below it. Range: >= 1; an aggregate over it is kCorrupt.
  std::size_t max_expanded_bytes = std::size_t{64} << 20;
};

struct DeaggregationResult {
  DeaggregationOutcome outcome = DeaggregationOutcome::kPlain;
  std::size_t records_appended = 0;
  // Empty for kPlain / kDeaggregated. For kCorrupt e.g. "KPL aggregate in shard
  // shardId-000000000001 seq 4959...: MD5 mismatch; delivered as it came".
  std::string reason;

  bool corrupt() const noexcept { return outcome == DeaggregationOutcome::kCorrupt; }
};

// Appends the record(s) `in` stands for to `out` (see the table above), without copying:
// the records' strings are views into `in`'s strings and `shard_id`, all of which must lie in
// memory `owner` keeps alive and never changes (a GetRecordsResult's buffer); each record
// holds `owner`.
DeaggregationResult deaggregate(const kinesis::KinesisRecord& in, std::string_view shard_id,
                                const std::shared_ptr<const void>& owner,
                                std::vector<kcl::Record>& out,
                                const DeaggregationLimits& limits = {});
// Same, for a record whose strings live anywhere: they are copied first (one buffer shared by
// the records appended).
DeaggregationResult deaggregate(const kinesis::KinesisRecord& in, std::string_view shard_id,
                                std::vector<kcl::Record>& out,
                                const DeaggregationLimits& limits = {});

// Counts over a batch, for metrics and logs.
struct DeaggregationStats {
  std::size_t plain = 0;
  std::size_t aggregates = 0;   // valid aggregates, empty ones included
  std::size_t sub_records = 0;  // records produced from valid aggregates
  std::size_t empty_aggregates = 0;
  std::size_t corrupt = 0;
  std::vector<std::string> reasons;  // one per corrupt or empty aggregate, in order
};

// Deaggregates a whole batch (copying, as the second deaggregate()), appending to `out` in
// order; `in` is left empty.
DeaggregationStats deaggregate_all(std::vector<kinesis::KinesisRecord>&& in,
                                   std::string_view shard_id, std::vector<kcl::Record>& out,
                                   const DeaggregationLimits& limits = {});

// ---- aggregates read from another shard than their records' ----
//
// An aggregate goes to the shard of its own hash key, but its records were packed by the
// producer's shard map: when that map is stale (a split or a merge it has not seen) it can
// hold records whose hash keys belong to another shard. The KPL (and kcl::Producer) then send
// those records again to their own shards, and the Java KCL drops the whole aggregate where
// it was read (its AggregatorUtil), so they are delivered once.

// A shard's hash key range, both ends included.
struct ShardHashRange {
  kpl::HashKey start = 0;
  kpl::HashKey end = ~kpl::HashKey{0};
};
// A lease's or a shard's range from its decimal ends; nullopt when either is not a decimal
// below 2^128 or start > end.
std::optional<ShardHashRange> parse_shard_hash_range(std::string_view start, std::string_view end);

// Erases every record of each aggregate (consecutive records with aggregated() set and one
// sequence number) that holds a record whose hash key (its explicit hash key, else the MD5 of
// its partition key) lies outside `range`, keeping the order of the rest. An explicit hash
// key that does not parse counts as inside (nothing is dropped on a doubt). Returns the
// aggregates erased; `first_dropped`, when given, gets the first one's sequence number.
std::size_t drop_aggregates_outside(std::vector<kcl::Record>& records, const ShardHashRange& range,
                                    std::string* first_dropped = nullptr);

// ---- resuming with a sub-sequence ----
//
// A checkpoint (seq, subseq) means: everything up to and including sub-record `subseq` of the
// record at `seq` was processed. Resume the shard AT_SEQUENCE_NUMBER seq and drop every
// record at or below the checkpoint; what is left is exactly what was not yet processed.
// Note that (seq, 0) cannot tell "plain record seq" from "sub-record 0 of aggregate seq", so
// resuming AFTER_SEQUENCE_NUMBER for it would lose sub-records 1..N-1 of an aggregate;
// AT + this filter is right for both (the Java KCL always resumes AT and filters).

// Orders two Kinesis sequence numbers (decimal, up to 128 bits and more): by length ignoring
// leading zeros, then lexicographically. Returns <0, 0 or >0. Meant for digit strings; any
// other input is ordered consistently but meaninglessly.
int compare_sequence_numbers(std::string_view a, std::string_view b) noexcept;

// True when `r` lies strictly after the checkpoint (seq, subseq), i.e. is to be delivered.
bool after_checkpoint(const kcl::Record& r, std::string_view checkpoint_seq,
                      std::uint64_t checkpoint_subseq) noexcept;

// Erases the records at or below the checkpoint, keeping the order of the rest. Returns how
// many were erased.
std::size_t drop_through_checkpoint(std::vector<kcl::Record>& records,
                                    std::string_view checkpoint_seq,
                                    std::uint64_t checkpoint_subseq);

}  // namespace kcl::retrieval
