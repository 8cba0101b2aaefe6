// tests/support/kpl_builder.h: builds KPL aggregated records for tests, valid and broken.
//
// Deliberately independent of src/retrieval/protobuf_wire: its own small protobuf encoder,
// written from the format description, so an encoding bug is not shared by the code under
// test and the code that makes its inputs.
//
// Format: F3 89 9A C2 | AggregatedRecord protobuf | MD5(protobuf) (16 bytes)
//   AggregatedRecord { 1: repeated string partition_key_table,
//                      2: repeated string explicit_hash_key_table, 3: repeated Record records }
//   Record { 1: uint64 partition_key_index, 2: optional uint64 explicit_hash_key_index,
//            3: bytes data, 4: repeated Tag tags }
//   Tag { 1: string key, 2: optional string value }
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kinesis/kinesis_types.h"

namespace kcl::testing {

struct KplTag {
  std::string key;
  std::optional<std::string> value;
};

// A user record as a producer hands it to the KPL.
struct SubRecord {
  std::string partition_key;
  std::optional<std::string> explicit_hash_key;
  std::string data;
  std::vector<KplTag> tags;
};

// The message shapes, field by field, for crafting any aggregate (including invalid ones:
// an index out of range, a required field left out, unknown fields appended).
struct RawSubRecord {
  std::optional<std::uint64_t> partition_key_index;  // required by the format
  std::optional<std::uint64_t> explicit_hash_key_index;
  std::optional<std::string> data;  // required by the format
  std::vector<KplTag> tags;
  std::string extra_fields;  // raw bytes appended inside the Record (e.g. unknown fields)
};

struct RawAggregate {
  std::vector<std::string> partition_key_table;
  std::vector<std::string> explicit_hash_key_table;
  std::vector<RawSubRecord> records;
  std::string extra_fields;  // raw bytes appended to the AggregatedRecord
};

// Tables from user records. share_keys=true stores each distinct key once (as the KPL does);
// false stores one table entry per record.
RawAggregate to_raw(const std::vector<SubRecord>& records, bool share_keys = true);

// The AggregatedRecord protobuf bytes only (no magic, no digest).
std::string encode_protobuf(const RawAggregate& aggregate);

// magic + body + MD5(body): a correctly framed aggregate around any body, valid or not.
std::string frame(std::string_view protobuf_body);

// frame(encode_protobuf(to_raw(records, share_keys))).
std::string build_aggregate(const std::vector<SubRecord>& records, bool share_keys = true);

// ---- ways to break one ----
// The same bytes with one bit of the digest flipped.
std::string with_bad_md5(std::string aggregate);
// A correctly framed aggregate whose body is the given one cut to `keep` bytes (MD5 valid,
// protobuf truncated).
std::string with_truncated_body(std::string_view protobuf_body, std::size_t keep);

// ---- the encoder itself, for hand-made fields ----
std::string varint(std::uint64_t value);
std::string key(std::uint32_t field, unsigned wire_type);
std::string varint_field(std::uint32_t field, std::uint64_t value);
std::string bytes_field(std::uint32_t field, std::string_view bytes);
std::string fixed32_field(std::uint32_t field, std::uint32_t value);
std::string fixed64_field(std::uint32_t field, std::uint64_t value);
// MD5 of bytes, 16 raw bytes.
std::string md5(std::string_view bytes);
// The 4 magic bytes.
std::string kpl_magic();
// Hex of bytes, lower case (for messages and golden vectors).
std::string to_hex(std::string_view bytes);
std::string from_hex(std::string_view hex);

// A Kinesis record as GetRecords would return it. Its views point into copies kept until the
// test program ends.
kinesis::KinesisRecord kinesis_record(
    std::string data,
    std::string sequence_number = "49590338271490256608559692538361571095921575989136588898",
    std::string partition_key = "outer-pk");

}  // namespace kcl::testing
