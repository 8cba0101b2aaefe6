// base/text_length.h: the length of a text as AWS limits count it: in characters of the
// UTF-16 form, as the AWS SDKs for Java and the KPL count a String (a partition key "1 to 256
// characters"): a character beyond the Basic Multilingual Plane counts two, and a byte that
// is not valid UTF-8 counts one.
//
// Thread safety: a pure function.
#pragma once

#include <cstddef>
#include <string_view>

namespace kcl::base {

inline std::size_t utf16_length(std::string_view utf8) noexcept {
  std::size_t n = 0;
  for (unsigned char c : utf8) {
    if ((c & 0xC0) != 0x80) ++n;  // a character starts (continuation bytes do not count)
    if (c >= 0xF0) ++n;           // four bytes: a surrogate pair in UTF-16
  }
  return n;
}

}  // namespace kcl::base
