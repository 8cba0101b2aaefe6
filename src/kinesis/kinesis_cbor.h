// kinesis/kinesis_cbor.h: the Kinesis data calls in CBOR (errors: aws::cbor::read_error_body,
// read by the client for any call), as the AWS SDKs send them with
// Content-Type application/x-amz-cbor-1.1 (the X-Amz-Target is the JSON protocol's): the same
// members as AWS JSON 1.1, with record data as CBOR byte strings (no base64) and numbers as
// CBOR integers.
//
// Timestamps: the "cbor-1.1" protocol writes them as epoch *milliseconds* (the AWS SDK for
// Java writes tag 1 and then the milliseconds; kinesis-local answers the plain integer), not
// RFC 8949's epoch seconds. A timestamp is read as milliseconds whether tag 1 precedes it or
// not, an integer or a float; it is written as tag 1 and integer milliseconds.
//
// Answers are decoded as the JSON parsers decode them, into the same types, so a caller
// switches wire without other changes: records are views into the answer's buffer (a byte
// string is its own bytes; Data sent as a base64 text string, as kinesis-local does, is
// decoded in place over its text; an indefinite-length string's chunks are joined in place),
// with no allocation per record. A member whose value is null (or undefined) is absent;
// members kcl-cpp does not read are skipped (at most 32 levels deep). What the shapes cannot
// hold (a wrong type, a truncated item, a length beyond the answer, trailing bytes, text
// that is not UTF-8) is kInternal "Kinesis.<Op>: malformed CBOR response: <field>: <what>
// (byte <offset>)".
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "kcl/status.h"
#include "kinesis/kinesis_types.h"

namespace kcl::kinesis {

inline constexpr std::string_view kCborContentType = "application/x-amz-cbor-1.1";

// Requests.
// {"ShardIterator": it, "Limit": n} (Limit only when positive).
std::string cbor_get_records_request(std::string_view shard_iterator, int limit);
// {"StreamName", "Data" (bytes), "PartitionKey", "ExplicitHashKey" (when given)}. The keys
// must be valid UTF-8 (the caller checks, as for JSON).
std::string cbor_put_record_request(std::string_view stream, const PutRecordsEntry& entry);
// {"ConsumerARN", "ShardId", "StartingPosition": {"Type", "SequenceNumber" | "Timestamp"}};
// kInvalidArgument when the position lacks the sequence number it needs.
Result<std::string> cbor_subscribe_to_shard_request(std::string_view consumer_arn,
                                                    std::string_view shard_id,
                                                    const IteratorPosition& position);

// GetRecords answers: as parse_get_records_response / _in_place (kinesis_client.h), from CBOR.
Status parse_get_records_cbor(std::string_view body, GetRecordsResult& out);
Status parse_get_records_cbor_in_place(std::string&& body, GetRecordsResult& out,
                                       RecordSink* sink = nullptr);
// A SubscribeToShardEvent's CBOR payload at [offset, offset + size) of `buffer` (the
// event-stream frame): as parse_subscribe_to_shard_event_in_place.
Status parse_subscribe_to_shard_event_cbor_in_place(std::string&& buffer, std::size_t offset,
                                                    std::size_t size, GetRecordsResult& out,
                                                    RecordSink* sink = nullptr);
// SubscribeToShard's initial-response payload: a map (its members, none today, are skipped).
Status parse_subscribe_to_shard_initial_response_cbor(std::string_view payload);

// PutRecords' answer for a request of `sent` records: as the JSON path (per-record ErrorCode /
// ErrorMessage, ShardId / SequenceNumber kept only with keep_positions, the shards numbered
// in out.shard_ids; failed_record_count counted from the entries).
Status parse_put_records_cbor(std::string_view body, std::size_t sent, bool keep_positions,
                              PutRecordsResult& out);
Status parse_put_record_cbor(std::string_view body, PutRecordResult& out);

}  // namespace kcl::kinesis
