// The Kinesis data calls in CBOR (see kinesis_cbor.h). Answers are walked once, in order,
// with aws::cbor::Reader over the answer's own buffer: no document, no copy of a record.
#include "kinesis/kinesis_cbor.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

#include "aws/base64.h"
#include "aws/cbor.h"
#include "aws/json_text.h"
#include "kinesis/epoch_seconds.h"
#include "kinesis/shard_indexer.h"

namespace kcl::kinesis {
namespace {

using aws::cbor::Head;
using aws::cbor::Major;
using aws::cbor::Reader;
using aws::cbor::Writer;

// ---- requests ----

std::int64_t epoch_millis(std::chrono::system_clock::time_point tp) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(tp.time_since_epoch()).count();
}

// ---- answers ----

// Where a decoding failed: the operation, the field's path and why; built only on failure.
class Failure {
 public:
  explicit Failure(const char* op) : op_(op) {}

  // Fails at `path` (a field) with `why`, at the reader's position.
  bool at(const Reader& r, std::string_view path, std::string_view why) {
    std::string m = "Kinesis.";
    m += op_;
    m += ": malformed CBOR response: ";
    m += path.empty() ? std::string_view("top level") : path;
    m += ": ";
    m += why;
    m += " (byte ";
    m += std::to_string(r.offset());
    m += ")";
    status_ = Status(StatusCode::kInternal, std::move(m));
    return false;
  }
  // The reader's own error at `path`.
  bool reader(const Reader& r, std::string_view path) { return at(r, path, r.error()); }
  // A value of the wrong type at `path`.
  bool type(const Reader& r, std::string_view path, const char* wanted, const Head& h) {
    std::string why = "expected ";
    why += wanted;
    why += ", found ";
    why += aws::cbor::major_name(h.major);
    return at(r, path, why);
  }
  Status take() { return std::move(status_); }

 private:
  const char* op_;
  Status status_;
};

// Whether text is valid UTF-8: ASCII (sequence numbers, most keys) is checked here eight
// bytes at a time, the last word overlapping the one before it (no byte-by-byte tail);
// anything else goes to the full validation. Inline: called for two members of every record.
[[gnu::always_inline]] inline bool valid_text(std::string_view s) {
  const char* p = s.data();
  const std::size_t n = s.size();
  std::uint64_t high = 0;
  if (n >= 8) {
    const char* const last = p + n - 8;
    std::uint64_t w;
    for (; p < last; p += 8) {
      std::memcpy(&w, p, 8);
      high |= w;
    }
    std::memcpy(&w, last, 8);
    high |= w;
  } else {
    for (std::size_t i = 0; i < n; ++i) high |= static_cast<std::uint8_t>(p[i]);
  }
  if ((high & 0x8080808080808080ULL) == 0) return true;
  return aws::is_valid_utf8(s);
}

std::string record_path(std::size_t index, std::string_view field) {
  std::string s = "Records[";
  s += std::to_string(index);
  s += "]";
  if (!field.empty()) {
    s += '.';
    s += field;
  }
  return s;
}

std::string join(std::string_view a, std::string_view b) {
  std::string s(a);
  if (!s.empty()) s += '.';
  s += b;
  return s;
}

// Iterates a map's members: a definite count, or an indefinite map up to its break.
class Members {
 public:
  explicit Members(const Head& map) : indefinite_(map.indefinite), left_(map.arg) {}
  // Whether another member follows (consumes an indefinite map's break).
  bool next(Reader& r) {
    if (indefinite_) return !r.take_break();
    if (left_ == 0) return false;
    --left_;
    return true;
  }

 private:
  bool indefinite_;
  std::uint64_t left_;
};

using Elements = Members;  // an array's elements iterate the same way

// Reads a map's head at `path`.
bool open_map(Reader& r, Failure& f, std::string_view path, Head& h) {
  if (!r.head(h)) return f.reader(r, path);
  if (h.major != Major::kMap) return f.type(r, path, "a map", h);
  return true;
}

// Reads a member name (a text string); `path()` names the map, built only on failure.
template <typename Path>
bool member_name_at(Reader& r, Failure& f, const Path& path, std::string_view& name) {
  if (r.short_text(name)) return true;
  Head h;
  if (!r.head(h)) return f.reader(r, path());
  if (h.major != Major::kText) return f.type(r, path(), "a member name (a text string)", h);
  if (!r.string_body(h, name)) return f.reader(r, path());
  return true;
}

bool member_name(Reader& r, Failure& f, std::string_view path, std::string_view& name) {
  return member_name_at(
      r, f, [path] { return std::string(path); }, name);
}

// A text value as a view (null: `present` false). `path` builds the field's name on failure.
template <typename Path>
bool text_view(Reader& r, Failure& f, const Path& path, std::string_view& out, bool& present) {
  Head h;
  if (!r.head(h)) return f.reader(r, path());
  if (h.is_null()) {
    present = false;
    return true;
  }
  if (h.major != Major::kText) return f.type(r, path(), "a text string", h);
  if (!r.string_body(h, out)) return f.reader(r, path());
  if (!valid_text(out)) return f.at(r, path(), "text that is not valid UTF-8");
  present = true;
  return true;
}

template <typename Path>
bool text_into(Reader& r, Failure& f, const Path& path, std::string& out, bool& present) {
  std::string_view v;
  if (!text_view(r, f, path, v, present)) return false;
  if (present) out.assign(v);
  return true;
}

bool int_value(Reader& r, Failure& f, std::string_view path, std::int64_t& out, bool& present) {
  Head h;
  if (!r.head(h)) return f.reader(r, path);
  present = false;
  if (h.is_null()) return true;
  if (h.major == Major::kUnsigned) {
    if (h.arg > static_cast<std::uint64_t>(INT64_MAX)) return f.at(r, path, "integer too large");
    out = static_cast<std::int64_t>(h.arg);
  } else if (h.major == Major::kNegative) {
    if (h.arg > static_cast<std::uint64_t>(INT64_MAX)) return f.at(r, path, "integer too small");
    out = -1 - static_cast<std::int64_t>(h.arg);
  } else {
    return f.type(r, path, "an integer", h);
  }
  present = true;
  return true;
}

// A timestamp: tag 1 (optional), then epoch milliseconds as an integer or a float.
template <typename Path>
bool timestamp_value(Reader& r, Failure& f, const Path& path,
                     std::chrono::system_clock::time_point& out) {
  Head h;
  if (!r.head(h)) return f.reader(r, path());
  if (h.major == Major::kTag) {
    if (h.arg != aws::cbor::kTagEpochTime)
      return f.at(r, path(), "a tag other than 1 (epoch time)");
    if (!r.head(h)) return f.reader(r, path());
  }
  constexpr std::int64_t kMaxMillis = 100'000'000'000'000;  // 1e11 seconds, as for JSON
  if (h.major == Major::kUnsigned) {
    if (h.arg > static_cast<std::uint64_t>(kMaxMillis)) return f.at(r, path(), "out of range");
    out = from_epoch_micros(static_cast<std::int64_t>(h.arg) * 1000);
    return true;
  }
  if (h.is_float()) {
    const double ms = Reader::float_value(h);
    if (!std::isfinite(ms) || ms < 0 || ms > static_cast<double>(kMaxMillis)) {
      return f.at(r, path(), "out of range");
    }
    out = from_epoch_seconds(ms / 1000);
    return true;
  }
  if (h.is_null()) return true;
  return f.type(r, path(), "epoch milliseconds (an unsigned integer or a float)", h);
}

// Record data: a byte string as it lies, or a base64 text string decoded in place.
bool data_value(Reader& r, Failure& f, std::size_t index, std::string_view& out, bool& present) {
  Head h;
  if (!r.head(h)) return f.reader(r, record_path(index, "Data"));
  if (h.major == Major::kBytes) {
    if (!r.string_body(h, out)) return f.reader(r, record_path(index, "Data"));
    present = true;
    return true;
  }
  if (h.major == Major::kText) {
    std::string_view text;
    if (!r.string_body(h, text)) return f.reader(r, record_path(index, "Data"));
    char* dst = const_cast<char*>(text.data());  // the answer's own buffer
    std::size_t written = 0;
    if (!aws::base64_decode_in_place(dst, text.size(), written)) {
      return f.at(r, record_path(index, "Data"), "a text string that is not base64");
    }
    out = std::string_view(dst, written);
    present = true;
    return true;
  }
  if (h.is_null()) return true;
  return f.type(r, record_path(index, "Data"), "a byte string", h);
}

// Whether a member name is the literal `name` (a compare of a known size, inlined).
template <std::size_t N>
bool equals(std::string_view a, const char (&name)[N]) {
  return a.size() == N - 1 && std::memcmp(a.data(), name, N - 1) == 0;
}

// What a member handler did with a member's value.
enum class Took { kRead, kFailed, kUnknown };
Took took(bool ok) { return ok ? Took::kRead : Took::kFailed; }

// Walks the members of the map whose head `map` was just read (`path` names it): reads each
// name and calls on_member(name), which reads the value (or answers kUnknown to have it
// skipped).
template <typename OnMember>
bool walk_members(Reader& r, Failure& f, const Head& map, std::string_view path,
                  OnMember&& on_member) {
  Members members(map);
  while (members.next(r)) {
    std::string_view name;
    if (!member_name(r, f, path, name)) return false;
    switch (on_member(name)) {
      case Took::kRead:
        break;
      case Took::kFailed:
        return false;
      case Took::kUnknown:
        if (!r.skip()) return f.reader(r, join(path, name));
        break;
    }
  }
  return true;
}

// The record members kcl-cpp reads, told apart by length first.
enum class RecordMember {
  kOther,
  kData,
  kSequenceNumber,
  kPartitionKey,
  kExplicitHashKey,
  kArrival
};

// Told apart by length, in the order AWS writes a record's members (a chain of compares the
// branch predictor learns from an answer's first records: a jump table on the length cost
// more, its target unknown until the name's head is read).
RecordMember record_member(std::string_view name) {
  const std::size_t n = name.size();
  if (n == 14) {
    return equals(name, "SequenceNumber") ? RecordMember::kSequenceNumber : RecordMember::kOther;
  }
  if (n == 27) {
    return equals(name, "ApproximateArrivalTimestamp") ? RecordMember::kArrival
                                                       : RecordMember::kOther;
  }
  if (n == 4) return equals(name, "Data") ? RecordMember::kData : RecordMember::kOther;
  if (n == 12) {
    return equals(name, "PartitionKey") ? RecordMember::kPartitionKey : RecordMember::kOther;
  }
  if (n == 15) {
    return equals(name, "ExplicitHashKey") ? RecordMember::kExplicitHashKey : RecordMember::kOther;
  }
  return RecordMember::kOther;
}

bool parse_record(Reader& r, Failure& f, KinesisRecord& rec, std::size_t index) {
  Head map;
  if (!r.head(map)) return f.reader(r, record_path(index, ""));
  if (map.major != Major::kMap) return f.type(r, record_path(index, ""), "a map", map);
  bool have_seq = false, have_data = false, have_key = false, have_ehk = false;
  Members members(map);
  while (members.next(r)) {
    std::string_view name;
    if (!member_name_at(
            r, f, [index] { return record_path(index, ""); }, name)) {
      return false;
    }
    bool ok = true;
    switch (record_member(name)) {
      case RecordMember::kData:
        ok = data_value(r, f, index, rec.data, have_data);
        break;
      case RecordMember::kSequenceNumber:
        ok = text_view(
            r, f, [index] { return record_path(index, "SequenceNumber"); }, rec.sequence_number,
            have_seq);
        break;
      case RecordMember::kPartitionKey:
        ok = text_view(
            r, f, [index] { return record_path(index, "PartitionKey"); }, rec.partition_key,
            have_key);
        break;
      case RecordMember::kExplicitHashKey:
        ok = text_view(
            r, f, [index] { return record_path(index, "ExplicitHashKey"); }, rec.explicit_hash_key,
            have_ehk);
        break;
      case RecordMember::kArrival:
        ok = timestamp_value(
            r, f, [index] { return record_path(index, "ApproximateArrivalTimestamp"); },
            rec.approximate_arrival_timestamp);
        break;
      case RecordMember::kOther:  // EncryptionType and members kcl-cpp does not read
        ok = r.skip_short_scalar() || r.skip() || f.reader(r, record_path(index, name));
        break;
    }
    if (!ok) return false;
  }
  const char* missing = !have_seq    ? "SequenceNumber"
                        : !have_data ? "Data"
                        : !have_key  ? "PartitionKey"
                                     : nullptr;
  if (missing != nullptr) return f.at(r, record_path(index, missing), "missing");
  return true;
}

bool parse_records(Reader& r, Failure& f, GetRecordsResult& out, RecordSink* sink) {
  Head arr;
  if (!r.head(arr)) return f.reader(r, "Records");
  if (arr.major != Major::kArray) return f.type(r, "Records", "an array", arr);
  auto& records = out.records;
  records.clear();
  std::size_t i = 0;
  std::size_t bytes = 0;
  KinesisRecord one;
  Elements elements(arr);
  while (elements.next(r)) {
    KinesisRecord& rec = sink != nullptr ? (one = KinesisRecord{}) : records.emplace_back();
    if (!parse_record(r, f, rec, i)) return false;
    if (sink != nullptr) sink->add(rec);
    bytes += rec.data.size();
    ++i;
  }
  out.payload_bytes = bytes;
  return true;
}

bool parse_string_array(Reader& r, Failure& f, const std::string& path,
                        std::vector<std::string>& out) {
  Head arr;
  if (!r.head(arr)) return f.reader(r, path);
  if (arr.is_null()) return true;
  if (arr.major != Major::kArray) return f.type(r, path, "an array", arr);
  Elements elements(arr);
  std::size_t i = 0;
  while (elements.next(r)) {
    std::string s;
    bool present = false;
    if (!text_into(
            r, f, [&] { return path + "[" + std::to_string(i) + "]"; }, s, present)) {
      return false;
    }
    if (!present) return f.at(r, path + "[" + std::to_string(i) + "]", "null");
    out.push_back(std::move(s));
    ++i;
  }
  return true;
}

bool parse_hash_key_range(Reader& r, Failure& f, const std::string& path, HashKeyRange& range) {
  Head map;
  if (!r.head(map)) return f.reader(r, path);
  if (map.is_null()) return true;
  if (map.major != Major::kMap) return f.type(r, path, "a map", map);
  bool present = false;
  return walk_members(r, f, map, path, [&](std::string_view name) {
    if (equals(name, "StartingHashKey")) {
      return took(text_into(
          r, f, [&] { return path + ".StartingHashKey"; }, range.starting_hash_key, present));
    }
    if (equals(name, "EndingHashKey")) {
      return took(text_into(
          r, f, [&] { return path + ".EndingHashKey"; }, range.ending_hash_key, present));
    }
    return Took::kUnknown;
  });
}

bool parse_child_shards(Reader& r, Failure& f, std::vector<ChildShard>& out) {
  Head arr;
  if (!r.head(arr)) return f.reader(r, "ChildShards");
  if (arr.is_null()) return true;
  if (arr.major != Major::kArray) return f.type(r, "ChildShards", "an array", arr);
  Elements elements(arr);
  std::size_t i = 0;
  while (elements.next(r)) {
    const std::string where = "ChildShards[" + std::to_string(i++) + "]";
    Head map;
    if (!open_map(r, f, where, map)) return false;
    ChildShard child;
    bool present = false;
    const bool ok = walk_members(r, f, map, where, [&](std::string_view name) {
      if (equals(name, "ShardId")) {
        return took(text_into(
            r, f, [&] { return where + ".ShardId"; }, child.shard_id, present));
      }
      if (equals(name, "ParentShards")) {
        return took(parse_string_array(r, f, where + ".ParentShards", child.parent_shards));
      }
      if (equals(name, "HashKeyRange")) {
        return took(parse_hash_key_range(r, f, where + ".HashKeyRange", child.hash_key_range));
      }
      return Took::kUnknown;
    });
    if (!ok) return false;
    if (child.shard_id.empty()) return f.at(r, where + ".ShardId", "missing");
    out.push_back(std::move(child));
  }
  return true;
}

// The top-level head, after an optional self-described CBOR tag.
bool top_map(Reader& r, Failure& f, Head& h) {
  if (!r.head(h)) return f.reader(r, "");
  if (h.major == Major::kTag && h.arg == aws::cbor::kTagSelfDescribed) {
    if (!r.head(h)) return f.reader(r, "");
  }
  if (h.major != Major::kMap) return f.type(r, "", "a map", h);
  return true;
}

bool end_of_answer(Reader& r, Failure& f) {
  if (!r.at_end()) return f.at(r, "", "trailing bytes after the top-level map");
  return true;
}

// A string member of an answer into an optional.
bool optional_text(Reader& r, Failure& f, const char* path, std::optional<std::string>& out) {
  std::string v;
  bool present = false;
  if (!text_into(
          r, f, [path] { return std::string(path); }, v, present)) {
    return false;
  }
  if (present) out = std::move(v);
  return true;
}

bool parse_records_document(Reader& r, Failure& f, GetRecordsResult& out, RecordSink* sink) {
  Head top;
  if (!top_map(r, f, top)) return false;
  bool have_records = false;
  const bool ok = walk_members(r, f, top, "", [&](std::string_view name) {
    if (equals(name, "Records")) {
      if (have_records) return took(f.at(r, "Records", "a second Records member"));
      have_records = true;
      return took(parse_records(r, f, out, sink));
    }
    if (equals(name, "NextShardIterator")) {
      return took(optional_text(r, f, "NextShardIterator", out.next_shard_iterator));
    }
    if (equals(name, "ContinuationSequenceNumber")) {
      return took(
          optional_text(r, f, "ContinuationSequenceNumber", out.continuation_sequence_number));
    }
    if (equals(name, "MillisBehindLatest")) {
      bool present = false;
      return took(int_value(r, f, "MillisBehindLatest", out.millis_behind_latest, present));
    }
    if (equals(name, "ChildShards")) return took(parse_child_shards(r, f, out.child_shards));
    return Took::kUnknown;
  });
  if (!ok || !end_of_answer(r, f)) return false;
  if (!have_records) return f.at(r, "Records", "missing");
  return true;
}

Status decode_records(GetRecordsResult& out, std::size_t offset, std::size_t size, RecordSink* sink,
                      const char* op) {
  out.reset_answer();
  Reader r(out.buffer->body.data() + offset, size);
  Failure f(op);
  if (parse_records_document(r, f, out, sink)) return Status::Ok();
  out.reset_answer();
  return f.take();
}

Status decode_owned(std::string&& buffer, std::size_t offset, std::size_t size,
                    GetRecordsResult& out, RecordSink* sink, const char* op) {
  out.buffer = std::make_shared<RecordsBuffer>();
  out.buffer->body = std::move(buffer);
  return decode_records(out, offset, size, sink, op);
}

}  // namespace

std::string cbor_get_records_request(std::string_view shard_iterator, int limit) {
  std::string body;
  body.reserve(shard_iterator.size() + 32);
  Writer w(body);
  w.map(limit > 0 ? 2 : 1);
  w.text("ShardIterator");
  w.text(shard_iterator);
  if (limit > 0) {
    w.text("Limit");
    w.uint(static_cast<std::uint64_t>(limit));
  }
  return body;
}

std::string cbor_put_record_request(std::string_view stream, const PutRecordsEntry& entry) {
  std::string body;
  body.reserve(stream.size() + entry.data.size() + entry.partition_key.size() +
               entry.explicit_hash_key.size() + 64);
  Writer w(body);
  w.map(entry.explicit_hash_key.empty() ? 3 : 4);
  w.text("StreamName");
  w.text(stream);
  w.text("Data");
  w.bytes(entry.data);
  w.text("PartitionKey");
  w.text(entry.partition_key);
  if (!entry.explicit_hash_key.empty()) {
    w.text("ExplicitHashKey");
    w.text(entry.explicit_hash_key);
  }
  return body;
}

Result<std::string> cbor_subscribe_to_shard_request(std::string_view consumer_arn,
                                                    std::string_view shard_id,
                                                    const IteratorPosition& position) {
  const bool needs_sequence = position.type == IteratorType::kAtSequenceNumber ||
                              position.type == IteratorType::kAfterSequenceNumber;
  if (needs_sequence && position.sequence_number.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("Kinesis.SubscribeToShard: ") + iterator_type_name(position.type) +
                      " needs a sequence number (shard " + std::string(shard_id) + ")");
  }
  std::string body;
  Writer w(body);
  w.map(3);
  w.text("ConsumerARN");
  w.text(consumer_arn);
  w.text("ShardId");
  w.text(shard_id);
  w.text("StartingPosition");
  const bool at_timestamp = position.type == IteratorType::kAtTimestamp;
  w.map(needs_sequence || at_timestamp ? 2 : 1);
  w.text("Type");
  w.text(iterator_type_name(position.type));
  if (needs_sequence) {
    w.text("SequenceNumber");
    w.text(position.sequence_number);
  } else if (at_timestamp) {
    w.text("Timestamp");
    w.tag(aws::cbor::kTagEpochTime);
    w.integer(epoch_millis(position.timestamp));
  }
  return body;
}

Status parse_get_records_cbor(std::string_view body, GetRecordsResult& out) {
  return decode_owned(std::string(body), 0, body.size(), out, nullptr, "GetRecords");
}

Status parse_get_records_cbor_in_place(std::string&& body, GetRecordsResult& out,
                                       RecordSink* sink) {
  const std::size_t size = body.size();
  return decode_owned(std::move(body), 0, size, out, sink, "GetRecords");
}

Status parse_subscribe_to_shard_event_cbor_in_place(std::string&& buffer, std::size_t offset,
                                                    std::size_t size, GetRecordsResult& out,
                                                    RecordSink* sink) {
  if (!range_within(buffer.size(), offset, size)) {
    out = GetRecordsResult{};
    return payload_range_error();
  }
  return decode_owned(std::move(buffer), offset, size, out, sink, "SubscribeToShardEvent");
}

Status parse_subscribe_to_shard_initial_response_cbor(std::string_view payload) {
  std::string copy(payload);
  Reader r(copy.data(), copy.size());
  Failure f("SubscribeToShard");
  Head top;
  if (!top_map(r, f, top)) return f.take();
  if (!r.skip_body(top)) {
    f.reader(r, "");
    return f.take();
  }
  if (!end_of_answer(r, f)) return f.take();
  return Status::Ok();
}

namespace {

// One entry of PutRecords' Records: an error code and message, or where the record went.
bool read_put_entry(Reader& r, Failure& f, std::size_t i, bool keep_positions, ShardIndexer& shards,
                    PutRecordsEntryResult& res) {
  auto path = [i](std::string_view field) { return record_path(i, field); };
  Head map;
  if (!open_map(r, f, path(""), map)) return false;
  std::string_view sequence_number, shard_id;
  bool have_seq = false, have_shard = false, present = false;
  const bool ok = walk_members(r, f, map, path(""), [&](std::string_view name) {
    if (equals(name, "ErrorCode")) {
      return took(text_into(
          r, f, [&] { return path("ErrorCode"); }, res.error_code, present));
    }
    if (equals(name, "ErrorMessage")) {
      return took(text_into(
          r, f, [&] { return path("ErrorMessage"); }, res.error_message, present));
    }
    if (equals(name, "SequenceNumber")) {
      return took(text_view(
          r, f, [&] { return path("SequenceNumber"); }, sequence_number, have_seq));
    }
    if (equals(name, "ShardId")) {
      return took(text_view(
          r, f, [&] { return path("ShardId"); }, shard_id, have_shard));
    }
    return Took::kUnknown;
  });
  if (!ok) return false;
  if (!res.error_code.empty()) return true;
  if (!have_seq) return f.at(r, path("SequenceNumber"), "missing");
  if (!have_shard) return f.at(r, path("ShardId"), "missing");
  if (keep_positions) {
    res.sequence_number.assign(sequence_number);
    res.shard_id.assign(shard_id);
  }
  res.shard = shards.index_of(shard_id);
  res.ok = true;
  return true;
}

// PutRecords' Records: exactly one result for each of the `sent` entries.
bool read_put_entries(Reader& r, Failure& f, std::size_t sent, bool keep_positions,
                      PutRecordsResult& out) {
  Head arr;
  if (!r.head(arr)) return f.reader(r, "Records");
  if (arr.major != Major::kArray) return f.type(r, "Records", "an array", arr);
  auto count_error = [&](std::size_t got) {
    return f.at(r, "Records",
                std::to_string(got) + " results for " + std::to_string(sent) + " entries");
  };
  if (!arr.indefinite && arr.arg != sent) return count_error(arr.arg);
  out.records.resize(sent);
  ShardIndexer shards(out.shard_ids);
  Elements elements(arr);
  std::size_t i = 0;
  while (elements.next(r)) {
    if (i == sent) {
      return f.at(r, "Records", "more results than the " + std::to_string(sent) + " entries");
    }
    if (!read_put_entry(r, f, i, keep_positions, shards, out.records[i])) return false;
    ++i;
  }
  return i == sent || count_error(i);
}

}  // namespace

Status parse_put_records_cbor(std::string_view body, std::size_t sent, bool keep_positions,
                              PutRecordsResult& out) {
  out = PutRecordsResult{};
  std::string copy(body);
  Reader r(copy.data(), copy.size());
  Failure f("PutRecords");
  Head top;
  bool have_records = false;
  // FailedRecordCount is counted from the entries instead; other members are skipped.
  const bool ok = top_map(r, f, top) &&
                  walk_members(r, f, top, "",
                               [&](std::string_view name) {
                                 if (!equals(name, "Records")) return Took::kUnknown;
                                 if (have_records)
                                   return took(f.at(r, "Records", "a second Records member"));
                                 have_records = true;
                                 return took(read_put_entries(r, f, sent, keep_positions, out));
                               }) &&
                  end_of_answer(r, f) && (have_records || f.at(r, "Records", "missing"));
  if (!ok) {
    out = PutRecordsResult{};
    return f.take();
  }
  int failures = 0;
  for (const auto& e : out.records) failures += e.ok ? 0 : 1;
  out.failed_record_count = failures;
  return Status::Ok();
}

Status parse_put_record_cbor(std::string_view body, PutRecordResult& out) {
  out = PutRecordResult{};
  std::string copy(body);
  Reader r(copy.data(), copy.size());
  Failure f("PutRecord");
  Head top;
  bool have_shard = false, have_seq = false;
  const bool ok =
      top_map(r, f, top) &&
      walk_members(r, f, top, "",
                   [&](std::string_view name) {
                     if (equals(name, "ShardId")) {
                       return took(text_into(
                           r, f, [] { return std::string("ShardId"); }, out.shard_id, have_shard));
                     }
                     if (equals(name, "SequenceNumber")) {
                       return took(text_into(
                           r, f, [] { return std::string("SequenceNumber"); }, out.sequence_number,
                           have_seq));
                     }
                     return Took::kUnknown;
                   }) &&
      end_of_answer(r, f) && (have_shard || f.at(r, "ShardId", "missing")) &&
      (have_seq || f.at(r, "SequenceNumber", "missing"));
  if (!ok) {
    out = PutRecordResult{};
    return f.take();
  }
  return Status::Ok();
}

}  // namespace kcl::kinesis
