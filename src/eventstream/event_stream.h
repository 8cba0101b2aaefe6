// eventstream/event_stream.h: the AWS event stream encoding (application/vnd.amazon.eventstream),
// the framing of SubscribeToShard's responses.
//
// A message: u32 total length | u32 headers length | u32 prelude CRC (CRC-32 of the first 8
// bytes) | headers | payload | u32 message CRC (CRC-32 of everything before it); a header is
// u8 name length, name, u8 type, value (big-endian integers; bytes and strings with a u16
// length; timestamps as i64 ms; uuids as 16 bytes).
//
// Decoder: incremental (bytes arrive in any pieces; a message may span many feeds and a feed
// may hold many messages). Both CRCs are checked (CRC-32 from ISA-L, which runs at tens of
// GB/s where zlib's runs at 3-4); a length is checked against the maximum and the minimum
// (16) before anything waits for it, so a corrupt prefix never makes the decoder buffer or
// allocate what it claims. On a malformed stream feed() returns kInternal naming the fault
// and the stream offset of the message ("message checksum mismatch ... (message at byte
// 4096)") and the decoder stays failed.
//
// One copy per byte: once a message's prelude is checked, its whole frame is copied, piece by
// piece as it arrives, into one buffer of its own (taken from a recycler when one is given and
// the message is large), and the running CRC is taken over each piece just copied, while it is
// in cache. The decoded Message owns that buffer and its payload is a view into it, so a
// parser can decode the payload in place and keep records pointing into the buffer.
//
// Thread safety: a Decoder is used by one thread at a time; encode() is pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/capacity_recycler.h"
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
  // A decoded message's frame has at least this much capacity past its end, so a JSON parser
  // that reads ahead of the payload (simdjson's padding) takes it without a copy.
  static constexpr std::size_t kPayloadSlack = 64;
  std::vector<Header> headers;
  // The whole frame as it came (prelude, headers, payload, message CRC) for a decoded message;
  // for one built to encode, just the payload (set_payload). The payload lies at
  // [payload_offset, payload_offset + payload_size).
  std::string frame;
  std::size_t payload_offset = 0;
  std::size_t payload_size = 0;

  std::string_view payload() const { return {frame.data() + payload_offset, payload_size}; }
  void set_payload(std::string payload);
  // nullptr when absent.
  const HeaderValue* header(std::string_view name) const;
  // "" when absent or not a string.
  std::string_view string_header(std::string_view name) const;
};

class Decoder {
 public:
  // The protocol's largest message.
  static constexpr std::size_t kDefaultMaxMessageBytes = 16 * 1024 * 1024;
  // `buffers`, when given, supplies the frame buffers of large messages (and is where their
  // owners may give them back); it must outlive the decoder.
  explicit Decoder(std::size_t max_message_bytes = kDefaultMaxMessageBytes,
                   base::CapacityRecycler<std::string>* buffers = nullptr);
  // Appends every message completed by `bytes` to `out`.
  Status feed(std::string_view bytes, std::vector<Message>& out);
  // Bytes held of an incomplete message.
  std::size_t buffered() const { return in_frame_ ? frame_.size() : prelude_size_; }
  bool failed() const { return !error_.ok(); }

 private:
  Status fail(const std::string& what);
  // Checks the 12 bytes of prelude_ and starts frame_.
  Status start_frame();
  // Checks the finished frame_'s CRC and headers and appends it to `out`.
  Status finish_frame(std::vector<Message>& out);

  std::size_t max_;
  base::CapacityRecycler<std::string>* buffers_;
  char prelude_[12];
  std::size_t prelude_size_ = 0;
  bool in_frame_ = false;
  std::string frame_;  // the message being received, once its prelude is checked
  std::size_t total_ = 0;
  std::size_t headers_size_ = 0;
  std::uint32_t crc_ = 0;     // CRC-32 of frame_'s bytes so far (never its last 4)
  std::uint64_t offset_ = 0;  // stream offset of the message being received
  Status error_;
};

// CRC-32 (IEEE 802.3, reflected; the event stream's and zlib's), continuing from `crc`.
std::uint32_t crc32(std::uint32_t crc, std::string_view bytes);

// The bytes of one message (for tests, scripted servers and benchmarks).
std::string encode(const Message& message);

}  // namespace kcl::eventstream
