// eventstream/event_stream.h: the AWS event stream encoding (application/vnd.amazon.eventstream).
// (Provisional decoder; see the eventstream branch for the full module.)
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
  std::vector<Header> headers;
  std::string payload;
  const HeaderValue* header(std::string_view name) const;
  std::string_view string_header(std::string_view name) const;
};

class Decoder {
 public:
  static constexpr std::size_t kDefaultMaxMessageBytes = 16 * 1024 * 1024;
  explicit Decoder(std::size_t max_message_bytes = kDefaultMaxMessageBytes);
  Status feed(std::string_view bytes, std::vector<Message>& out);
  std::size_t buffered() const { return buf_.size(); }
  bool failed() const { return !error_.ok(); }

 private:
  std::size_t max_;
  std::string buf_;
  std::uint64_t offset_ = 0;
  Status error_;
};

std::string encode(const Message& message);

}  // namespace kcl::eventstream
