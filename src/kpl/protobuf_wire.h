// kpl/protobuf_wire.h: the protobuf wire format, just enough for the KPL aggregate.
//
// A reader that walks a byte buffer it does not own and a few writers that append to a
// std::string. No generated code and no libprotobuf: the KPL format is three messages.
//
// Reader contract (what a malicious or damaged buffer can and cannot do):
//   - every read is bounds-checked against the bytes left; a length prefix larger than what
//     is left is an error, never an allocation or a read past the end;
//   - a varint longer than 10 bytes, or whose 10th byte carries bits above bit 63, is an
//     error (protobuf encoders never write either);
//   - a field key with field number 0 or above 2^29-1, or wire type 6 or 7, is an error;
//   - groups (wire types 3 and 4) are refused: skip() fails on them;
//   - after the first error every later call fails and error() keeps the first reason.
// Overlong but in-range varints (e.g. 0x80 0x00 for 0) are accepted, as libprotobuf does.
//
// Thread safety: a WireReader is a plain value over borrowed bytes; one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kcl::kpl::pb {

enum class WireType : std::uint8_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,  // deprecated groups: refused
  kEndGroup = 4,    // deprecated groups: refused
  kFixed32 = 5,
};

inline constexpr std::uint32_t kMaxFieldNumber = (1u << 29) - 1;
inline constexpr std::size_t kMaxVarintBytes = 10;

class WireReader {
 public:
  explicit WireReader(std::string_view bytes) noexcept : bytes_(bytes) {}
  // The reader borrows its bytes: refuse a temporary string, which would dangle.
  explicit WireReader(std::string&&) = delete;

  // True when every byte has been consumed (and no error occurred).
  bool at_end() const noexcept { return error_ == nullptr && pos_ == bytes_.size(); }
  // Offset of the next unread byte, for error messages.
  std::size_t position() const noexcept { return pos_; }
  // The first error, or nullptr. Static strings.
  const char* error() const noexcept { return error_; }
  bool failed() const noexcept { return error_ != nullptr; }

  // Reads a field key (tag). Fails on a truncated key, field number 0 or > 2^29-1, or wire
  // type 6/7. Wire types 3/4 are returned; skip() refuses them.
  [[nodiscard]] bool read_key(std::uint32_t& field, WireType& type) noexcept;
  [[nodiscard]] bool read_varint(std::uint64_t& value) noexcept;
  [[nodiscard]] bool read_fixed32(std::uint32_t& value) noexcept;
  [[nodiscard]] bool read_fixed64(std::uint64_t& value) noexcept;
  // A length-prefixed value, returned as a view into the reader's buffer (no copy).
  [[nodiscard]] bool read_length_delimited(std::string_view& value) noexcept;
  // Skips the value of a field whose key was just read. Fails on groups.
  [[nodiscard]] bool skip(WireType type) noexcept;

 private:
  bool fail(const char* why) noexcept {
    if (error_ == nullptr) error_ = why;
    return false;
  }
  std::size_t remaining() const noexcept { return bytes_.size() - pos_; }

  std::string_view bytes_;
  std::size_t pos_ = 0;
  const char* error_ = nullptr;
};

// ---- writing ----

// Bytes the varint encoding of `value` takes (1..10).
std::size_t varint_size(std::uint64_t value) noexcept;
void append_varint(std::string& out, std::uint64_t value);
void append_key(std::string& out, std::uint32_t field, WireType type);
void append_varint_field(std::string& out, std::uint32_t field, std::uint64_t value);
void append_bytes_field(std::string& out, std::uint32_t field, std::string_view bytes);
void append_fixed32_field(std::string& out, std::uint32_t field, std::uint32_t value);
void append_fixed64_field(std::string& out, std::uint32_t field, std::uint64_t value);

}  // namespace kcl::kpl::pb
