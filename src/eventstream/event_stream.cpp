#include "eventstream/event_stream.h"

#include <zlib.h>

namespace kcl::eventstream {

namespace {
std::uint32_t be32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (std::uint32_t{u[0]} << 24) | (std::uint32_t{u[1]} << 16) | (std::uint32_t{u[2]} << 8) |
         u[3];
}
std::uint32_t crc(const char* p, std::size_t n) {
  return static_cast<std::uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(p), static_cast<uInt>(n)));
}
void put32(std::string& s, std::uint32_t v) {
  for (int sh = 24; sh >= 0; sh -= 8) s.push_back(static_cast<char>((v >> sh) & 0xff));
}
}  // namespace

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

Decoder::Decoder(std::size_t max_message_bytes) : max_(max_message_bytes) {}

Status Decoder::feed(std::string_view bytes, std::vector<Message>& out) {
  if (!error_.ok()) return error_;
  // Whole messages are decoded straight from `bytes` when nothing is held back, so a
  // payload is copied once (into its Message); only an incomplete tail is buffered.
  const bool direct = buf_.empty();
  if (!direct) buf_.append(bytes);
  const std::string_view view = direct ? bytes : std::string_view(buf_);
  std::size_t pos = 0;
  auto bad = [&](const std::string& what) {
    error_ = Status(StatusCode::kInternal, "event stream: " + what + " (message at byte " +
                                               std::to_string(offset_ + pos) + ")");
    buf_.clear();
    return error_;
  };
  while (view.size() - pos >= 12) {
    const char* m = view.data() + pos;
    const std::uint32_t total = be32(m);
    const std::uint32_t hlen = be32(m + 4);
    if (crc(m, 8) != be32(m + 8))
      return bad("prelude checksum mismatch (CRC-32 of the first 8 bytes)");
    if (total < 16) return bad("message length " + std::to_string(total) + " below 16");
    if (total > max_) return bad("message length " + std::to_string(total) + " above the maximum");
    if (hlen > total - 16) return bad("headers length past the message");
    if (view.size() - pos < total) break;
    if (crc(m, total - 4) != be32(m + total - 4))
      return bad("message checksum mismatch (CRC-32 of the message)");
    Message msg;
    std::size_t h = 12;
    const std::size_t hend = 12 + hlen;
    while (h < hend) {
      const std::size_t nlen = static_cast<unsigned char>(m[h]);
      if (h + 1 + nlen + 1 > hend) return bad("truncated header");
      Header hd;
      hd.name.assign(m + h + 1, nlen);
      h += 1 + nlen;
      const auto type = static_cast<unsigned char>(m[h++]);
      auto need = [&](std::size_t n) { return h + n <= hend; };
      switch (type) {
        case 0:
        case 1:
          hd.value.type = static_cast<HeaderType>(type);
          hd.value.boolean = type == 0;
          break;
        case 2:
          if (!need(1)) return bad("truncated header");
          hd.value.integer = static_cast<std::int8_t>(m[h]);
          h += 1;
          break;
        case 3:
          if (!need(2)) return bad("truncated header");
          hd.value.integer = static_cast<std::int16_t>((static_cast<unsigned char>(m[h]) << 8) |
                                                       static_cast<unsigned char>(m[h + 1]));
          h += 2;
          break;
        case 4:
          if (!need(4)) return bad("truncated header");
          hd.value.integer = static_cast<std::int32_t>(be32(m + h));
          h += 4;
          break;
        case 5:
        case 8:
          if (!need(8)) return bad("truncated header");
          hd.value.integer =
              static_cast<std::int64_t>((std::uint64_t{be32(m + h)} << 32) | be32(m + h + 4));
          h += 8;
          break;
        case 6:
        case 7: {
          if (!need(2)) return bad("truncated header");
          const std::size_t len =
              (static_cast<std::size_t>(static_cast<unsigned char>(m[h])) << 8) |
              static_cast<unsigned char>(m[h + 1]);
          h += 2;
          if (!need(len)) return bad("truncated header");
          hd.value.bytes.assign(m + h, len);
          h += len;
          break;
        }
        case 9:
          if (!need(16)) return bad("truncated header");
          hd.value.bytes.assign(m + h, 16);
          h += 16;
          break;
        default:
          return bad("unknown header type " + std::to_string(type));
      }
      if (type <= 9) hd.value.type = static_cast<HeaderType>(type);
      msg.headers.push_back(std::move(hd));
    }
    msg.payload.reserve(total - 16 - hlen + Message::kPayloadSlack);
    msg.payload.assign(m + hend, total - 16 - hlen);
    out.push_back(std::move(msg));
    pos += total;
  }
  offset_ += pos;
  if (direct) {
    buf_.assign(view.substr(pos));
  } else {
    buf_.erase(0, pos);
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
  const auto total = static_cast<std::uint32_t>(16 + headers.size() + message.payload.size());
  put32(out, total);
  put32(out, static_cast<std::uint32_t>(headers.size()));
  put32(out, crc(out.data(), 8));
  out += headers;
  out += message.payload;
  put32(out, crc(out.data(), out.size()));
  return out;
}

}  // namespace kcl::eventstream
