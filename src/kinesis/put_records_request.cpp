#include "kinesis/put_records_request.h"

#include <cstring>

#include "aws/base64.h"
#include "aws/cbor.h"
#include "aws/json_text.h"

namespace kcl::kinesis {

namespace {

constexpr char kRecordsStart[] = ",\"Records\":[";
constexpr char kData[] = "{\"Data\":\"";
constexpr char kPartitionKey[] = "\",\"PartitionKey\":";
constexpr char kExplicitHashKey[] = ",\"ExplicitHashKey\":";
constexpr char kEnd[] = "]}";
// A record's text beyond its data, keys and their quotes: the literals, the closing brace
// and the comma before every record but the first.
constexpr std::size_t kRecordFixed = (sizeof kData - 1) + (sizeof kPartitionKey - 1) + 2 + 1 + 1;

template <std::size_t N>
char* write_literal(char* p, const char (&text)[N]) {
  std::memcpy(p, text, N - 1);
  return p + (N - 1);
}

}  // namespace

PutRecordsRequest::PutRecordsRequest(std::string_view stream, Wire wire) : wire_(wire) {
  if (wire_ == Wire::kCbor) {
    aws::cbor::Writer w(body_);
    w.map(2);
    w.text("StreamName");
    w.text(stream);
    w.text("Records");
    w.indefinite_array();
    return;
  }
  body_ = "{\"StreamName\":";
  aws::append_json_string(body_, stream);
  body_ += kRecordsStart;
}

void PutRecordsRequest::reserve(std::size_t records, std::size_t bytes) {
  if (wire_ == Wire::kCbor) {
    // A record's names and heads: about 40 bytes besides its data and keys.
    body_.reserve(body_.size() + bytes + records * 48 + 1);
    return;
  }
  body_.reserve(body_.size() + aws::base64_encoded_size(bytes) + records * (kRecordFixed + 64) +
                sizeof kEnd);
}

void PutRecordsRequest::add_cbor(std::string_view data, std::string_view partition_key,
                                 std::string_view explicit_hash_key) {
  using aws::cbor::Major;
  using aws::cbor::Writer;
  constexpr std::string_view kDataName =
      "\x64"
      "Data";
  constexpr std::string_view kKeyName =
      "\x6c"
      "PartitionKey";
  constexpr std::string_view kHashKeyName =
      "\x6f"
      "ExplicitHashKey";
  std::size_t size = 1 + kDataName.size() + Writer::head_size(data.size()) + data.size() +
                     kKeyName.size() + Writer::head_size(partition_key.size()) +
                     partition_key.size();
  if (!explicit_hash_key.empty()) {
    size += kHashKeyName.size() + Writer::head_size(explicit_hash_key.size()) +
            explicit_hash_key.size();
  }
  const std::size_t base = body_.size();
  body_.resize(base + size);
  char* p = body_.data() + base;
  p = Writer::write_head(p, Major::kMap, explicit_hash_key.empty() ? 2 : 3);
  auto put = [&p](std::string_view bytes) {
    if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
    p += bytes.size();
  };
  put(kDataName);
  p = Writer::write_head(p, Major::kBytes, data.size());
  put(data);
  put(kKeyName);
  p = Writer::write_head(p, Major::kText, partition_key.size());
  put(partition_key);
  if (!explicit_hash_key.empty()) {
    put(kHashKeyName);
    p = Writer::write_head(p, Major::kText, explicit_hash_key.size());
    put(explicit_hash_key);
  }
  ++records_;
}

void PutRecordsRequest::add(std::string_view data, std::string_view partition_key,
                            std::string_view explicit_hash_key) {
  if (wire_ == Wire::kCbor) {
    add_cbor(data, partition_key, explicit_hash_key);
    return;
  }
  const std::size_t key_size = aws::json_escaped_size(partition_key);
  const std::size_t hash_key_size =
      explicit_hash_key.empty() ? 0 : aws::json_escaped_size(explicit_hash_key);
  std::size_t size = kRecordFixed + aws::base64_encoded_size(data.size()) + key_size;
  if (!explicit_hash_key.empty()) size += (sizeof kExplicitHashKey - 1) + hash_key_size + 2;
  if (records_ == 0) --size;  // no comma before the first record
  const std::size_t base = body_.size();
  body_.resize(base + size);
  char* p = body_.data() + base;
  if (records_ != 0) *p++ = ',';
  p = write_literal(p, kData);
  p = aws::base64_encode_to(data, p);
  p = write_literal(p, kPartitionKey);
  p = aws::write_json_string(p, partition_key, key_size);
  if (!explicit_hash_key.empty()) {
    p = write_literal(p, kExplicitHashKey);
    p = aws::write_json_string(p, explicit_hash_key, hash_key_size);
  }
  *p = '}';
  ++records_;
}

std::string PutRecordsRequest::take_body() && {
  if (wire_ == Wire::kCbor) {
    body_ += static_cast<char>(aws::cbor::kBreak);
    return std::move(body_);
  }
  body_ += kEnd;
  return std::move(body_);
}

}  // namespace kcl::kinesis
