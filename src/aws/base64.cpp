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

// The four characters of one 3-byte group, v = its 24 bits.
inline void encode_group(std::uint32_t v, char* dst) {
  dst[0] = kAlphabet[(v >> 18) & 63];
  dst[1] = kAlphabet[(v >> 12) & 63];
  dst[2] = kAlphabet[(v >> 6) & 63];
  dst[3] = kAlphabet[v & 63];
}

// Scalar encoding of in[0, n), padding included; returns the end of what it wrote.
char* encode_scalar(const unsigned char* in, std::size_t n, char* dst) {
  std::size_t i = 0;
  for (; i + 3 <= n; i += 3, dst += 4) {
    encode_group((std::uint32_t{in[i]} << 16) | (std::uint32_t{in[i + 1]} << 8) | in[i + 2], dst);
  }
  if (n - i == 1) {
    encode_group(std::uint32_t{in[i]} << 16, dst);
    dst[2] = dst[3] = '=';
    dst += 4;
  } else if (n - i == 2) {
    encode_group((std::uint32_t{in[i]} << 16) | (std::uint32_t{in[i + 1]} << 8), dst);
    dst[3] = '=';
    dst += 4;
  }
  return dst;
}

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
// k writes [48k, 48k + 48) only after reading [64k, 64k + 64). `n` is a multiple of 4; the
// last step takes what is left of it. Returns the number of characters decoded: all n, or
// on invalid input those before the step that found it (a multiple of 64).
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
  // The last n - i characters (fewer than 64, whole groups) as one step of the same kind,
  // with a masked load and a masked store: no scalar loop over the end of every record. The
  // load reads them all before the store writes their bytes, so in place is still safe.
  const std::size_t rest = n - i;
  if (rest != 0) {
    const __mmask64 in_mask = (__mmask64{1} << rest) - 1;  // rest < 64
    const __mmask64 out_mask = (__mmask64{1} << (rest / 4 * 3)) - 1;
    const __m512i in = _mm512_maskz_loadu_epi8(in_mask, src + i);
    const __m512i values = _mm512_permutex2var_epi8(table_lo, in, table_hi);
    if (_mm512_mask_test_epi8_mask(in_mask, _mm512_or_si512(values, in), high_bit) != 0) {
      ok = false;
      return i;
    }
    const __m512i ab_cd = _mm512_maddubs_epi16(values, pack_ab);
    const __m512i abcd = _mm512_madd_epi16(ab_cd, pack_abc);
    _mm512_mask_storeu_epi8(dst, out_mask, _mm512_maskz_permutexvar_epi8(out_mask, gather, abcd));
    i = n;
  }
  return i;
}

// AVX2: 24 bytes -> 32 characters per step (Mula's method: a byte shuffle puts each
// group's bytes a, b, c as b, a, c, b in a 32-bit lane; two 16-bit multiplies move its four
// 6-bit values into the lane's four bytes; the values become characters by adding an offset
// looked up by range: A-Z, a-z, 0-9, '+', '/'). Each lane reads 16 bytes of which it uses
// 12, so a step reads 28 bytes; writes exactly its 32 characters. Returns the bytes encoded
// (a multiple of 24).
__attribute__((target("avx2"))) std::size_t encode_avx2(const unsigned char* src, std::size_t n,
                                                        char* dst) {
  // clang-format off
  const __m256i spread = _mm256_setr_epi8(
      1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10,
      1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10);
  const __m256i offsets = _mm256_setr_epi8(
      'a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
      '0' - 52, '0' - 52, '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0,
      'a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
      '0' - 52, '0' - 52, '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0);
  // clang-format on
  const __m256i mask_s0_s2 = _mm256_set1_epi32(0x0FC0FC00);
  const __m256i shift_s0_s2 = _mm256_set1_epi32(0x04000040);
  const __m256i mask_s1_s3 = _mm256_set1_epi32(0x003F03F0);
  const __m256i shift_s1_s3 = _mm256_set1_epi32(0x01000010);
  std::size_t i = 0;
  for (; i + 28 <= n; i += 24, dst += 32) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 12));
    const __m256i in = _mm256_shuffle_epi8(_mm256_set_m128i(hi, lo), spread);
    const __m256i values =
        _mm256_or_si256(_mm256_mulhi_epu16(_mm256_and_si256(in, mask_s0_s2), shift_s0_s2),
                        _mm256_mullo_epi16(_mm256_and_si256(in, mask_s1_s3), shift_s1_s3));
    // 0-51 -> 0, 52-61 -> 1-10, 62 -> 11, 63 -> 12; then 0-25 -> 13.
    __m256i range = _mm256_subs_epu8(values, _mm256_set1_epi8(51));
    const __m256i upper = _mm256_cmpgt_epi8(_mm256_set1_epi8(26), values);
    range = _mm256_or_si256(range, _mm256_and_si256(upper, _mm256_set1_epi8(13)));
    const __m256i text = _mm256_add_epi8(values, _mm256_shuffle_epi8(offsets, range));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), text);
  }
  return i;
}

// AVX-512 VBMI: 48 bytes -> 64 characters per step. A byte permutation puts each group's
// bytes c, b, a in a 32-bit lane (its 24 bits as a little-endian number); one multishift
// takes the four 6-bit values at bit offsets 18, 12, 6 and 0 of each lane; one permutation
// of the alphabet turns them into characters (it reads only an index's low 6 bits). Reads
// exactly 48 bytes (a masked load) and writes 64 characters. Returns the bytes encoded (a
// multiple of 48).
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) std::size_t encode_avx512vbmi(
    const unsigned char* src, std::size_t n, char* dst) {
  alignas(64) static constexpr auto kSpread = [] {
    std::array<std::uint8_t, 64> g{};
    for (std::size_t i = 0; i < 16; ++i) {
      g[4 * i] = static_cast<std::uint8_t>(3 * i + 2);
      g[4 * i + 1] = static_cast<std::uint8_t>(3 * i + 1);
      g[4 * i + 2] = static_cast<std::uint8_t>(3 * i);
      g[4 * i + 3] = static_cast<std::uint8_t>(3 * i);
    }
    return g;
  }();
  const __m512i spread = _mm512_load_si512(kSpread.data());
  const __m512i alphabet = _mm512_loadu_si512(kAlphabet);
  // Per 64-bit element (two lanes): bit offsets 18, 12, 6, 0, then 50, 44, 38, 32.
  const __m512i offsets = _mm512_set1_epi64(0x20262C3200060C12);
  constexpr __mmask64 kIn = (__mmask64{1} << 48) - 1;
  // The zero-masking forms with every lane selected: the plain forms start from an
  // undefined register, which GCC warns about.
  constexpr __mmask64 kAll = ~__mmask64{0};
  std::size_t i = 0;
  for (; i + 48 <= n; i += 48, dst += 64) {
    const __m512i in =
        _mm512_maskz_permutexvar_epi8(kAll, spread, _mm512_maskz_loadu_epi8(kIn, src + i));
    const __m512i values = _mm512_maskz_multishift_epi64_epi8(kAll, offsets, in);
    _mm512_storeu_si512(dst, _mm512_maskz_permutexvar_epi8(kAll, values, alphabet));
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

char* base64_encode_to_with(Base64Kernel kernel, std::string_view bytes, char* dst) {
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t done = 0;
#ifdef KCL_BASE64_AVX2
  if (kernel == Base64Kernel::kAvx512Vbmi) {
    done = encode_avx512vbmi(in, bytes.size(), dst);
  } else if (kernel == Base64Kernel::kAvx2) {
    done = encode_avx2(in, bytes.size(), dst);
  }
#else
  (void)kernel;
#endif
  return encode_scalar(in + done, bytes.size() - done, dst + done / 3 * 4);
}

char* base64_encode_to(std::string_view bytes, char* dst) {
  return base64_encode_to_with(best_kernel(), bytes, dst);
}

void base64_encode_append(std::string_view bytes, std::string& out) {
  const std::size_t base = out.size();
  out.resize(base + base64_encoded_size(bytes.size()));
  base64_encode_to(bytes, out.data() + base);
}

std::string base64_encode(std::string_view bytes) {
  std::string out;
  base64_encode_append(bytes, out);
  return out;
}

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
  if (kernel == Base64Kernel::kAvx512Vbmi || (kernel == Base64Kernel::kAvx2 && full >= 64)) {
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
    encode_group(
        (std::uint32_t{t[3 * g]} << 16) | (std::uint32_t{t[3 * g + 1]} << 8) | t[3 * g + 2],
        text + 4 * g);
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
