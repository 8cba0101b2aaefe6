#include "aws/base64.h"

#include <array>
#include <cstdint>

namespace kcl::aws {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<std::uint8_t, 256> make_decode_table() {
  std::array<std::uint8_t, 256> t{};
  for (auto& v : t) v = 0xFF;
  for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(kAlphabet[i])] = static_cast<std::uint8_t>(i);
  return t;
}
constexpr auto kDecode = make_decode_table();

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.resize((bytes.size() + 2) / 3 * 4);
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t i = 0, o = 0, n = bytes.size();
  for (; i + 3 <= n; i += 3) {
    std::uint32_t v = (std::uint32_t{in[i]} << 16) | (std::uint32_t{in[i + 1]} << 8) | in[i + 2];
    out[o++] = kAlphabet[(v >> 18) & 63];
    out[o++] = kAlphabet[(v >> 12) & 63];
    out[o++] = kAlphabet[(v >> 6) & 63];
    out[o++] = kAlphabet[v & 63];
  }
  if (n - i == 1) {
    std::uint32_t v = std::uint32_t{in[i]} << 16;
    out[o++] = kAlphabet[(v >> 18) & 63];
    out[o++] = kAlphabet[(v >> 12) & 63];
    out[o++] = '=';
    out[o++] = '=';
  } else if (n - i == 2) {
    std::uint32_t v = (std::uint32_t{in[i]} << 16) | (std::uint32_t{in[i + 1]} << 8);
    out[o++] = kAlphabet[(v >> 18) & 63];
    out[o++] = kAlphabet[(v >> 12) & 63];
    out[o++] = kAlphabet[(v >> 6) & 63];
    out[o++] = '=';
  }
  return out;
}

bool base64_decode_append(std::string_view text, std::string& out) {
  std::size_t n = text.size();
  if (n % 4 != 0) return false;
  if (n == 0) return true;
  std::size_t pad = 0;
  if (text[n - 1] == '=') ++pad;
  if (text[n - 2] == '=') ++pad;
  const std::size_t base = out.size();
  out.resize(base + n / 4 * 3 - pad);
  char* dst = out.data() + base;
  const auto* src = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t full = pad ? n - 4 : n;
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < full; i += 4) {
    std::uint32_t a = kDecode[src[i]], b = kDecode[src[i + 1]], c = kDecode[src[i + 2]],
                  d = kDecode[src[i + 3]];
    bad |= a | b | c | d;
    std::uint32_t v = (a << 18) | (b << 12) | (c << 6) | d;
    *dst++ = static_cast<char>(v >> 16);
    *dst++ = static_cast<char>(v >> 8);
    *dst++ = static_cast<char>(v);
  }
  if (bad & 0xC0) return false;  // 0xFF marks an invalid character
  if (pad) {
    const unsigned char* q = src + full;
    std::uint32_t a = kDecode[q[0]], b = kDecode[q[1]];
    if ((a | b) & 0xC0) return false;
    if (pad == 2) {
      if (b & 0x0F) return false;  // non-canonical trailing bits
      *dst++ = static_cast<char>((a << 2) | (b >> 4));
    } else {
      std::uint32_t c = kDecode[q[2]];
      if ((c & 0xC0) || (c & 0x03)) return false;
      std::uint32_t v = (a << 18) | (b << 12) | (c << 6);
      *dst++ = static_cast<char>(v >> 16);
      *dst++ = static_cast<char>(v >> 8);
    }
  }
  return true;
}

Result<std::string> base64_decode(std::string_view text) {
  std::string out;
  if (!base64_decode_append(text, out)) {
    return Status(StatusCode::kInvalidArgument,
                  "invalid base64 (" + std::to_string(text.size()) + " characters)");
  }
  return out;
}

}  // namespace kcl::aws
