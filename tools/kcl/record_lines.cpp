#include "record_lines.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <ctime>

#include "aws/base64.h"
#include "aws/json_text.h"

namespace kcl::cli {

namespace {

template <std::size_t N>
char* write_literal(char* p, const char (&text)[N]) {
  std::memcpy(p, text, N - 1);
  return p + (N - 1);
}

void write_2(char* p, int v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
}

// The fixed parts of a line, in order.
constexpr char kShardId[] = "{\"shardId\":";
// A record of one of several streams: the stream first, then the shard (same size as above).
constexpr char kStreamName[] = "{\"streamName\":";
constexpr char kThenShardId[] = ",\"shardId\":";
static_assert(sizeof kThenShardId == sizeof kShardId);
constexpr char kSequenceNumber[] = ",\"sequenceNumber\":";
constexpr char kSubSequenceNumber[] = ",\"subSequenceNumber\":";
constexpr char kPartitionKey[] = ",\"partitionKey\":";
constexpr char kArrival[] = ",\"approximateArrivalTimestamp\":";
constexpr char kData[] = ",\"data\":\"";
constexpr char kEnd[] = "\"}\n";
// "YYYY-MM-DDTHH:MM:SS.mmmZ" with its quotes.
constexpr std::size_t kTimestampSize = 26;
// Everything of a line but the three strings' contents, the number and the data: the
// literals, the quotes around the three strings and the timestamp.
constexpr std::size_t kFixedSize = (sizeof kShardId - 1) + (sizeof kSequenceNumber - 1) +
                                   (sizeof kSubSequenceNumber - 1) + (sizeof kPartitionKey - 1) +
                                   (sizeof kArrival - 1) + (sizeof kData - 1) + (sizeof kEnd - 1) +
                                   3 * 2 + kTimestampSize;

}  // namespace

void RecordLines::format_second(std::int64_t secs) {
  std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char* c = cached_text_ + 1;  // after the opening quote
  const int year = tm.tm_year + 1900;
  write_2(c, (year / 100) % 100);
  write_2(c + 2, year % 100);
  c[4] = '-';
  write_2(c + 5, tm.tm_mon + 1);
  c[7] = '-';
  write_2(c + 8, tm.tm_mday);
  c[10] = 'T';
  write_2(c + 11, tm.tm_hour);
  c[13] = ':';
  write_2(c + 14, tm.tm_min);
  c[16] = ':';
  write_2(c + 17, tm.tm_sec);
  cached_second_ = secs;
}

char* RecordLines::write_timestamp(char* p, std::chrono::system_clock::time_point t) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  if (ms != cached_ms_) {
    std::int64_t secs = ms / 1000;
    int frac = static_cast<int>(ms % 1000);
    if (frac < 0) {
      frac += 1000;
      --secs;
    }
    if (secs != cached_second_) format_second(secs);
    const char tail[6] = {'.',
                          static_cast<char>('0' + frac / 100),
                          static_cast<char>('0' + frac / 10 % 10),
                          static_cast<char>('0' + frac % 10),
                          'Z',
                          '"'};
    std::memcpy(cached_text_ + 20, tail, 6);
    cached_ms_ = ms;
  }
  std::memcpy(p, cached_text_, kTimestampSize);
  return p + kTimestampSize;
}

char* LineBuffer::extend(std::size_t n) {
  if (size_ + n > capacity_) {
    const std::size_t capacity = std::max({capacity_ * 2, size_ + n, std::size_t{4096}});
    // new char[] without an initializer: the characters are left unset.
    std::unique_ptr<char[]> bytes(new char[capacity]);
    if (size_ > 0) std::memcpy(bytes.get(), bytes_.get(), size_);
    bytes_ = std::move(bytes);
    capacity_ = capacity;
  }
  char* p = bytes_.get() + size_;
  size_ += n;
  return p;
}

void LineBuffer::append(std::string_view text) {
  if (!text.empty()) std::memcpy(extend(text.size()), text.data(), text.size());
}

RecordLines::Sizes RecordLines::measure(const Record& r, std::string_view stream) {
  Sizes s;
  const auto [number_end, ec] =
      std::to_chars(s.number, s.number + sizeof s.number, r.sub_sequence_number());
  (void)ec;  // 24 characters hold any 64-bit number
  s.number_size = static_cast<std::size_t>(number_end - s.number);
  s.shard = aws::json_escaped_size(r.shard_id());
  s.sequence = aws::json_escaped_size(r.sequence_number());
  s.key = aws::json_escaped_size(r.partition_key());
  s.stream = stream.empty() ? 0 : aws::json_escaped_size(stream);
  s.line = kFixedSize + s.shard + s.sequence + s.key + s.number_size +
           aws::base64_encoded_size(r.data().size()) +
           (stream.empty() ? 0 : (sizeof kStreamName - 1) + s.stream + 2);
  return s;
}

void RecordLines::write(char* p, const Record& r, std::string_view stream, const Sizes& s) {
  if (stream.empty()) {
    p = write_literal(p, kShardId);
  } else {
    p = write_literal(p, kStreamName);
    p = aws::write_json_string(p, stream, s.stream);
    p = write_literal(p, kThenShardId);
  }
  p = aws::write_json_string(p, r.shard_id(), s.shard);
  p = write_literal(p, kSequenceNumber);
  p = aws::write_json_string(p, r.sequence_number(), s.sequence);
  p = write_literal(p, kSubSequenceNumber);
  std::memcpy(p, s.number, s.number_size);
  p += s.number_size;
  p = write_literal(p, kPartitionKey);
  p = aws::write_json_string(p, r.partition_key(), s.key);
  p = write_literal(p, kArrival);
  p = write_timestamp(p, r.approximate_arrival_timestamp());
  p = write_literal(p, kData);
  p = aws::base64_encode_to(r.data(), p);
  write_literal(p, kEnd);
}

void RecordLines::append(std::string& out, const Record& r, bool raw, std::string_view stream) {
  if (raw) {
    out += r.data();
    out += '\n';
    return;
  }
  // The line's exact size first, so it is written through a pointer after one resize.
  const Sizes sizes = measure(r, stream);
  const std::size_t base = out.size();
  out.resize(base + sizes.line);
  write(out.data() + base, r, stream, sizes);
}

void RecordLines::append(LineBuffer& out, const Record& r, bool raw, std::string_view stream) {
  if (raw) {
    out.append(r.data());
    out.append("\n");
    return;
  }
  const Sizes sizes = measure(r, stream);
  write(out.extend(sizes.line), r, stream, sizes);
}

}  // namespace kcl::cli
