// eventstream/event_stream.h: the AWS event stream encoding (application/vnd.amazon.eventstream),
// the framing of SubscribeToShard's responses.
//
// A message: u32 total length | u32 headers length | u32 prelude CRC (CRC-32 of the first 8
// bytes) | headers | payload | u32 message CRC (CRC-32 of everything before it); a header is
// u8 name length, name, u8 type, value (big-endian integers; bytes and strings with a u16
// length; timestamps as i64 ms; uuids as 16 bytes).
//
// Decoder: incremental (bytes arrive in any pieces; a message may span many feeds and a feed
// may hold many messages). Both CRCs are checked; a length is checked against the maximum and
// the minimum (16) before anything waits for it, so a corrupt prefix never makes the decoder
// buffer or allocate what it claims. On a malformed stream feed() returns kInternal naming the
// fault and the stream offset of the message ("message checksum mismatch ... (message at byte
// 4096)") and the decoder stays failed. Whole messages are decoded straight from the bytes fed
// when nothing is held back: each payload is copied once, into its Message.
//
// Thread safety: a Decoder is used by one thread at a time; encode() is pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/status.h"

namespace kcl::eventstream {

enum class HeaderType : std::uint8_t {
  kBoolTrue = 0,
  kBoolFalse = 1,
  kByte = 2,
  kShort = 3,
  kInt = 4,
  kLong = 5,
  kBytes = 6,
  kString = 7,
  kTimestamp = 8,
  kUuid = 9
};
struct HeaderValue {
  HeaderType type = HeaderType::kString;
  bool boolean = false;
  std::int64_t integer = 0;
  std::string bytes;
};
struct Header {
  std::string name;
  HeaderValue value;
};
struct Message {
  // A decoded payload has at least this much capacity past its end, so a JSON parser that
  // reads ahead (simdjson's padding) takes it without a copy.
  static constexpr std::size_t kPayloadSlack = 64;
  std::vector<Header> headers;
  std::string payload;
  // nullptr when absent.
  const HeaderValue* header(std::string_view name) const;
  // "" when absent or not a string.
  std::string_view string_header(std::string_view name) const;
};

class Decoder {
 public:
  // The protocol's largest message.
  static constexpr std::size_t kDefaultMaxMessageBytes = 16 * 1024 * 1024;
  explicit Decoder(std::size_t max_message_bytes = kDefaultMaxMessageBytes);
  // Appends every message completed by `bytes` to `out`.
  Status feed(std::string_view bytes, std::vector<Message>& out);
  // Bytes held of an incomplete message.
  std::size_t buffered() const { return buf_.size(); }
  bool failed() const { return !error_.ok(); }

 private:
  std::size_t max_;
  std::string buf_;
  std::uint64_t offset_ = 0;
  Status error_;
};

// The bytes of one message (for tests, scripted servers and benchmarks).
std::string encode(const Message& message);

}  // namespace kcl::eventstream
