#include "record_lines.h"

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

char* RecordLines::write_timestamp(char* p, std::chrono::system_clock::time_point t) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::int64_t secs = ms / 1000;
  int frac = static_cast<int>(ms % 1000);
  if (frac < 0) {
    frac += 1000;
    --secs;
  }
  if (secs != cached_second_) {
    std::time_t tt = static_cast<std::time_t>(secs);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char* c = cached_text_;
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
  *p++ = '"';
  std::memcpy(p, cached_text_, 19);
  p += 19;
  const char tail[6] = {'.',
                        static_cast<char>('0' + frac / 100),
                        static_cast<char>('0' + frac / 10 % 10),
                        static_cast<char>('0' + frac % 10),
                        'Z',
                        '"'};
  std::memcpy(p, tail, 6);
  return p + 6;
}

void RecordLines::append(std::string& out, const Record& r, bool raw, std::string_view stream) {
  if (raw) {
    out += r.data();
    out += '\n';
    return;
  }
  // The line's exact size first, so it is written through a pointer after one resize.
  char num[24];
  const auto [num_end, ec] = std::to_chars(num, num + sizeof num, r.sub_sequence_number());
  (void)ec;  // 24 characters hold any 64-bit number
  const auto num_size = static_cast<std::size_t>(num_end - num);
  const std::size_t shard_size = aws::json_escaped_size(r.shard_id());
  const std::size_t sequence_size = aws::json_escaped_size(r.sequence_number());
  const std::size_t key_size = aws::json_escaped_size(r.partition_key());
  const std::size_t stream_size = stream.empty() ? 0 : aws::json_escaped_size(stream);
  const std::size_t size = kFixedSize + shard_size + sequence_size + key_size + num_size +
                           aws::base64_encoded_size(r.data().size()) +
                           (stream.empty() ? 0 : (sizeof kStreamName - 1) + stream_size + 2);
  const std::size_t base = out.size();
  out.resize(base + size);
  char* p = out.data() + base;
  if (stream.empty()) {
    p = write_literal(p, kShardId);
  } else {
    p = write_literal(p, kStreamName);
    p = aws::write_json_string(p, stream, stream_size);
    p = write_literal(p, kThenShardId);
  }
  p = aws::write_json_string(p, r.shard_id(), shard_size);
  p = write_literal(p, kSequenceNumber);
  p = aws::write_json_string(p, r.sequence_number(), sequence_size);
  p = write_literal(p, kSubSequenceNumber);
  std::memcpy(p, num, num_size);
  p += num_size;
  p = write_literal(p, kPartitionKey);
  p = aws::write_json_string(p, r.partition_key(), key_size);
  p = write_literal(p, kArrival);
  p = write_timestamp(p, r.approximate_arrival_timestamp());
  p = write_literal(p, kData);
  p = aws::base64_encode_to(r.data(), p);
  write_literal(p, kEnd);
}

}  // namespace kcl::cli
