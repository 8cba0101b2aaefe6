// record_lines.h: the JSON line `kcl tail` and `kcl consume` print for each record, appended
// to a caller's buffer (reused from batch to batch) so a batch costs one write and no
// allocation per record. A line's size is worked out first and the line is then written
// through a pointer: one resize per line, no append per field (into a LineBuffer, whose new
// characters are not zeroed first, no fill either).
//
//   {"shardId":"...","sequenceNumber":"...","subSequenceNumber":0,"partitionKey":"...",
//    "approximateArrivalTimestamp":"2026-11-24T22:40:38.123Z","data":"<base64>"}
//
// A record of a worker that reads several streams starts with "streamName":"...".
//
// Thread safety: a RecordLines object is used by one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kcl/record.h"

namespace kcl::cli {

// A growing text buffer whose new characters are left unset until the caller writes them
// (std::string's resize fills them with zeros first, a memset of every line): the lines of
// a batch are built in one, reused from batch to batch, and written out from data().
class LineBuffer {
 public:
  // Room for `n` more characters at the end, which the caller must all write; returns where
  // they start (valid until the next call).
  char* extend(std::size_t n);
  void append(std::string_view text);
  const char* data() const { return bytes_.get(); }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() { size_ = 0; }

 private:
  std::unique_ptr<char[]> bytes_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

class RecordLines {
 public:
  // Appends one line for `r`: the JSON object above (with `stream` first when it is not
  // empty), or with `raw` only the data.
  void append(std::string& out, const Record& r, bool raw, std::string_view stream = {});
  void append(LineBuffer& out, const Record& r, bool raw, std::string_view stream = {});

 private:
  // The sizes of a line's parts, worked out before it is written.
  struct Sizes {
    char number[24];  // the sub-sequence number's text
    std::size_t number_size;
    std::size_t shard;
    std::size_t sequence;
    std::size_t key;
    std::size_t stream;
    std::size_t line;  // the whole line's
  };
  static Sizes measure(const Record& r, std::string_view stream);
  // Writes the line measured as `sizes` at `p`, which has room for sizes.line characters.
  void write(char* p, const Record& r, std::string_view stream, const Sizes& sizes);
  // Writes the timestamp, quotes included (26 characters), and returns the end.
  char* write_timestamp(char* p, std::chrono::system_clock::time_point t);
  // Writes the "YYYY-MM-DDTHH:MM:SS" of `secs` into cached_text_.
  void format_second(std::int64_t secs);
  // The last timestamp written, quotes included (records of a batch mostly share their
  // millisecond, and nearly always their second), the millisecond it is and the second its
  // first 19 characters after the quote are.
  std::int64_t cached_ms_ = INT64_MIN;
  std::int64_t cached_second_ = INT64_MIN;
  char cached_text_[26] = {'"'};
};

}  // namespace kcl::cli
