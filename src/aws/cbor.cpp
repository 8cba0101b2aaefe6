#include "aws/cbor.h"

#include <cmath>
#include <cstring>

namespace kcl::aws::cbor {

const char* major_name(Major m) {
  switch (m) {
    case Major::kUnsigned:
      return "an unsigned integer";
    case Major::kNegative:
      return "a negative integer";
    case Major::kBytes:
      return "a byte string";
    case Major::kText:
      return "a text string";
    case Major::kArray:
      return "an array";
    case Major::kMap:
      return "a map";
    case Major::kTag:
      return "a tag";
    case Major::kSimple:
      return "a simple value or float";
  }
  return "an unknown item";
}

bool Reader::special_head(Head& h) {
  if (h.info <= 30) return fail("reserved additional information (28-30) in an item's head");
  switch (h.major) {
    case Major::kBytes:
    case Major::kText:
    case Major::kArray:
    case Major::kMap:
      h.indefinite = true;
      h.arg = 0;
      return true;
    case Major::kSimple:
      return fail("a break where an item was expected");
    default:
      return fail("indefinite length on an integer or a tag");
  }
}

bool Reader::join_chunks(const Head& h, std::string_view& out) {
  // Chunks joined in place: each moves down over the heads before it (dst never passes p_).
  char* const start = p_;
  char* dst = p_;
  for (;;) {
    if (take_break()) {
      out = std::string_view(start, static_cast<std::size_t>(dst - start));
      return true;
    }
    Head chunk;
    if (!head(chunk)) return false;
    if (chunk.major != h.major || chunk.indefinite) {
      return fail(
          "an indefinite-length string with a chunk that is not a definite string of "
          "its type");
    }
    if (chunk.arg != 0) std::memmove(dst, p_, chunk.arg);
    dst += chunk.arg;
    p_ += chunk.arg;
  }
}

bool Reader::skip_body(const Head& h, int depth) {
  switch (h.major) {
    case Major::kUnsigned:
    case Major::kNegative:
    case Major::kSimple:
      return true;
    case Major::kBytes:
    case Major::kText:
      if (!h.indefinite) {
        p_ += h.arg;
        return true;
      }
      for (;;) {
        if (take_break()) return true;
        Head chunk;
        if (!head(chunk)) return false;
        if (chunk.major != h.major || chunk.indefinite) {
          return fail(
              "an indefinite-length string with a chunk that is not a definite string "
              "of its type");
        }
        p_ += chunk.arg;
      }
    case Major::kArray:
    case Major::kMap:
    case Major::kTag:
      break;
  }
  if (depth >= kMaxSkipDepth) return fail("nested deeper than 32 levels");
  if (h.major == Major::kTag) return skip(depth + 1);
  const std::uint64_t per = h.major == Major::kMap ? 2 : 1;
  if (h.indefinite) {
    for (;;) {
      if (take_break()) return true;
      for (std::uint64_t k = 0; k < per; ++k) {
        if (!skip(depth + 1)) return false;
      }
    }
  }
  for (std::uint64_t i = 0; i < h.arg * per; ++i) {
    if (!skip(depth + 1)) return false;
  }
  return true;
}

bool Reader::skip(int depth) {
  Head h;
  return head(h) && skip_body(h, depth);
}

double Reader::float_value(const Head& h) {
  if (h.info == 25) {
    // Half precision (RFC 8949 appendix D).
    const auto half = static_cast<std::uint32_t>(h.arg);
    const int exponent = static_cast<int>((half >> 10) & 0x1f);
    const double mantissa = static_cast<double>(half & 0x3ff);
    double v = 0;
    if (exponent == 0) {
      v = std::ldexp(mantissa, -24);
    } else if (exponent != 31) {
      v = std::ldexp(mantissa + 1024, exponent - 25);
    } else {
      v = mantissa == 0 ? INFINITY : NAN;
    }
    return (half & 0x8000) != 0 ? -v : v;
  }
  if (h.info == 26) {
    const auto bits = static_cast<std::uint32_t>(h.arg);
    float f = 0;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  double d = 0;
  std::memcpy(&d, &h.arg, sizeof d);
  return d;
}

char* Writer::write_head(char* p, Major major, std::uint64_t arg) {
  const auto m = static_cast<std::uint8_t>(static_cast<std::uint8_t>(major) << 5);
  auto put = [&](std::uint8_t info, int bytes) {
    *p++ = static_cast<char>(m | info);
    for (int i = bytes - 1; i >= 0; --i) *p++ = static_cast<char>((arg >> (8 * i)) & 0xff);
  };
  if (arg < 24) {
    put(static_cast<std::uint8_t>(arg), 0);
  } else if (arg <= 0xff) {
    put(24, 1);
  } else if (arg <= 0xffff) {
    put(25, 2);
  } else if (arg <= 0xffffffffu) {
    put(26, 4);
  } else {
    put(27, 8);
  }
  return p;
}

void Writer::head(Major major, std::uint64_t arg) {
  char buf[9];
  const char* end = write_head(buf, major, arg);
  out_.append(buf, static_cast<std::size_t>(end - buf));
}

void Writer::integer(std::int64_t v) {
  if (v >= 0) {
    head(Major::kUnsigned, static_cast<std::uint64_t>(v));
  } else {
    head(Major::kNegative, static_cast<std::uint64_t>(-(v + 1)));
  }
}

bool read_error_body(std::string_view body, std::string& type, std::string& message,
                     std::string& why) {
  std::string copy(body);
  Reader r(copy.data(), copy.size());
  auto failed = [&](std::string_view where) {
    why = std::string(where) + ": " + r.error() + " (byte " + std::to_string(r.offset()) + ")";
    return false;
  };
  Head h;
  if (!r.head(h)) return failed("top level");
  if (h.major == Major::kTag && h.arg == kTagSelfDescribed && !r.head(h)) {
    return failed("top level");
  }
  if (h.major != Major::kMap) return r.fail("not a map"), failed("top level");
  for (std::uint64_t i = 0;; ++i) {
    if (h.indefinite ? r.take_break() : i == h.arg) break;
    Head name_head;
    std::string_view name;
    if (!r.head(name_head)) return failed("a member name");
    if (name_head.major != Major::kText) {
      return r.fail("a member name that is not a text string"), failed("top level");
    }
    if (!r.string_body(name_head, name)) return failed("a member name");
    std::string* into = name == "__type"                         ? &type
                        : name == "message" || name == "Message" ? &message
                                                                 : nullptr;
    Head value;
    if (!r.head(value)) return failed(name);
    if (into == nullptr || value.is_null()) {
      if (!r.skip_body(value)) return failed(name);
      continue;
    }
    std::string_view text;
    if (value.major != Major::kText) return r.fail("not a text string"), failed(name);
    if (!r.string_body(value, text)) return failed(name);
    into->assign(text);
  }
  if (!r.at_end()) return r.fail("trailing bytes after the top-level map"), failed("top level");
  return true;
}

}  // namespace kcl::aws::cbor
