// record_lines.h: the JSON line `kcl tail` and `kcl consume` print for each record, appended
// to a caller's buffer (reused from batch to batch) so a batch costs one write and no
// allocation per record. A line's size is worked out first and the line is then written
// through a pointer: one resize per line, no append per field.
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
#include <string>
#include <string_view>

#include "kcl/record.h"

namespace kcl::cli {

class RecordLines {
 public:
  // Appends one line for `r`: the JSON object above (with `stream` first when it is not
  // empty), or with `raw` only the data.
  void append(std::string& out, const Record& r, bool raw, std::string_view stream = {});

 private:
  // Writes the timestamp, quotes included (26 characters), and returns the end.
  char* write_timestamp(char* p, std::chrono::system_clock::time_point t);
  // The "YYYY-MM-DDTHH:MM:SS" of the last second formatted (records of a batch mostly share
  // it), and which second that was.
  std::int64_t cached_second_ = INT64_MIN;
  char cached_text_[24] = {};
};

}  // namespace kcl::cli
