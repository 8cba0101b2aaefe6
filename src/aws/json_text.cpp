#include "aws/json_text.h"

#include <simdjson.h>

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace kcl::aws {

namespace {

// Characters that need an escape in a JSON string.
bool needs_escape(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }

// Characters with a two-character escape (\" \\ \n \r \t); the other control characters
// take six (\u00XX).
bool short_escape(unsigned char c) {
  return c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t';
}

#if defined(__SSE2__)
// True when one of the 16 characters at `p` needs an escape.
bool block_needs_escape(const unsigned char* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  // v <= 0x1F unsigned: min(v, 0x1F) == v.
  const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1F)), v);
  const __m128i special =
      _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));
  return _mm_movemask_epi8(_mm_or_si128(control, special)) != 0;
}
#endif

// True when some character of `s` needs an escape. Shard ids, sequence numbers and most
// partition keys need none, so this is the common path: 16 characters at a time, and a
// string of 16 or more whose length is not a multiple of 16 ends with one more block that
// overlaps the one before (no character-by-character tail).
bool any_needs_escape(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t i = 0;
#if defined(__SSE2__)
  if (s.size() >= 16) {
    for (; i + 16 <= s.size(); i += 16) {
      if (block_needs_escape(p + i)) return true;
    }
    return i < s.size() && block_needs_escape(p + s.size() - 16);
  }
#endif
  for (; i < s.size(); ++i) {
    if (needs_escape(p[i])) return true;
  }
  return false;
}

char* write_escape(char* p, unsigned char c) {
  *p++ = '\\';
  switch (c) {
    case '"':
    case '\\':
      *p++ = static_cast<char>(c);
      return p;
    case '\n':
      *p++ = 'n';
      return p;
    case '\r':
      *p++ = 'r';
      return p;
    case '\t':
      *p++ = 't';
      return p;
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      const char u[5] = {'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      std::memcpy(p, u, 5);
      return p + 5;
    }
  }
}

}  // namespace

std::size_t json_escaped_size(std::string_view s) {
  if (!any_needs_escape(s)) return s.size();
  std::size_t n = s.size();
  for (unsigned char c : s) {
    if (needs_escape(c)) n += short_escape(c) ? 1 : 5;
  }
  return n;
}

char* write_json_string(char* p, std::string_view s, std::size_t escaped) {
  *p++ = '"';
  if (escaped == s.size()) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  } else {
    for (unsigned char c : s) {
      if (needs_escape(c)) {
        p = write_escape(p, c);
      } else {
        *p++ = static_cast<char>(c);
      }
    }
  }
  *p++ = '"';
  return p;
}

void append_json_string(std::string& out, std::string_view s) {
  const std::size_t escaped = json_escaped_size(s);
  const std::size_t base = out.size();
  out.resize(base + escaped + 2);
  write_json_string(out.data() + base, s, escaped);
}

bool is_valid_utf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

}  // namespace kcl::aws
