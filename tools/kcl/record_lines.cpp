#include "record_lines.h"

#include <charconv>
#include <ctime>

#include "aws/base64.h"

namespace kcl::cli {

namespace {

// Characters that need an escape in a JSON string.
bool needs_escape(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }

void append_escape(std::string& out, unsigned char c) {
  switch (c) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      const char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      out.append(u, 6);
    }
  }
}

void append_2(char* p, int v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  std::size_t run = 0;  // start of the current run of characters copied as they are
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (!needs_escape(c)) continue;
    out.append(s.data() + run, i - run);
    append_escape(out, c);
    run = i + 1;
  }
  out.append(s.data() + run, s.size() - run);
  out += '"';
}

void RecordLines::append_timestamp(std::string& out, std::chrono::system_clock::time_point t) {
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
    char* p = cached_text_;
    const int year = tm.tm_year + 1900;
    append_2(p, (year / 100) % 100);
    append_2(p + 2, year % 100);
    p[4] = '-';
    append_2(p + 5, tm.tm_mon + 1);
    p[7] = '-';
    append_2(p + 8, tm.tm_mday);
    p[10] = 'T';
    append_2(p + 11, tm.tm_hour);
    p[13] = ':';
    append_2(p + 14, tm.tm_min);
    p[16] = ':';
    append_2(p + 17, tm.tm_sec);
    cached_second_ = secs;
  }
  out += '"';
  out.append(cached_text_, 19);
  const char tail[6] = {'.',
                        static_cast<char>('0' + frac / 100),
                        static_cast<char>('0' + frac / 10 % 10),
                        static_cast<char>('0' + frac % 10),
                        'Z',
                        '"'};
  out.append(tail, 6);
}

void RecordLines::append(std::string& out, const Record& r, bool raw) {
  if (raw) {
    out += r.data();
    out += '\n';
    return;
  }
  out += "{\"shardId\":";
  append_json_string(out, r.shard_id());
  out += ",\"sequenceNumber\":";
  append_json_string(out, r.sequence_number());
  out += ",\"subSequenceNumber\":";
  char num[24];
  auto [end, ec] = std::to_chars(num, num + sizeof num, r.sub_sequence_number());
  (void)ec;  // 24 characters hold any 64-bit number
  out.append(num, static_cast<std::size_t>(end - num));
  out += ",\"partitionKey\":";
  append_json_string(out, r.partition_key());
  out += ",\"approximateArrivalTimestamp\":";
  append_timestamp(out, r.approximate_arrival_timestamp());
  out += ",\"data\":\"";
  aws::base64_encode_append(r.data(), out);
  out += "\"}\n";
}

}  // namespace kcl::cli
