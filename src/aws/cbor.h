// aws/cbor.h: CBOR (RFC 8949) as the AWS "cbor-1.1" protocol (Content-Type
// application/x-amz-cbor-1.1) uses it: a writer for request bodies and a reader that walks an
// answer in place, item by item, without building a document.
//
// The reader is what the Kinesis answers are decoded with (kinesis/kinesis_cbor.h): it reads
// one item head at a time and hands strings out as views into the buffer it reads. Every
// length is checked against the bytes left before anything is read or reserved, so a
// truncated answer or a huge declared length is an error, never an over-read or an
// allocation. An indefinite-length string (chunks, RFC 8949 3.2.3) is joined in place: its
// chunks are moved down over their own heads, so it too becomes one view (the buffer must
// be writable and is changed there). Skipping an unknown member is bounded in depth.
//
// Thread safety: plain values (one thread at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kcl::aws::cbor {

// The major types of RFC 8949 3.1.
enum class Major : std::uint8_t {
  kUnsigned = 0,
  kNegative = 1,
  kBytes = 2,
  kText = 3,
  kArray = 4,
  kMap = 5,
  kTag = 6,
  kSimple = 7,  // false, true, null, undefined, floats, break
};

// What a major type is called in errors ("a byte string", "a map", ...).
const char* major_name(Major m);

// One item's head: its major type and argument (a value, a length, a count, a tag number,
// or for kSimple the additional information's value / a float's bits).
struct Head {
  Major major = Major::kUnsigned;
  std::uint8_t info = 0;    // the low five bits of the first byte
  std::uint64_t arg = 0;    // the argument (for a float: its bits)
  bool indefinite = false;  // info 31 on a string, array or map
  bool is_null() const { return major == Major::kSimple && (info == 22 || info == 23); }
  bool is_float() const { return major == Major::kSimple && info >= 25 && info <= 27; }
};

// Simple values (RFC 8949 3.3).
constexpr std::uint8_t kFalse = 20, kTrue = 21, kNull = 22, kUndefined = 23;
constexpr std::uint8_t kBreak = 0xff;
// Tag 1: epoch-based date/time.
constexpr std::uint64_t kTagEpochTime = 1;
// Tag 55799: "self-described CBOR", allowed before the top-level item.
constexpr std::uint64_t kTagSelfDescribed = 55799;

// How deep skip() follows nested arrays, maps and tags.
constexpr int kMaxSkipDepth = 32;

class Reader {
 public:
  // Reads [data, data + size). `data` is written only by string() on an indefinite-length
  // string (its chunks are joined in place).
  Reader(char* data, std::size_t size) : p_(data), begin_(data), end_(data + size) {}

  std::size_t offset() const { return static_cast<std::size_t>(p_ - begin_); }
  std::size_t left() const { return static_cast<std::size_t>(end_ - p_); }
  bool at_end() const { return p_ == end_; }
  // Whether the next byte is a break (the end of an indefinite-length array or map); when it
  // is, it is consumed.
  bool take_break() {
    if (p_ != end_ && static_cast<std::uint8_t>(*p_) == kBreak) {
      ++p_;
      return true;
    }
    return false;
  }

  // Reads the next item's head. On failure returns false and sets error(). A length or a
  // count larger than the bytes left (each element takes at least one byte) fails here.
  // Inline: the decoders call it for every member name and value.
  [[gnu::always_inline]] bool head(Head& h) {
    if (p_ == end_) return fail("truncated: an item expected");
    const auto first = static_cast<std::uint8_t>(*p_);
    h.major = static_cast<Major>(first >> 5);
    h.info = first & 31;
    h.indefinite = false;
    if (h.info < 24) {
      ++p_;
      h.arg = h.info;
    } else if (h.info <= 27) {
      const std::size_t n = std::size_t{1} << (h.info - 24);
      if (left() < n + 1) return fail("truncated inside an item's head");
      h.arg = read_be(p_ + 1, n);
      p_ += n + 1;
    } else {
      ++p_;
      return special_head(h);
    }
    switch (h.major) {
      case Major::kBytes:
      case Major::kText:
        if (h.arg > left()) return fail("a string longer than the bytes left");
        return true;
      case Major::kArray:
        if (h.arg > left()) return fail("an array with more elements than the bytes left");
        return true;
      case Major::kMap:
        if (h.arg > left() / 2) return fail("a map with more members than the bytes left");
        return true;
      case Major::kSimple:
        if (h.info == 24 && h.arg < 32) return fail("a two-byte simple value below 32");
        return true;
      default:
        return true;
    }
  }
  // Reads a short definite text string (under 256 bytes, its length in the head's first or
  // second byte: a member name, usually, such as the 27 bytes of
  // "ApproximateArrivalTimestamp") as a view when that is what comes next; otherwise returns
  // false and reads nothing (the caller then reads the item with head()). A fast path: no
  // error is set.
  [[gnu::always_inline]] bool short_text(std::string_view& out) {
    if (p_ == end_) return false;
    const auto first = static_cast<std::uint8_t>(*p_);
    std::size_t n = first & 31;
    if ((first & 0xe0) != 0x60) return false;
    if (n < 24) {
      if (n >= left()) return false;
      out = std::string_view(p_ + 1, n);
      p_ += n + 1;
      return true;
    }
    if (n != 24 || left() < 2) return false;
    n = static_cast<std::uint8_t>(p_[1]);
    if (n > left() - 2) return false;
    out = std::string_view(p_ + 2, n);
    p_ += n + 2;
    return true;
  }
  // Skips the next item when it is a definite string with its length in its head's first
  // byte or an integer under 24 (as a record's EncryptionType "NONE" or "KMS"); otherwise
  // returns false and reads nothing (the caller then skips it with skip()).
  [[gnu::always_inline]] bool skip_short_scalar() {
    if (p_ == end_) return false;
    const auto first = static_cast<std::uint8_t>(*p_);
    const std::size_t n = first & 31;
    switch (first >> 5) {
      case 0:
      case 1:
        if (n >= 24) return false;
        ++p_;
        return true;
      case 2:
      case 3:
        if (n >= 24 || n >= left()) return false;
        p_ += n + 1;
        return true;
      default:
        return false;
    }
  }
  // Reads the rest of a byte or text string whose head `h` was just read, as a view; joins
  // an indefinite-length string's chunks in place (each chunk must be a definite string of
  // the same major type).
  [[gnu::always_inline]] bool string_body(const Head& h, std::string_view& out) {
    if (h.indefinite) return join_chunks(h, out);
    out = std::string_view(p_, h.arg);
    p_ += h.arg;
    return true;
  }
  // Skips the item whose head `h` was just read, with everything nested in it, at most
  // kMaxSkipDepth - depth levels deeper.
  bool skip_body(const Head& h, int depth = 0);
  // Reads and skips one whole item.
  bool skip(int depth = 0);
  // A float's value from its head (half, single or double precision).
  static double float_value(const Head& h);

  // Why the last call failed (a static string).
  const char* error() const { return error_; }
  // Fails with `why` (for the codecs' own checks, so one error path serves both).
  bool fail(const char* why) {
    error_ = why;
    return false;
  }

 private:
  // The n-byte (1, 2, 4 or 8) big-endian number at p.
  static std::uint64_t read_be(const char* p, std::size_t n) {
    switch (n) {
      case 1:
        return static_cast<std::uint8_t>(*p);
      case 2: {
        std::uint16_t v;
        std::memcpy(&v, p, 2);
        return __builtin_bswap16(v);
      }
      case 4: {
        std::uint32_t v;
        std::memcpy(&v, p, 4);
        return __builtin_bswap32(v);
      }
      default: {
        std::uint64_t v;
        std::memcpy(&v, p, 8);
        return __builtin_bswap64(v);
      }
    }
  }
  // Additional information 28-31 (reserved, or indefinite length).
  bool special_head(Head& h);
  bool join_chunks(const Head& h, std::string_view& out);

  char* p_;
  char* begin_;
  char* end_;
  const char* error_ = "";
};

// A writer appending to a string. Heads use the shortest form (RFC 8949 4.2.1).
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void head(Major major, std::uint64_t arg);
  void text(std::string_view s) {
    head(Major::kText, s.size());
    out_.append(s);
  }
  void bytes(std::string_view s) {
    head(Major::kBytes, s.size());
    out_.append(s);
  }
  void map(std::uint64_t members) { head(Major::kMap, members); }
  void array(std::uint64_t elements) { head(Major::kArray, elements); }
  void indefinite_array() { out_ += static_cast<char>(0x9f); }
  void end_indefinite() { out_ += static_cast<char>(kBreak); }
  void uint(std::uint64_t v) { head(Major::kUnsigned, v); }
  void integer(std::int64_t v);
  void tag(std::uint64_t t) { head(Major::kTag, t); }
  void null() { out_ += static_cast<char>(0xf6); }
  std::string& out() { return out_; }

  // The bytes a head with this argument takes.
  static constexpr std::size_t head_size(std::uint64_t arg) {
    return arg < 24 ? 1 : arg <= 0xff ? 2 : arg <= 0xffff ? 3 : arg <= 0xffffffffu ? 5 : 9;
  }
  // Writes a head at `p` (which has head_size(arg) bytes of room); returns the end.
  static char* write_head(char* p, Major major, std::uint64_t arg);

 private:
  std::string& out_;
};

// An AWS error answer in CBOR: a map whose "__type" and "message" (or "Message") members are
// text strings (either may be absent or null; other members are skipped). Returns false when
// the body is not that, with `why` naming what is wrong.
bool read_error_body(std::string_view body, std::string& type, std::string& message,
                     std::string& why);

}  // namespace kcl::aws::cbor
