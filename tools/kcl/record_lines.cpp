#include "record_lines.h"

#include <charconv>
#include <cstring>
#include <ctime>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "aws/base64.h"

namespace kcl::cli {

namespace {

// Characters that need an escape in a JSON string.
bool needs_escape(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }

// Characters with a two-character escape (\" \\ \n \r \t); the other control characters
// take six (\u00XX).
bool short_escape(unsigned char c) {
  return c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t';
}

// True when some character of `s` needs an escape. Shard ids, sequence numbers and most
// partition keys need none, so this is the common path: 16 characters at a time.
bool any_needs_escape(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t i = 0;
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i control_max = _mm_set1_epi8(0x1F);
  for (; i + 16 <= s.size(); i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    // v <= 0x1F unsigned: min(v, 0x1F) == v.
    const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(v, control_max), v);
    const __m128i special = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash));
    if (_mm_movemask_epi8(_mm_or_si128(control, special)) != 0) return true;
  }
#endif
  for (; i < s.size(); ++i) {
    if (needs_escape(p[i])) return true;
  }
  return false;
}

// The characters `s` takes between the quotes of a JSON string.
std::size_t escaped_size(std::string_view s) {
  if (!any_needs_escape(s)) return s.size();
  std::size_t n = s.size();
  for (unsigned char c : s) {
    if (needs_escape(c)) n += short_escape(c) ? 1 : 5;
  }
  return n;
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

// Writes `s` as a JSON string, quotes included; `escaped` is escaped_size(s).
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
  const std::size_t shard_size = escaped_size(r.shard_id());
  const std::size_t sequence_size = escaped_size(r.sequence_number());
  const std::size_t key_size = escaped_size(r.partition_key());
  const std::size_t stream_size = stream.empty() ? 0 : escaped_size(stream);
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
    p = write_json_string(p, stream, stream_size);
    p = write_literal(p, kThenShardId);
  }
  p = write_json_string(p, r.shard_id(), shard_size);
  p = write_literal(p, kSequenceNumber);
  p = write_json_string(p, r.sequence_number(), sequence_size);
  p = write_literal(p, kSubSequenceNumber);
  std::memcpy(p, num, num_size);
  p += num_size;
  p = write_literal(p, kPartitionKey);
  p = write_json_string(p, r.partition_key(), key_size);
  p = write_literal(p, kArrival);
  p = write_timestamp(p, r.approximate_arrival_timestamp());
  p = write_literal(p, kData);
  p = aws::base64_encode_to(r.data(), p);
  write_literal(p, kEnd);
}

}  // namespace kcl::cli
