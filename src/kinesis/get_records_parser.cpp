// GetRecords response parsing: the hot path of polling retrieval.
//
// simdjson On-Demand walks the document once in order. Each record's Data is base64-decoded
// straight from the input bytes into the record's string (no unescaped copy), which is
// valid because base64 text never needs JSON escapes; a Data string that does contain an
// escape (e.g. "\/") falls back to the unescaped value.
//
// One simdjson parser (and one padded copy buffer for the string_view entry point) per
// thread, reused across calls: their capacity follows the largest response seen.
#include <simdjson.h>

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

// Seconds since the epoch (with fraction) -> time_point, rounded to the microsecond.
std::chrono::system_clock::time_point from_epoch_seconds(double secs) {
  auto micros = std::chrono::microseconds(std::llround(secs * 1e6));
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(micros));
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

// The raw characters of a JSON string value (between the quotes, escapes not processed).
bool raw_string_body(od::value& v, std::string_view& body) {
  std::string_view tok = v.raw_json_token();
  // The token runs to the next structural character; drop trailing whitespace.
  while (!tok.empty() &&
         (tok.back() == ' ' || tok.back() == '\n' || tok.back() == '\r' || tok.back() == '\t')) {
    tok.remove_suffix(1);
  }
  if (tok.size() < 2 || tok.front() != '"' || tok.back() != '"') return false;
  body = tok.substr(1, tok.size() - 2);
  return true;
}

Status decode_data(od::value& v, std::string& out, std::size_t index) {
  od::json_type type;
  if (auto err = v.type().get(type)) return malformed_at(record_path(index, "Data"), err);
  if (type != od::json_type::string)
    return malformed(record_path(index, "Data") + ": not a string");
  std::string_view body;
  if (!raw_string_body(v, body)) return malformed(record_path(index, "Data") + ": bad string");
  out.clear();
  if (aws::base64_decode_append(body, out)) return Status::Ok();
  if (body.find('\\') != std::string_view::npos) {
    // Escaped characters (legal JSON, unusual for base64): decode the unescaped text.
    std::string_view unescaped;
    if (auto err = v.get_string().get(unescaped)) {
      return malformed_at(record_path(index, "Data"), err);
    }
    out.clear();
    if (aws::base64_decode_append(unescaped, out)) return Status::Ok();
  }
  return malformed(record_path(index, "Data") + ": invalid base64 (" + std::to_string(body.size()) +
                   " characters)");
}

Status parse_record(od::value& rv, KinesisRecord& rec, std::size_t index) {
  od::object obj;
  if (auto err = rv.get_object().get(obj)) {
    return malformed_at("Records[" + std::to_string(index) + "]", err);
  }
  bool have_seq = false, have_data = false, have_key = false;
  // `rec` may be a record of an earlier response (its string capacity is reused).
  rec.explicit_hash_key.clear();
  rec.approximate_arrival_timestamp = {};
  for (auto field_result : obj) {
    od::field field;
    if (auto err = std::move(field_result).get(field)) {
      return malformed_at("Records[" + std::to_string(index) + "]", err);
    }
    od::raw_json_string key = field.key();
    od::value v = field.value();
    if (is_null_member(v)) continue;
    if (key == "Data") {
      KCL_RETURN_IF_ERROR(decode_data(v, rec.data, index));
      have_data = true;
    } else if (key == "SequenceNumber") {
      KCL_RETURN_IF_ERROR(
          get_string_into(v, rec.sequence_number, record_path(index, "SequenceNumber")));
      have_seq = true;
    } else if (key == "PartitionKey") {
      KCL_RETURN_IF_ERROR(
          get_string_into(v, rec.partition_key, record_path(index, "PartitionKey")));
      have_key = true;
    } else if (key == "ApproximateArrivalTimestamp") {
      double secs = 0;
      if (auto err = v.get_double().get(secs)) {
        return malformed_at(record_path(index, "ApproximateArrivalTimestamp"), err);
      }
      if (!std::isfinite(secs) || secs < 0 || secs > 1e11) {
        return malformed(record_path(index, "ApproximateArrivalTimestamp") + ": out of range");
      }
      rec.approximate_arrival_timestamp = from_epoch_seconds(secs);
    } else if (key == "ExplicitHashKey") {
      KCL_RETURN_IF_ERROR(
          get_string_into(v, rec.explicit_hash_key, record_path(index, "ExplicitHashKey")));
    }
    // Anything else (EncryptionType, future fields) is skipped.
  }
  if (!have_seq) return malformed(record_path(index, "SequenceNumber") + ": missing");
  if (!have_data) return malformed(record_path(index, "Data") + ": missing");
  if (!have_key) return malformed(record_path(index, "PartitionKey") + ": missing");
  return Status::Ok();
}

Status parse_records(od::value& v, GetRecordsResult& out) {
  od::array arr;
  if (auto err = v.get_array().get(arr)) return malformed_at("Records", err);
  // No count_elements() pass: it would touch every record's bytes once more (a cache miss
  // per structural character on a 10 MB response). Records already in `out` are reused.
  auto& records = out.records;
  std::size_t i = 0;
  std::size_t bytes = 0;
  for (auto elem : arr) {
    od::value rv;
    if (auto err = elem.get(rv)) return malformed_at("Records[" + std::to_string(i) + "]", err);
    if (i == records.size()) records.emplace_back();
    KCL_RETURN_IF_ERROR(parse_record(rv, records[i], i));
    bytes += records[i].data.size();
    ++i;
  }
  records.resize(i);
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

Status parse_document(od::document& doc, GetRecordsResult& out) {
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
      KCL_RETURN_IF_ERROR(parse_records(v, out));
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

// A parser and a padded copy buffer. A parser keeps buffers sized for the largest document
// it has read (about 8 times a 2.5 MB GetRecords answer), so they are shared by the threads
// of the process through a small pool rather than kept one per thread: the memory for
// parsing no longer grows with the worker's thread count.
struct ParseState {
  od::parser parser;
  std::unique_ptr<char[]> buf;
  std::size_t buf_capacity = 0;
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

Status parse_padded(ParseState& st, const char* data, std::size_t len, std::size_t capacity,
                    GetRecordsResult& out) {
  // out.records is resized, not cleared, when the Records array is reached: reusing a
  // GetRecordsResult across calls reuses its records' string buffers (no malloc/free per
  // record).
  out.next_shard_iterator.reset();
  out.continuation_sequence_number.reset();
  out.millis_behind_latest = 0;
  out.child_shards.clear();
  out.payload_bytes = 0;
  od::document doc;
  if (auto err = st.parser.iterate(data, len, capacity).get(doc))
    return malformed_at("document", err);
  Status s = parse_document(doc, out);
  if (!s.ok()) {
    out.records.clear();
    out.next_shard_iterator.reset();
    out.child_shards.clear();
    out.payload_bytes = 0;
  }
  return s;
}

}  // namespace

Status parse_get_records_response(std::string_view json, GetRecordsResult& out) {
  PooledState pooled;
  ParseState& st = *pooled;
  const std::size_t need = json.size() + simdjson::SIMDJSON_PADDING;
  if (st.buf_capacity < need) {
    std::size_t cap = st.buf_capacity == 0 ? 4096 : st.buf_capacity;
    while (cap < need) cap *= 2;
    st.buf.reset(new char[cap]);
    st.buf_capacity = cap;
  }
  std::memcpy(st.buf.get(), json.data(), json.size());
  std::memset(st.buf.get() + json.size(), 0, simdjson::SIMDJSON_PADDING);
  return parse_padded(st, st.buf.get(), json.size(), need, out);
}

// A body from the HTTP transport already has room for the padding (no copy).
static_assert(aws::HttpResponse::kBodySlack >= simdjson::SIMDJSON_PADDING);

Status parse_subscribe_to_shard_event_in_place(std::string& json, GetRecordsResult& out) {
  return parse_get_records_response_in_place(json, out);
}

Status parse_get_records_response_in_place(std::string& json, GetRecordsResult& out) {
  const std::size_t need = json.size() + simdjson::SIMDJSON_PADDING;
  if (json.capacity() < need) json.reserve(need);
  PooledState pooled;
  return parse_padded(*pooled, json.data(), json.size(), json.capacity(), out);
}

}  // namespace kcl::kinesis
