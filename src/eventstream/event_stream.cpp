#include "eventstream/event_stream.h"

#include <isa-l/crc.h>

#include <algorithm>

#include "base/status_macros.h"

namespace kcl::eventstream {

namespace {
std::uint32_t be32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (std::uint32_t{u[0]} << 24) | (std::uint32_t{u[1]} << 16) | (std::uint32_t{u[2]} << 8) |
         u[3];
}
void put32(std::string& s, std::uint32_t v) {
  for (int sh = 24; sh >= 0; sh -= 8) s.push_back(static_cast<char>((v >> sh) & 0xff));
}

std::uint16_t be16(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<std::uint16_t>((u[0] << 8) | u[1]);
}

// Reads a header value of `type` at m[h, end) into `v`, moving `h` past it; "" or what is
// wrong with it.
std::string read_value(unsigned char type, const char* m, std::size_t& h, std::size_t end,
                       HeaderValue& v) {
  auto need = [&](std::size_t n) { return h + n <= end; };
  switch (type) {
    case 0:
    case 1:
      v.boolean = type == 0;
      break;
    case 2:
      if (!need(1)) return "truncated header";
      v.integer = static_cast<std::int8_t>(m[h]);
      h += 1;
      break;
    case 3:
      if (!need(2)) return "truncated header";
      v.integer = static_cast<std::int16_t>(be16(m + h));
      h += 2;
      break;
    case 4:
      if (!need(4)) return "truncated header";
      v.integer = static_cast<std::int32_t>(be32(m + h));
      h += 4;
      break;
    case 5:
    case 8:
      if (!need(8)) return "truncated header";
      v.integer = static_cast<std::int64_t>((std::uint64_t{be32(m + h)} << 32) | be32(m + h + 4));
      h += 8;
      break;
    case 6:
    case 7: {
      if (!need(2)) return "truncated header";
      const std::size_t len = be16(m + h);
      h += 2;
      if (!need(len)) return "truncated header";
      v.bytes.assign(m + h, len);
      h += len;
      break;
    }
    case 9:
      if (!need(16)) return "truncated header";
      v.bytes.assign(m + h, 16);
      h += 16;
      break;
    default:
      return "unknown header type " + std::to_string(type);
  }
  v.type = static_cast<HeaderType>(type);
  return {};
}

// Reads the headers in m[12, end) into `out`; "" or what is wrong with them.
std::string read_headers(const char* m, std::size_t end, std::vector<Header>& out) {
  std::size_t h = 12;
  while (h < end) {
    const std::size_t nlen = static_cast<unsigned char>(m[h]);
    if (h + 1 + nlen + 1 > end) return "truncated header";
    Header hd;
    hd.name.assign(m + h + 1, nlen);
    h += 1 + nlen;
    const auto type = static_cast<unsigned char>(m[h++]);
    std::string problem = read_value(type, m, h, end, hd.value);
    if (!problem.empty()) return problem;
    out.push_back(std::move(hd));
  }
  return {};
}
}  // namespace

std::uint32_t crc32(std::uint32_t crc, std::string_view bytes) {
  return crc32_gzip_refl(crc, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

void Message::set_payload(std::string payload) {
  frame = std::move(payload);
  payload_offset = 0;
  payload_size = frame.size();
}

const HeaderValue* Message::header(std::string_view name) const {
  for (const Header& h : headers) {
    if (h.name == name) return &h.value;
  }
  return nullptr;
}

std::string_view Message::string_header(std::string_view name) const {
  const HeaderValue* v = header(name);
  return v && v->type == HeaderType::kString ? std::string_view(v->bytes) : std::string_view();
}

Decoder::Decoder(std::size_t max_message_bytes, base::CapacityRecycler<std::string>* buffers)
    : max_(max_message_bytes), buffers_(buffers) {}

Status Decoder::fail(const std::string& what) {
  error_ = Status(StatusCode::kInternal,
                  "event stream: " + what + " (message at byte " + std::to_string(offset_) + ")");
  frame_ = std::string();
  in_frame_ = false;
  prelude_size_ = 0;
  return error_;
}

Status Decoder::start_frame() {
  const std::uint32_t total = be32(prelude_);
  const std::uint32_t hlen = be32(prelude_ + 4);
  if (crc32(0, std::string_view(prelude_, 8)) != be32(prelude_ + 8))
    return fail("prelude checksum mismatch (CRC-32 of the first 8 bytes)");
  if (total < 16) return fail("message length " + std::to_string(total) + " below 16");
  if (total > max_) return fail("message length " + std::to_string(total) + " above the maximum");
  if (hlen > total - 16) return fail("headers length past the message");
  total_ = total;
  headers_size_ = hlen;
  const std::size_t need = total_ + Message::kPayloadSlack;
  if (buffers_ != nullptr) {
    frame_ = buffers_->take(need);
  } else {
    frame_.reserve(need);  // empty: the last frame was handed on (or dropped on a failure)
  }
  frame_.append(prelude_, sizeof prelude_);
  crc_ = crc32(0, frame_);
  prelude_size_ = 0;
  in_frame_ = true;
  return Status::Ok();
}

Status Decoder::finish_frame(std::vector<Message>& out) {
  const char* m = frame_.data();
  if (crc_ != be32(m + total_ - 4))
    return fail("message checksum mismatch (CRC-32 of the message)");
  Message msg;
  const std::string bad = read_headers(m, 12 + headers_size_, msg.headers);
  if (!bad.empty()) return fail(bad);
  msg.payload_offset = 12 + headers_size_;
  msg.payload_size = total_ - 16 - headers_size_;
  msg.frame = std::move(frame_);
  frame_ = std::string();
  in_frame_ = false;
  offset_ += total_;
  out.push_back(std::move(msg));
  return Status::Ok();
}

Status Decoder::feed(std::string_view bytes, std::vector<Message>& out) {
  if (!error_.ok()) return error_;
  while (!bytes.empty()) {
    if (!in_frame_) {
      const std::size_t n = std::min(sizeof prelude_ - prelude_size_, bytes.size());
      std::copy_n(bytes.data(), n, prelude_ + prelude_size_);
      prelude_size_ += n;
      bytes.remove_prefix(n);
      if (prelude_size_ < sizeof prelude_) break;
      KCL_RETURN_IF_ERROR(start_frame());
    }
    // Copy what this piece holds of the frame, then take the CRC over what was just copied
    // (still in cache), never over the frame's own last 4 bytes (the CRC itself).
    const std::size_t at = frame_.size();
    const std::size_t n = std::min(total_ - at, bytes.size());
    frame_.append(bytes.data(), n);
    bytes.remove_prefix(n);
    const std::size_t crc_end = std::min(at + n, total_ - 4);
    if (crc_end > at) crc_ = crc32(crc_, std::string_view(frame_.data() + at, crc_end - at));
    if (frame_.size() == total_) KCL_RETURN_IF_ERROR(finish_frame(out));
  }
  return Status::Ok();
}

std::string encode(const Message& message) {
  std::string headers;
  for (const Header& h : message.headers) {
    headers.push_back(static_cast<char>(h.name.size()));
    headers += h.name;
    headers.push_back(static_cast<char>(h.value.type));
    switch (h.value.type) {
      case HeaderType::kBoolTrue:
      case HeaderType::kBoolFalse:
        break;
      case HeaderType::kByte:
        headers.push_back(static_cast<char>(h.value.integer));
        break;
      case HeaderType::kShort:
        headers.push_back(static_cast<char>((h.value.integer >> 8) & 0xff));
        headers.push_back(static_cast<char>(h.value.integer & 0xff));
        break;
      case HeaderType::kInt:
        put32(headers, static_cast<std::uint32_t>(h.value.integer));
        break;
      case HeaderType::kLong:
      case HeaderType::kTimestamp:
        put32(headers,
              static_cast<std::uint32_t>(static_cast<std::uint64_t>(h.value.integer) >> 32));
        put32(headers, static_cast<std::uint32_t>(h.value.integer));
        break;
      case HeaderType::kBytes:
      case HeaderType::kString:
        headers.push_back(static_cast<char>((h.value.bytes.size() >> 8) & 0xff));
        headers.push_back(static_cast<char>(h.value.bytes.size() & 0xff));
        headers += h.value.bytes;
        break;
      case HeaderType::kUuid:
        headers += h.value.bytes.substr(0, 16);
        break;
    }
  }
  std::string out;
  const auto total = static_cast<std::uint32_t>(16 + headers.size() + message.payload_size);
  put32(out, total);
  put32(out, static_cast<std::uint32_t>(headers.size()));
  put32(out, crc32(0, out));
  out += headers;
  out += message.payload();
  put32(out, crc32(0, out));
  return out;
}

}  // namespace kcl::eventstream
