// The vectorized base64 decoder (used for GetRecords Data) and encoder (used for the
// command line's JSON lines) against plain references, on every length and every invalid
// byte at every position of a vector block, with each kernel this CPU runs (scalar, AVX2,
// AVX-512 VBMI) and with the one chosen at run time.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "aws/base64.h"

namespace kcl::aws {
namespace {

int reference_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// RFC 4648 section 4, one bit at a time: the 6-bit values read off the bits of the input.
std::string reference_encode(const std::string& bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  const std::size_t bits = bytes.size() * 8;
  for (std::size_t start = 0; start < bits; start += 6) {
    int value = 0;
    for (std::size_t b = start; b < start + 6; ++b) {
      const int bit = b < bits ? (static_cast<unsigned char>(bytes[b / 8]) >> (7 - b % 8)) & 1 : 0;
      value = value * 2 + bit;
    }
    out += alphabet[value];
  }
  while (out.size() % 4 != 0) out += '=';
  return out;
}

std::vector<Base64Kernel> kernels() {
  std::vector<Base64Kernel> out;
  for (Base64Kernel k : {Base64Kernel::kScalar, Base64Kernel::kAvx2, Base64Kernel::kAvx512Vbmi}) {
    if (base64_kernel_supported(k)) out.push_back(k);
  }
  return out;
}

std::string name(Base64Kernel k) {
  switch (k) {
    case Base64Kernel::kScalar:
      return "scalar";
    case Base64Kernel::kAvx2:
      return "avx2";
    case Base64Kernel::kAvx512Vbmi:
      return "avx512vbmi";
  }
  return "?";
}

TEST(Base64FastTest, EveryKernelTheCpuRunsGivesTheSameBytesForEveryLengthUpTo4K) {
  EXPECT_TRUE(base64_kernel_supported(Base64Kernel::kScalar));
  std::mt19937_64 rng(43);
  std::string bytes;
  for (std::size_t len = 0; len <= 4096; ++len) {
    bytes.resize(len);
    for (auto& c : bytes) c = static_cast<char>(rng());
    const std::string text = base64_encode(bytes);
    for (Base64Kernel k : kernels()) {
      std::string in_place = text;
      std::size_t written = 0;
      ASSERT_TRUE(base64_decode_in_place_with(k, in_place.data(), in_place.size(), written))
          << name(k) << " " << len;
      ASSERT_EQ(in_place.substr(0, written), bytes) << name(k) << " " << len;
    }
  }
}

// Each kernel's encoding against the bit-by-bit reference, written into a buffer with guard
// bytes on both sides: the encoder writes exactly base64_encoded_size characters and reads
// only the bytes it is given (the input sits at the very end of its own allocation).
TEST(Base64FastTest, EveryKernelEncodesEveryLengthUpTo4KAsTheReferenceAndWritesOnlyItsRoom) {
  std::mt19937_64 rng(44);
  constexpr char kGuard = '#';
  for (std::size_t len = 0; len <= 4096; ++len) {
    std::string bytes(len, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    const std::string expected = reference_encode(bytes);
    ASSERT_EQ(base64_encoded_size(len), expected.size()) << len;
    auto input = std::make_unique<char[]>(len + 1);
    std::copy(bytes.begin(), bytes.end(), input.get());
    const std::string_view view(input.get(), len);
    for (Base64Kernel k : kernels()) {
      std::string out(expected.size() + 64, kGuard);
      char* end = base64_encode_to_with(k, view, out.data() + 32);
      ASSERT_EQ(end - out.data(), static_cast<std::ptrdiff_t>(32 + expected.size()))
          << name(k) << " " << len;
      ASSERT_EQ(out.substr(32, expected.size()), expected) << name(k) << " " << len;
      ASSERT_EQ(out.substr(0, 32), std::string(32, kGuard)) << name(k) << " " << len;
      ASSERT_EQ(out.substr(32 + expected.size()), std::string(32, kGuard)) << name(k) << " " << len;
    }
    std::string appended = "prefix";
    base64_encode_append(bytes, appended);
    ASSERT_EQ(appended, "prefix" + expected) << len;
  }
}

// Every 6-bit value in every character position of a vector step: the range offsets (A-Z,
// a-z, 0-9, '+', '/') are where an encoder's table goes wrong.
TEST(Base64FastTest, EveryKernelEncodesEveryValueInEveryPosition) {
  for (int phase = 0; phase < 64; ++phase) {
    // 64 characters cycled with different phases through 256 characters: the 192 bytes
    // they decode to must encode back to them.
    const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string text;
    for (int i = 0; i < 256; ++i) text += alphabet[static_cast<std::size_t>((i + phase) % 64)];
    auto bytes = base64_decode(text);
    ASSERT_TRUE(bytes.ok());
    ASSERT_EQ(reference_encode(*bytes), text);
    for (Base64Kernel k : kernels()) {
      std::string out(text.size(), '\0');
      base64_encode_to_with(k, *bytes, out.data());
      ASSERT_EQ(out, text) << name(k) << " phase " << phase;
    }
  }
}

TEST(Base64FastTest, RoundTripsEveryLengthUpTo4K) {
  std::mt19937_64 rng(42);
  std::string bytes;
  for (std::size_t len = 0; len <= 4096; ++len) {
    bytes.resize(len);
    for (auto& c : bytes) c = static_cast<char>(rng());
    std::string text = base64_encode(bytes);
    std::string out = "prefix";
    ASSERT_TRUE(base64_decode_append(text, out)) << len;
    ASSERT_EQ(out, "prefix" + bytes) << len;
  }
}

TEST(Base64FastTest, DecodesEveryAlphabetCharacterInEveryLanePosition) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  // 64 characters cycled with different phases through a 256-character text.
  for (int phase = 0; phase < 64; ++phase) {
    std::string text;
    for (int i = 0; i < 256; ++i) text += alphabet[static_cast<std::size_t>((i + phase) % 64)];
    auto d = base64_decode(text);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(base64_encode(*d), text) << phase;
  }
}

TEST(Base64FastTest, RejectsEveryInvalidByteAtEveryPosition) {
  std::mt19937_64 rng(7);
  std::string bytes(213, '\0');
  for (auto& c : bytes) c = static_cast<char>(rng());
  // 284 characters, no padding: four whole 64-character steps and a last step of 28.
  const std::string good = base64_encode(bytes);
  ASSERT_EQ(good.size(), 284u);
  for (int b = 0; b < 256; ++b) {
    const auto c = static_cast<unsigned char>(b);
    const bool valid = reference_value(c) >= 0;
    for (std::size_t pos = 0; pos < good.size(); pos += (pos < 80 || pos >= 250 ? 1 : 7)) {
      // '=' can be legal padding in the last two places; the in-place test below covers them.
      if (c == '=' && pos + 2 >= good.size()) continue;
      std::string text = good;
      text[pos] = static_cast<char>(c);
      std::string out;
      bool ok = base64_decode_append(text, out);
      for (Base64Kernel k : kernels()) {
        std::string copy = text;
        std::size_t written = 0;
        const bool kernel_ok = base64_decode_in_place_with(k, copy.data(), copy.size(), written);
        ASSERT_EQ(kernel_ok, ok) << name(k) << " byte " << b << " at " << pos;
        if (ok) {
          ASSERT_EQ(copy.substr(0, written), out) << name(k) << " byte " << b << " at " << pos;
        }
      }
      if (c == '=') {
        EXPECT_FALSE(ok) << "'=' inside at " << pos;
      } else {
        ASSERT_EQ(ok, valid) << "byte " << b << " at " << pos;
        if (ok) {
          std::string expected = bytes;
          // Recompute the 3 bytes of the group that changed.
          std::size_t g = pos / 4;
          std::uint32_t v = 0;
          for (std::size_t k = 0; k < 4; ++k) {
            v = (v << 6) | static_cast<std::uint32_t>(
                               reference_value(static_cast<unsigned char>(text[g * 4 + k])));
          }
          expected[g * 3] = static_cast<char>(v >> 16);
          expected[g * 3 + 1] = static_cast<char>(v >> 8);
          expected[g * 3 + 2] = static_cast<char>(v);
          ASSERT_EQ(out, expected) << "byte " << b << " at " << pos;
        }
      }
    }
  }
}

TEST(Base64FastTest, PaddingAfterLongInput) {
  std::string bytes(1000, 'x');
  for (std::size_t extra = 0; extra < 3; ++extra) {
    std::string b = bytes + std::string(extra, 'y');
    auto d = base64_decode(base64_encode(b));
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, b);
  }
  std::string t = base64_encode(std::string(999, 'z'));
  t[t.size() - 5] = '=';
  EXPECT_FALSE(base64_decode(t).ok());
}

// Decoding in place: the bytes land over the text; a text with an invalid character anywhere
// (a JSON escape, a quote, bad padding) fails and is left exactly as it was, on the vector
// and the scalar path alike, wherever the character sits.
TEST(Base64FastTest, InPlaceDecodingMatchesAndAFailureLeavesTheTextAsItWas) {
  std::mt19937_64 rng(11);
  for (std::size_t len : {0u, 1u, 2u, 3u, 47u, 48u, 49u, 50u, 96u, 191u, 192u, 1000u, 1023u}) {
    std::string bytes(len, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    const std::string good = base64_encode(bytes);
    std::string text = good;
    std::size_t written = 0;
    ASSERT_TRUE(base64_decode_in_place(text.data(), text.size(), written)) << len;
    ASSERT_EQ(text.substr(0, written), bytes) << len;
    for (std::size_t pos = 0; pos < good.size(); ++pos) {
      for (char bad : {'\\', '"', '\x80', '='}) {
        std::string broken = good;
        if (broken[pos] == bad) continue;
        // '=' is legal in the last two places of a padded text; elsewhere it is not.
        if (bad == '=' && pos + 2 >= good.size()) continue;
        broken[pos] = bad;
        const std::string before = broken;
        ASSERT_FALSE(base64_decode_in_place(broken.data(), broken.size(), written))
            << "len " << len << " '" << bad << "' at " << pos;
        ASSERT_EQ(broken, before) << "len " << len << " '" << bad << "' at " << pos;
        for (Base64Kernel k : kernels()) {
          ASSERT_FALSE(base64_decode_in_place_with(k, broken.data(), broken.size(), written))
              << name(k) << " len " << len << " '" << bad << "' at " << pos;
          ASSERT_EQ(broken, before) << name(k) << " len " << len << " '" << bad << "' at " << pos;
        }
      }
    }
  }
  std::string odd = "QUJD=";  // not a multiple of 4
  EXPECT_FALSE(base64_decode_in_place(odd.data(), odd.size(), *std::make_unique<std::size_t>()));
  EXPECT_EQ(odd, "QUJD=");
}

}  // namespace
}  // namespace kcl::aws
