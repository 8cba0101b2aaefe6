// kinesis/put_records_request.h: a PutRecords request body written as its records are added:
// JSON text straight into one buffer, each record's data base64-encoded in place, with no
// JSON document and no copy of the record in between.
//
//   PutRecordsRequest req("orders");
//   req.add(data, "customer-42");            // keys must be valid UTF-8 (aws::is_valid_utf8)
//   client.put_records(std::move(req), options);
//
// Body: {"StreamName":"...","Records":[{"Data":"<base64>","PartitionKey":"...",
//        "ExplicitHashKey":"..."},...]} (ExplicitHashKey only when given).
// With Wire::kCbor the same members in CBOR (application/x-amz-cbor-1.1): a map of two,
// Records an indefinite-length array (its count is known only at the end), each record a
// map with Data as a byte string (the record's bytes as they are, no base64).
//
// Thread safety: a plain value (one thread at a time).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "kinesis/kinesis_types.h"

namespace kcl::kinesis {

class PutRecordsRequest {
 public:
  explicit PutRecordsRequest(std::string_view stream, Wire wire = Wire::kJson);
  Wire wire() const { return wire_; }

  // Makes room for `records` more records carrying `bytes` bytes of data and keys in all.
  void reserve(std::size_t records, std::size_t bytes);
  // Appends one record. The keys must be valid UTF-8 (Kinesis takes Unicode keys); in JSON
  // they are escaped as JSON requires.
  void add(std::string_view data, std::string_view partition_key,
           std::string_view explicit_hash_key = {});
  std::size_t records() const { return records_; }
  // Whether the answer's per-record shard ids and sequence numbers are kept as strings
  // (PutRecordsEntryResult::shard_id, sequence_number). Default true. With false they are
  // checked but left empty (each entry still names its shard through
  // PutRecordsEntryResult::shard): two allocations a record fewer.
  void keep_positions(bool keep) { keep_positions_ = keep; }
  bool keeps_positions() const { return keep_positions_; }
  // The finished body (the request is spent afterwards).
  std::string take_body() &&;

 private:
  void add_cbor(std::string_view data, std::string_view partition_key,
                std::string_view explicit_hash_key);

  std::string body_;
  Wire wire_ = Wire::kJson;
  std::size_t records_ = 0;
  bool keep_positions_ = true;
};

}  // namespace kcl::kinesis
