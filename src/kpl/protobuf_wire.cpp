#include "kpl/protobuf_wire.h"

namespace kcl::kpl::pb {

bool WireReader::read_varint(std::uint64_t& value) noexcept {
  if (error_ != nullptr) return false;
  std::uint64_t result = 0;
  for (std::size_t i = 0; i < kMaxVarintBytes; ++i) {
    if (pos_ + i >= bytes_.size()) return fail("truncated varint");
    const auto byte = static_cast<unsigned char>(bytes_[pos_ + i]);
    if (i == kMaxVarintBytes - 1 && byte > 1) return fail("varint overflows 64 bits");
    result |= static_cast<std::uint64_t>(byte & 0x7Fu) << (7 * i);
    if ((byte & 0x80u) == 0) {
      pos_ += i + 1;
      value = result;
      return true;
    }
  }
  return fail("varint longer than 10 bytes");
}

bool WireReader::read_key(std::uint32_t& field, WireType& type) noexcept {
  std::uint64_t key = 0;
  if (!read_varint(key)) return false;
  const std::uint64_t number = key >> 3;
  const auto wire = static_cast<unsigned>(key & 7u);
  if (number == 0) return fail("field number 0");
  if (number > kMaxFieldNumber) return fail("field number above 2^29-1");
  if (wire > 5) return fail("invalid wire type (6 or 7)");
  field = static_cast<std::uint32_t>(number);
  type = static_cast<WireType>(wire);
  return true;
}

bool WireReader::read_fixed32(std::uint32_t& value) noexcept {
  if (error_ != nullptr) return false;
  if (remaining() < 4) return fail("truncated fixed32");
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
  }
  pos_ += 4;
  value = v;
  return true;
}

bool WireReader::read_fixed64(std::uint64_t& value) noexcept {
  if (error_ != nullptr) return false;
  if (remaining() < 8) return fail("truncated fixed64");
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
  }
  pos_ += 8;
  value = v;
  return true;
}

bool WireReader::read_length_delimited(std::string_view& value) noexcept {
  std::uint64_t length = 0;
  if (!read_varint(length)) return false;
  // Compare in 64 bits before any narrowing or pointer arithmetic: a huge length is
  // simply "more than is left", never an overflow.
  if (length > static_cast<std::uint64_t>(remaining())) {
    return fail("length-delimited field longer than the bytes left");
  }
  const auto n = static_cast<std::size_t>(length);
  value = bytes_.substr(pos_, n);
  pos_ += n;
  return true;
}

bool WireReader::skip(WireType type) noexcept {
  switch (type) {
    case WireType::kVarint: {
      std::uint64_t ignored = 0;
      return read_varint(ignored);
    }
    case WireType::kFixed64: {
      std::uint64_t ignored = 0;
      return read_fixed64(ignored);
    }
    case WireType::kLengthDelimited: {
      std::string_view ignored;
      return read_length_delimited(ignored);
    }
    case WireType::kFixed32: {
      std::uint32_t ignored = 0;
      return read_fixed32(ignored);
    }
    case WireType::kStartGroup:
    case WireType::kEndGroup:
      return fail("groups (wire type 3/4) are not supported");
  }
  return fail("invalid wire type");
}

std::size_t varint_size(std::uint64_t value) noexcept {
  std::size_t n = 1;
  while (value >= 0x80u) {
    value >>= 7;
    ++n;
  }
  return n;
}

void append_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80u) {
    out.push_back(static_cast<char>(static_cast<unsigned char>((value & 0x7Fu) | 0x80u)));
    value >>= 7;
  }
  out.push_back(static_cast<char>(static_cast<unsigned char>(value)));
}

void append_key(std::string& out, std::uint32_t field, WireType type) {
  append_varint(out, (static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(type));
}

void append_varint_field(std::string& out, std::uint32_t field, std::uint64_t value) {
  append_key(out, field, WireType::kVarint);
  append_varint(out, value);
}

void append_bytes_field(std::string& out, std::uint32_t field, std::string_view bytes) {
  append_key(out, field, WireType::kLengthDelimited);
  append_varint(out, bytes.size());
  out.append(bytes);
}

void append_fixed32_field(std::string& out, std::uint32_t field, std::uint32_t value) {
  append_key(out, field, WireType::kFixed32);
  for (int i = 0; i < 4; ++i) {
    out.push_back(static_cast<char>(static_cast<unsigned char>((value >> (8 * i)) & 0xFFu)));
  }
}

void append_fixed64_field(std::string& out, std::uint32_t field, std::uint64_t value) {
  append_key(out, field, WireType::kFixed64);
  for (int i = 0; i < 8; ++i) {
    out.push_back(static_cast<char>(static_cast<unsigned char>((value >> (8 * i)) & 0xFFu)));
  }
}

}  // namespace kcl::kpl::pb
