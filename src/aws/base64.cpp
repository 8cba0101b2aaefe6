#include "aws/base64.h"

#include <array>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kcl::aws {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<std::uint8_t, 256> make_decode_table() {
  std::array<std::uint8_t, 256> t{};
  for (auto& v : t) v = 0xFF;
  for (int i = 0; i < 64; ++i)
    t[static_cast<unsigned char>(kAlphabet[i])] = static_cast<std::uint8_t>(i);
  return t;
}
constexpr auto kDecode = make_decode_table();

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  base64_encode_append(bytes, out);
  return out;
}

void base64_encode_append(std::string_view bytes, std::string& out) {
  std::size_t o = out.size();
  out.resize(o + (bytes.size() + 2) / 3 * 4);
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t i = 0, n = bytes.size();
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
}

namespace {

// Scalar decoding of whole 4-character groups (no padding): src[0, n) -> dst. Each group is
// checked before its bytes are written; at the first character outside the alphabet it
// stops and returns false. `done` is the number of characters decoded before it.
bool decode_groups_scalar(const unsigned char* src, std::size_t n, char* dst, std::size_t& done) {
  std::size_t i = 0;
  for (; i < n; i += 4) {
    std::uint32_t a = kDecode[src[i]], b = kDecode[src[i + 1]], c = kDecode[src[i + 2]],
                  d = kDecode[src[i + 3]];
    if ((a | b | c | d) & 0xC0) break;  // 0xFF marks an invalid character
    std::uint32_t v = (a << 18) | (b << 12) | (c << 6) | d;
    *dst++ = static_cast<char>(v >> 16);
    *dst++ = static_cast<char>(v >> 8);
    *dst++ = static_cast<char>(v);
  }
  done = i;
  return i >= n;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KCL_BASE64_AVX2 1

// AVX2: 32 characters -> 24 bytes per step (the nibble-table method of Mula and Lemire:
// classify each character by its high and low nibble to validate it and to find the
// offset that maps it to its 6-bit value, then pack four 6-bit values into three bytes
// with two multiply-adds and a shuffle). Returns the number of characters decoded (a
// multiple of 32) and leaves the rest to the scalar loop. A step is checked before it
// writes: at a character outside the alphabet `ok` turns false and the characters before
// that step are what was decoded. Writes 32 bytes per step, so the caller keeps 8 bytes of
// slack.
__attribute__((target("avx2"))) std::size_t decode_avx2(const unsigned char* src, std::size_t n,
                                                        char* dst, bool& ok) {
  // clang-format off
  const __m256i lut_lo = _mm256_setr_epi8(
      0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A, 0x1B, 0x1B, 0x1B, 0x1A,
      0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A, 0x1B, 0x1B, 0x1B, 0x1A);
  const __m256i lut_hi = _mm256_setr_epi8(
      0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10,
      0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10);
  const __m256i lut_roll = _mm256_setr_epi8(
      0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0,
      0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m256i order = _mm256_setr_epi8(
      2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1,
      2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
  // clang-format on
  const __m256i mask_2f = _mm256_set1_epi8(0x2F);
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i pack_ab = _mm256_set1_epi32(0x01400140);
  const __m256i pack_abc = _mm256_set1_epi32(0x00011000);
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);

  std::size_t i = 0;
  ok = true;
  for (; i + 32 <= n; i += 32, dst += 24) {
    __m256i in = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    __m256i hi_nibbles = _mm256_and_si256(_mm256_srli_epi32(in, 4), nibble);
    __m256i lo_nibbles = _mm256_and_si256(in, nibble);
    __m256i lo = _mm256_shuffle_epi8(lut_lo, lo_nibbles);
    __m256i hi = _mm256_shuffle_epi8(lut_hi, hi_nibbles);
    const __m256i invalid = _mm256_and_si256(lo, hi);
    if (!_mm256_testz_si256(invalid, invalid)) {
      ok = false;
      return i;
    }
    __m256i eq_2f = _mm256_cmpeq_epi8(in, mask_2f);
    __m256i roll = _mm256_shuffle_epi8(lut_roll, _mm256_add_epi8(eq_2f, hi_nibbles));
    __m256i values = _mm256_add_epi8(in, roll);
    __m256i ab_bc = _mm256_maddubs_epi16(values, pack_ab);
    __m256i abc = _mm256_madd_epi16(ab_bc, pack_abc);
    __m256i bytes = _mm256_shuffle_epi8(abc, order);
    bytes = _mm256_permutevar8x32_epi32(bytes, lanes);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), bytes);
  }
  return i;
}

// AVX-512 VBMI: 64 characters -> 48 bytes per step (Mula and Lemire's AVX-512 method: one
// two-table byte permutation maps every character to its 6-bit value, or to 0x80 when it is
// outside the alphabet; the same two multiply-adds as above pack four values into three
// bytes, and one byte permutation gathers the 48 bytes). A step is checked before it writes,
// and writes exactly its 48 bytes (a masked store), so it needs no slack and, in place, step
// k writes [48k, 48k + 48) only after reading [64k, 64k + 64). Returns the number of
// characters decoded (a multiple of 64).
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) std::size_t decode_avx512vbmi(
    const unsigned char* src, std::size_t n, char* dst, bool& ok) {
  alignas(64) static constexpr auto kTable = [] {
    std::array<std::uint8_t, 128> t{};
    for (std::size_t c = 0; c < 128; ++c) t[c] = kDecode[c] == 0xFF ? 0x80 : kDecode[c];
    return t;
  }();
  alignas(64) static constexpr auto kGather = [] {
    std::array<std::uint8_t, 64> g{};
    for (std::size_t i = 0; i < 16; ++i) {  // lane i's 24 bits are its bytes 2, 1, 0
      for (std::size_t j = 0; j < 3; ++j) g[3 * i + j] = static_cast<std::uint8_t>(4 * i + 2 - j);
    }
    return g;
  }();
  const __m512i table_lo = _mm512_load_si512(kTable.data());
  const __m512i table_hi = _mm512_load_si512(kTable.data() + 64);
  const __m512i gather = _mm512_load_si512(kGather.data());
  const __m512i pack_ab = _mm512_set1_epi32(0x01400140);
  const __m512i pack_abc = _mm512_set1_epi32(0x00011000);
  const __m512i high_bit = _mm512_set1_epi8(static_cast<char>(0x80));
  constexpr __mmask64 kOut = (__mmask64{1} << 48) - 1;

  std::size_t i = 0;
  ok = true;
  for (; i + 64 <= n; i += 64, dst += 48) {
    const __m512i in = _mm512_loadu_si512(src + i);
    // Bytes of 0x80 and above index the table by their low 7 bits; their own high bit marks
    // them invalid, as the table's 0x80 marks the rest.
    const __m512i values = _mm512_permutex2var_epi8(table_lo, in, table_hi);
    if (_mm512_test_epi8_mask(_mm512_or_si512(values, in), high_bit) != 0) {
      ok = false;
      return i;
    }
    const __m512i ab_cd = _mm512_maddubs_epi16(values, pack_ab);
    const __m512i abcd = _mm512_madd_epi16(ab_cd, pack_abc);
    _mm512_mask_storeu_epi8(dst, kOut, _mm512_maskz_permutexvar_epi8(kOut, gather, abcd));
  }
  return i;
}

bool cpu_has(Base64Kernel kernel) {
  static const bool avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  static const bool avx512vbmi = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512bw") != 0 &&
           __builtin_cpu_supports("avx512vbmi") != 0;
  }();
  switch (kernel) {
    case Base64Kernel::kScalar:
      return true;
    case Base64Kernel::kAvx2:
      return avx2;
    case Base64Kernel::kAvx512Vbmi:
      return avx512vbmi;
  }
  return false;
}
#else
bool cpu_has(Base64Kernel kernel) { return kernel == Base64Kernel::kScalar; }
#endif

// The widest kernel this CPU runs.
Base64Kernel best_kernel() {
  static const Base64Kernel best = cpu_has(Base64Kernel::kAvx512Vbmi) ? Base64Kernel::kAvx512Vbmi
                                   : cpu_has(Base64Kernel::kAvx2)     ? Base64Kernel::kAvx2
                                                                      : Base64Kernel::kScalar;
  return best;
}

}  // namespace

namespace {

// Decodes text[0, n) to dst (see base64_decode_to). On invalid input returns false with
// `valid` the number of leading characters (a multiple of 4, all in the alphabet) whose
// bytes are in dst[0, valid / 4 * 3); besides those, at most dst[valid / 4 * 3, valid) was
// written.
bool decode_core(Base64Kernel kernel, const unsigned char* src, std::size_t n, char* dst,
                 std::size_t& written, std::size_t& valid) {
  written = 0;
  valid = 0;
  if (n % 4 != 0) return false;
  if (n == 0) return true;
  std::size_t pad = 0;
  if (src[n - 1] == '=') ++pad;
  if (src[n - 2] == '=') ++pad;
  char* const start = dst;
  const std::size_t full = pad ? n - 4 : n;
  std::size_t done = 0;
#ifdef KCL_BASE64_AVX2
  if (kernel != Base64Kernel::kScalar && full >= 64) {
    // The AVX-512 loop writes exactly what it produces. The AVX2 loop writes 32 bytes for
    // every 24 it produces: stop it 16 characters (12 bytes of output) before the end so the
    // 8 extra bytes always land inside the output (and, decoding in place, behind the
    // characters still to be read: step k reads [32k, 32k+32) before it writes
    // [24k, 24k+32)).
    bool ok = true;
    done = kernel == Base64Kernel::kAvx512Vbmi ? decode_avx512vbmi(src, full, dst, ok)
                                               : decode_avx2(src, full - 16, dst, ok);
    if (!ok) {
      valid = done;
      return false;
    }
    dst += done / 4 * 3;
  }
#else
  (void)kernel;
#endif
  std::size_t scalar_done = 0;
  const bool groups_ok = decode_groups_scalar(src + done, full - done, dst, scalar_done);
  valid = done + scalar_done;
  if (!groups_ok) return false;
  dst += scalar_done / 4 * 3;
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
  written = static_cast<std::size_t>(dst - start);
  return true;
}

// Undoes an in-place decoding that stopped after `valid` characters: encodes the bytes
// text[0, valid / 4 * 3) back over text[0, valid). Base64 of whole groups is one-to-one, so
// this gives back exactly the characters that were there. It runs from the last group to
// the first: group g's 4 characters go to [4g, 4g + 4), at or after its own 3 bytes
// [3g, 3g + 3) (read first), and after every byte of the groups still to be encoded.
void reencode_prefix(char* text, std::size_t valid) {
  auto* t = reinterpret_cast<unsigned char*>(text);
  for (std::size_t g = valid / 4; g-- > 0;) {
    const std::uint32_t v =
        (std::uint32_t{t[3 * g]} << 16) | (std::uint32_t{t[3 * g + 1]} << 8) | t[3 * g + 2];
    text[4 * g] = kAlphabet[(v >> 18) & 63];
    text[4 * g + 1] = kAlphabet[(v >> 12) & 63];
    text[4 * g + 2] = kAlphabet[(v >> 6) & 63];
    text[4 * g + 3] = kAlphabet[v & 63];
  }
}

}  // namespace

bool base64_kernel_supported(Base64Kernel kernel) { return cpu_has(kernel); }

bool base64_decode_to(std::string_view text, char* dst, std::size_t& written) {
  std::size_t valid = 0;
  return decode_core(best_kernel(), reinterpret_cast<const unsigned char*>(text.data()),
                     text.size(), dst, written, valid);
}

bool base64_decode_in_place_with(Base64Kernel kernel, char* text, std::size_t n,
                                 std::size_t& written) {
  std::size_t valid = 0;
  if (decode_core(kernel, reinterpret_cast<const unsigned char*>(text), n, text, written, valid)) {
    return true;
  }
  reencode_prefix(text, valid);
  return false;
}

bool base64_decode_in_place(char* text, std::size_t n, std::size_t& written) {
  return base64_decode_in_place_with(best_kernel(), text, n, written);
}

bool base64_decode_append(std::string_view text, std::string& out) {
  const std::size_t base = out.size();
  out.resize(base + text.size() / 4 * 3);
  std::size_t written = 0;
  const bool ok = base64_decode_to(text, out.data() + base, written);
  out.resize(base + written);
  return ok;
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
