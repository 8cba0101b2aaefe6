// GetRecords response parsing: the hot path of polling retrieval.
//
// simdjson On-Demand walks the document once in order, over the body itself (kept in the
// result's RecordsBuffer). Records are views into that body: each record's Data is
// base64-decoded in place, over its own base64 text (the output is shorter than the input and
// never overtakes it, and simdjson has indexed the document before we write: it reads only
// the structural characters we leave alone afterwards; a decoding that fails, on an escape
// say, puts the text back as it was, so no scan for escapes runs first); sequence numbers
// and partition keys are the raw string bodies when they hold no escape (stage 1 has
// validated UTF-8 and control characters). A string with an escape (e.g. "\/", legal JSON,
// unusual here) is unescaped into the buffer's side storage instead. No allocation per
// record.
//
// simdjson parsers come from a pool of two per process, reused across calls: their capacity
// follows the largest response seen.
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "aws/base64.h"
#include "aws/http_transport.h"
#include "base/status_macros.h"
#include "kinesis/epoch_seconds.h"
#include "kinesis/kinesis_client.h"

namespace kcl::kinesis {
namespace {

namespace od = simdjson::ondemand;

Status malformed(std::string what) {
  return Status(StatusCode::kInternal, "Kinesis.GetRecords: malformed response: " + what);
}

Status malformed_at(std::string_view where, simdjson::error_code err) {
  std::string what(where);
  what += ": ";
  what += simdjson::error_message(err);
  return malformed(std::move(what));
}

std::string record_path(std::size_t index, std::string_view field) {
  std::string s = "Records[";
  s += std::to_string(index);
  s += "].";
  s += field;
  return s;
}

// AWS SDKs treat a member whose value is JSON null as absent; so does this parser (some
// services and emulators send "ChildShards": null). Consumes the value when it is null.
bool is_null_member(od::value& v) {
  bool null = false;
  return !v.is_null().get(null) && null;
}

Status get_string_into(od::value& v, std::string& out, std::string_view where) {
  std::string_view s;
  auto err = v.get_string().get(s);
  if (err) return malformed_at(where, err);
  out.assign(s.data(), s.size());
  return Status::Ok();
}

// What a record member's value is, read from its raw token alone (no second look at the
// value): a string (its raw body between the quotes, escapes not processed), null (absent,
// as the AWS SDKs read it), or something else (the caller reports the type it wanted).
enum class RawKind { kString, kNull, kOther };

RawKind raw_kind(od::value& v, std::string_view& body) {
  std::string_view tok = v.raw_json_token();
  // The token runs to the next structural character; drop trailing whitespace.
  while (!tok.empty() &&
         (tok.back() == ' ' || tok.back() == '\n' || tok.back() == '\r' || tok.back() == '\t')) {
    tok.remove_suffix(1);
  }
  if (tok.size() >= 2 && tok.front() == '"' && tok.back() == '"') {
    body = tok.substr(1, tok.size() - 2);
    return RawKind::kString;
  }
  if (!tok.empty() && tok.front() == 'n' && is_null_member(v)) return RawKind::kNull;
  return RawKind::kOther;
}

bool has_escape(std::string_view s) noexcept {
  return !s.empty() && std::memchr(s.data(), '\\', s.size()) != nullptr;
}

// The per-record functions below return true when all went well and otherwise set `error`:
// a kcl::Status is a large object (its optional AWS details), and building an OK one for
// every member of every record was a measurable share of the decoding.

// A string member of a record as a view: the raw body when it has no escape, else its
// unescaped value copied into the buffer's side storage. `field` names it in errors.
// A null value is absent: `out` and `present` are left alone.
bool string_view_into(od::value& v, RecordsBuffer& buf, std::string_view& out, bool& present,
                      std::size_t index, std::string_view field, Status& error) {
  std::string_view body;
  switch (raw_kind(v, body)) {
    case RawKind::kNull:
      return true;
    case RawKind::kString:
      present = true;
      if (!has_escape(body)) {
        out = body;
        return true;
      }
      break;
    case RawKind::kOther:
      break;  // get_string() below names the type error
  }
  std::string_view unescaped;
  if (auto err = v.get_string().get(unescaped)) {
    error = malformed_at(record_path(index, field), err);
    return false;
  }
  present = true;
  out = buf.unescaped.emplace_back(unescaped);
  return true;
}

bool decode_data(od::value& v, RecordsBuffer& buf, std::string_view& out, bool& present,
                 std::size_t index, Status& error) {
  std::string_view body;
  const RawKind kind = raw_kind(v, body);
  if (kind == RawKind::kNull) return true;
  if (kind != RawKind::kString) {
    error = malformed(record_path(index, "Data") + ": not a string");
    return false;
  }
  present = true;
  std::size_t written = 0;
  // In place: the body is the buffer's own, and nothing reads these characters again. No
  // scan for escapes first: a backslash is not base64, so the decoding fails on one and
  // then leaves the text as it was, to be unescaped below.
  char* dst = const_cast<char*>(body.data());
  if (aws::base64_decode_in_place(dst, body.size(), written)) {
    out = std::string_view(dst, written);
    return true;
  }
  if (has_escape(body)) {
    // Escaped characters (legal JSON, unusual for base64): decode the unescaped text.
    std::string_view unescaped;
    if (auto err = v.get_string().get(unescaped)) {
      error = malformed_at(record_path(index, "Data"), err);
      return false;
    }
    std::string& side = buf.unescaped.emplace_back(unescaped.size() / 4 * 3, '\0');
    if (aws::base64_decode_to(unescaped, side.data(), written)) {
      side.resize(written);
      out = side;
      return true;
    }
  }
  error = malformed(record_path(index, "Data") + ": invalid base64 (" +
                    std::to_string(body.size()) + " characters)");
  return false;
}

bool parse_timestamp(od::value& v, std::chrono::system_clock::time_point& out, std::size_t index,
                     Status& error) {
  // The usual form, read from the raw token as exact microseconds; anything else through
  // simdjson's number parser.
  std::int64_t micros = 0;
  if (plain_epoch_micros(v.raw_json_token(), micros)) {
    out = from_epoch_micros(micros);
    return true;
  }
  double secs = 0;
  if (auto err = v.get_double().get(secs)) {
    if (is_null_member(v)) return true;
    error = malformed_at(record_path(index, "ApproximateArrivalTimestamp"), err);
    return false;
  }
  if (!std::isfinite(secs) || secs < 0 || secs > 1e11) {
    error = malformed(record_path(index, "ApproximateArrivalTimestamp") + ": out of range");
    return false;
  }
  out = from_epoch_seconds(secs);
  return true;
}

// One record object. Each member's value is looked at once: its raw token tells a string
// from null, so no member pays for a separate null check; members kcl-cpp does not read
// (EncryptionType, future ones) are skipped unread. A member is used where simdjson's
// iterator holds it (a reference, not a copy: copying the key and value pair out of the
// iterator made the CPU wait on store forwarding at every member).
bool parse_record(od::value& rv, RecordsBuffer& buf, KinesisRecord& rec, std::size_t index,
                  Status& error) {
  od::object obj;
  if (auto err = rv.get_object().get(obj)) {
    error = malformed_at("Records[" + std::to_string(index) + "]", err);
    return false;
  }
  bool have_seq = false, have_data = false, have_key = false, have_ehk = false;
  for (auto field_result : obj) {
    if (auto err = field_result.error()) {
      error = malformed_at("Records[" + std::to_string(index) + "]", err);
      return false;
    }
    od::field& field = field_result.value_unsafe();
    const od::raw_json_string key = field.key();
    od::value& v = field.value();
    bool ok = true;
    if (key == "Data") {
      ok = decode_data(v, buf, rec.data, have_data, index, error);
    } else if (key == "SequenceNumber") {
      ok = string_view_into(v, buf, rec.sequence_number, have_seq, index, "SequenceNumber", error);
    } else if (key == "PartitionKey") {
      ok = string_view_into(v, buf, rec.partition_key, have_key, index, "PartitionKey", error);
    } else if (key == "ApproximateArrivalTimestamp") {
      ok = parse_timestamp(v, rec.approximate_arrival_timestamp, index, error);
    } else if (key == "ExplicitHashKey") {
      ok = string_view_into(v, buf, rec.explicit_hash_key, have_ehk, index, "ExplicitHashKey",
                            error);
    }
    if (!ok) return false;
  }
  const char* missing = !have_seq    ? "SequenceNumber"
                        : !have_data ? "Data"
                        : !have_key  ? "PartitionKey"
                                     : nullptr;
  if (missing != nullptr) {
    error = malformed(record_path(index, missing) + ": missing");
    return false;
  }
  return true;
}

Status parse_records(od::value& v, GetRecordsResult& out, RecordSink* sink) {
  od::array arr;
  if (auto err = v.get_array().get(arr)) return malformed_at("Records", err);
  // No count_elements() pass: it would touch every record's bytes once more (a cache miss
  // per structural character on a 10 MB response). The vector's capacity is reused.
  auto& records = out.records;
  records.clear();
  std::size_t i = 0;
  std::size_t bytes = 0;
  Status error;       // set by parse_record when it returns false
  KinesisRecord one;  // with a sink: each record in turn
  for (auto elem : arr) {
    od::value rv;
    if (auto err = elem.get(rv)) return malformed_at("Records[" + std::to_string(i) + "]", err);
    KinesisRecord& rec = sink != nullptr ? (one = KinesisRecord{}) : records.emplace_back();
    if (!parse_record(rv, *out.buffer, rec, i, error)) return error;
    if (sink != nullptr) sink->add(rec);
    bytes += rec.data.size();
    ++i;
  }
  out.payload_bytes = bytes;
  return Status::Ok();
}

Status parse_string_array(od::value& v, std::vector<std::string>& out, std::string_view where) {
  od::array arr;
  if (auto err = v.get_array().get(arr)) return malformed_at(where, err);
  for (auto elem : arr) {
    od::value ev;
    if (auto err = elem.get(ev)) return malformed_at(where, err);
    std::string s;
    KCL_RETURN_IF_ERROR(get_string_into(ev, s, where));
    out.push_back(std::move(s));
  }
  return Status::Ok();
}

Status parse_child_shards(od::value& v, std::vector<ChildShard>& out) {
  od::array arr;
  if (auto err = v.get_array().get(arr)) return malformed_at("ChildShards", err);
  std::size_t i = 0;
  for (auto elem : arr) {
    const std::string where = "ChildShards[" + std::to_string(i++) + "]";
    od::object obj;
    if (auto err = elem.get_object().get(obj)) return malformed_at(where, err);
    ChildShard child;
    for (auto field_result : obj) {
      od::field field;
      if (auto err = std::move(field_result).get(field)) return malformed_at(where, err);
      od::raw_json_string key = field.key();
      od::value fv = field.value();
      if (is_null_member(fv)) continue;
      if (key == "ShardId") {
        KCL_RETURN_IF_ERROR(get_string_into(fv, child.shard_id, where + ".ShardId"));
      } else if (key == "ParentShards") {
        KCL_RETURN_IF_ERROR(parse_string_array(fv, child.parent_shards, where + ".ParentShards"));
      } else if (key == "HashKeyRange") {
        od::object range;
        if (auto err = fv.get_object().get(range))
          return malformed_at(where + ".HashKeyRange", err);
        for (auto rf_result : range) {
          od::field rf;
          if (auto err = std::move(rf_result).get(rf))
            return malformed_at(where + ".HashKeyRange", err);
          od::raw_json_string rkey = rf.key();
          od::value rv = rf.value();
          if (is_null_member(rv)) continue;
          if (rkey == "StartingHashKey") {
            KCL_RETURN_IF_ERROR(get_string_into(rv, child.hash_key_range.starting_hash_key,
                                                where + ".HashKeyRange.StartingHashKey"));
          } else if (rkey == "EndingHashKey") {
            KCL_RETURN_IF_ERROR(get_string_into(rv, child.hash_key_range.ending_hash_key,
                                                where + ".HashKeyRange.EndingHashKey"));
          }
        }
      }
    }
    if (child.shard_id.empty()) return malformed(where + ".ShardId: missing");
    out.push_back(std::move(child));
  }
  return Status::Ok();
}

Status parse_document(od::document& doc, GetRecordsResult& out, RecordSink* sink) {
  od::object top;
  if (auto err = doc.get_object().get(top)) return malformed_at("top level", err);
  bool have_records = false;
  for (auto field_result : top) {
    od::field field;
    if (auto err = std::move(field_result).get(field)) return malformed_at("top level", err);
    od::raw_json_string key = field.key();
    od::value v = field.value();
    if (is_null_member(v)) continue;  // absent; NextShardIterator null = the shard's end
    if (key == "Records") {
      // As the CBOR reader: two arrays would be delivered both with a sink, the second alone
      // without one.
      if (have_records) return malformed("a second Records member");
      KCL_RETURN_IF_ERROR(parse_records(v, out, sink));
      have_records = true;
    } else if (key == "NextShardIterator") {
      std::string it;
      KCL_RETURN_IF_ERROR(get_string_into(v, it, "NextShardIterator"));
      out.next_shard_iterator = std::move(it);
    } else if (key == "ContinuationSequenceNumber") {
      std::string c;
      KCL_RETURN_IF_ERROR(get_string_into(v, c, "ContinuationSequenceNumber"));
      out.continuation_sequence_number = std::move(c);
    } else if (key == "MillisBehindLatest") {
      std::int64_t ms = 0;
      if (auto err = v.get_int64().get(ms)) return malformed_at("MillisBehindLatest", err);
      out.millis_behind_latest = ms;
    } else if (key == "ChildShards") {
      KCL_RETURN_IF_ERROR(parse_child_shards(v, out.child_shards));
    }
  }
  // The top-level object must end the document.
  const char* loc = nullptr;
  if (doc.current_location().get(loc) != simdjson::OUT_OF_BOUNDS) {
    return malformed("trailing content after the top-level object");
  }
  if (!have_records) {
    out.records.clear();
    return malformed("Records: missing");
  }
  return Status::Ok();
}

// A parser keeps buffers sized for the largest document it has read, so parsers are shared
// by the threads of the process through a small pool rather than kept one per thread: the
// memory for parsing does not grow with the worker's thread count.
struct ParseState {
  od::parser parser;
};

class ParserPool {
 public:
  // At most two parses at once: parsing takes a millisecond or two per answer, far less
  // than the call that fetched it, so more would only hold more memory.
  static constexpr std::size_t kMaxStates = 2;

  std::unique_ptr<ParseState> acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !free_.empty() || created_ < kMaxStates; });
    if (!free_.empty()) {
      auto st = std::move(free_.back());
      free_.pop_back();
      return st;
    }
    ++created_;
    return std::make_unique<ParseState>();
  }
  void release(std::unique_ptr<ParseState> st) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(std::move(st));
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<ParseState>> free_;
  std::size_t created_ = 0;
};

ParserPool& parser_pool() {
  static ParserPool pool;  // an internal cache of this module, never part of the API
  return pool;
}

// A ParseState held for one parse.
class PooledState {
 public:
  PooledState() : st_(parser_pool().acquire()) {}
  ~PooledState() { parser_pool().release(std::move(st_)); }
  PooledState(const PooledState&) = delete;
  PooledState& operator=(const PooledState&) = delete;
  ParseState& operator*() { return *st_; }
  ParseState* operator->() { return st_.get(); }

 private:
  std::unique_ptr<ParseState> st_;
};

// Parses out.buffer->body[offset, offset + size) (padded: the body's capacity reaches at
// least SIMDJSON_PADDING past it) in place.
Status parse_buffer(GetRecordsResult& out, std::size_t offset, std::size_t size, RecordSink* sink) {
  out.reset_answer();
  std::string& body = out.buffer->body;
  PooledState pooled;
  // A parser grown for every slightly larger answer would allocate (and fault in) its index
  // each time; with a quarter more room it settles after the first few answers.
  if (pooled->parser.capacity() < size) {
    const std::size_t room = std::min(size + size / 4, pooled->parser.max_capacity());
    if (auto err = pooled->parser.allocate(room)) return malformed_at("document", err);
  }
  od::document doc;
  if (auto err =
          pooled->parser.iterate(body.data() + offset, size, body.capacity() - offset).get(doc))
    return malformed_at("document", err);
  Status s = parse_document(doc, out, sink);
  if (!s.ok()) out.reset_answer();
  return s;
}

// Takes `buffer` as the records' buffer and parses its [offset, offset + size) in place.
Status parse_owned(std::string&& buffer, std::size_t offset, std::size_t size,
                   GetRecordsResult& out, RecordSink* sink = nullptr) {
  out.buffer = std::make_shared<RecordsBuffer>();
  std::string& body = out.buffer->body;
  body = std::move(buffer);
  const std::size_t need = offset + size + simdjson::SIMDJSON_PADDING;
  if (body.capacity() < need) body.reserve(need);
  return parse_buffer(out, offset, size, sink);
}

}  // namespace

RecordsBuffer::~RecordsBuffer() { aws::response_body_recycler().give(std::move(body)); }

std::size_t RecordsBuffer::footprint() const noexcept {
  std::size_t n = sizeof(RecordsBuffer) + body.capacity() + shard_id.capacity();
  for (const std::string& s : unescaped) n += sizeof(std::string) + s.capacity();
  return n;
}

Status parse_get_records_response(std::string_view json, GetRecordsResult& out) {
  std::string body;
  body.reserve(json.size() + simdjson::SIMDJSON_PADDING);
  body.assign(json);
  return parse_owned(std::move(body), 0, json.size(), out);
}

// A body from the HTTP transport already has room for the padding (no copy).
static_assert(aws::HttpResponse::kBodySlack >= simdjson::SIMDJSON_PADDING);

Status parse_subscribe_to_shard_event_in_place(std::string&& buffer, std::size_t offset,
                                               std::size_t size, GetRecordsResult& out,
                                               RecordSink* sink) {
  if (!range_within(buffer.size(), offset, size)) {
    out = GetRecordsResult{};
    return payload_range_error();
  }
  return parse_owned(std::move(buffer), offset, size, out, sink);
}

Status parse_get_records_response_in_place(std::string&& json, GetRecordsResult& out,
                                           RecordSink* sink) {
  const std::size_t size = json.size();
  return parse_owned(std::move(json), 0, size, out, sink);
}

}  // namespace kcl::kinesis
