// kpl/kpl_format.h: the KPL aggregated record, as the KPL writes it: the one place its writer
// (producer/kpl_aggregator.h) and its reader (retrieval/kpl_deaggregator.h) take it from.
//
// An aggregate is the bytes F3 89 9A C2, then a protobuf AggregatedRecord
//   AggregatedRecord { 1: repeated string partition_key_table,
//                      2: repeated string explicit_hash_key_table,
//                      3: repeated Record records }
//   Record { 1: required uint64 partition_key_index, 2: optional uint64 explicit_hash_key_index,
//            3: required bytes data, 4: repeated Tag tags }
//   Tag { 1: required string key, 2: optional string value }
// then the 16-byte MD5 of the protobuf bytes (the bytes between the magic and the digest).
// The protobuf encoding itself is kpl/protobuf_wire.h.
//
// Thread safety: constants and functions over values; safe from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kcl::kpl {

inline constexpr std::array<unsigned char, 4> kMagic = {0xF3, 0x89, 0x9A, 0xC2};
inline constexpr std::size_t kDigestSize = 16;

// Field numbers of the three messages. All below 16, so each key takes one byte.
namespace aggregated_record {
inline constexpr std::uint32_t kPartitionKeyTable = 1;
inline constexpr std::uint32_t kExplicitHashKeyTable = 2;
inline constexpr std::uint32_t kRecords = 3;
}  // namespace aggregated_record
namespace record {
inline constexpr std::uint32_t kPartitionKeyIndex = 1;
inline constexpr std::uint32_t kExplicitHashKeyIndex = 2;
inline constexpr std::uint32_t kData = 3;
inline constexpr std::uint32_t kTags = 4;
}  // namespace record
namespace tag {
inline constexpr std::uint32_t kKey = 1;
inline constexpr std::uint32_t kValue = 2;
}  // namespace tag

// True when `data` starts with the magic (whether or not the rest is valid).
bool has_magic(std::string_view data) noexcept;

// Bytes of an aggregate whose protobuf body takes `body_size` bytes (magic + body + MD5).
constexpr std::size_t framed_size(std::size_t body_size) noexcept {
  return kMagic.size() + body_size + kDigestSize;
}

// ---- reading ----

enum class FrameCheck {
  kOk,          // `body` is the protobuf bytes, their MD5 checked
  kTooShort,    // shorter than magic + digest
  kNoMd5,       // MD5 could not be computed (e.g. a FIPS-only OpenSSL): nothing to trust
  kMd5Mismatch  // the trailer is not the MD5 of the bytes before it
};

// Checks the size and the MD5 trailer of `data`, which starts with the magic, and on kOk
// sets `body` to the protobuf bytes (a view into `data`).
FrameCheck open_frame(std::string_view data, std::string_view& body) noexcept;

// ---- writing ----

// Appends the magic to `out`, which must be empty: the trailer covers all that follows it.
void append_magic(std::string& out);
// Appends the MD5 of everything in `out` after the magic. Without MD5 (a FIPS-only OpenSSL)
// the trailer is not the digest, and the aggregate fails its check at the reader.
void append_digest(std::string& out);

}  // namespace kcl::kpl
