#include "support/kpl_builder.h"

#include <openssl/evp.h>

#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>

namespace kcl::testing {

// ---- the encoder: written plainly, one byte at a time ----

std::string varint(std::uint64_t value) {
  std::string out;
  do {
    unsigned char byte = static_cast<unsigned char>(value % 128);
    value /= 128;
    if (value != 0) byte = static_cast<unsigned char>(byte + 128);
    out.push_back(static_cast<char>(byte));
  } while (value != 0);
  return out;
}

std::string key(std::uint32_t field, unsigned wire_type) {
  return varint(static_cast<std::uint64_t>(field) * 8 + wire_type);
}

std::string varint_field(std::uint32_t field, std::uint64_t value) {
  return key(field, 0) + varint(value);
}

std::string bytes_field(std::uint32_t field, std::string_view bytes) {
  return key(field, 2) + varint(bytes.size()) + std::string(bytes);
}

std::string fixed32_field(std::uint32_t field, std::uint32_t value) {
  std::string out = key(field, 5);
  for (int i = 0; i < 4; ++i) {
    out.push_back(static_cast<char>(static_cast<unsigned char>(value % 256)));
    value /= 256;
  }
  return out;
}

std::string fixed64_field(std::uint32_t field, std::uint64_t value) {
  std::string out = key(field, 1);
  for (int i = 0; i < 8; ++i) {
    out.push_back(static_cast<char>(static_cast<unsigned char>(value % 256)));
    value /= 256;
  }
  return out;
}

std::string md5(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_md5(), nullptr) != 1 || len != 16) {
    throw std::runtime_error("MD5 unavailable");
  }
  return std::string(reinterpret_cast<const char*>(digest), 16);
}

std::string kpl_magic() { return std::string("\xF3\x89\x9A\xC2", 4); }

std::string to_hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(digits[b / 16]);
    out.push_back(digits[b % 16]);
  }
  return out;
}

std::string from_hex(std::string_view hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  int high = -1;
  for (char c : hex) {
    const int n = nibble(c);
    if (n < 0) continue;  // spaces and separators are allowed
    if (high < 0) {
      high = n;
    } else {
      out.push_back(static_cast<char>(static_cast<unsigned char>(high * 16 + n)));
      high = -1;
    }
  }
  if (high >= 0) throw std::invalid_argument("odd number of hex digits");
  return out;
}

// ---- messages ----

namespace {

std::string encode_tag(const KplTag& tag) {
  std::string out = bytes_field(1, tag.key);
  if (tag.value) out += bytes_field(2, *tag.value);
  return out;
}

std::string encode_record(const RawSubRecord& r) {
  std::string out;
  if (r.partition_key_index) out += varint_field(1, *r.partition_key_index);
  if (r.explicit_hash_key_index) out += varint_field(2, *r.explicit_hash_key_index);
  if (r.data) out += bytes_field(3, *r.data);
  for (const KplTag& t : r.tags) out += bytes_field(4, encode_tag(t));
  out += r.extra_fields;
  return out;
}

}  // namespace

RawAggregate to_raw(const std::vector<SubRecord>& records, bool share_keys) {
  RawAggregate agg;
  std::map<std::string, std::uint64_t> pk_index;
  std::map<std::string, std::uint64_t> ehk_index;
  auto index_of = [share_keys](std::vector<std::string>& table,
                               std::map<std::string, std::uint64_t>& seen,
                               const std::string& k) -> std::uint64_t {
    if (share_keys) {
      auto it = seen.find(k);
      if (it != seen.end()) return it->second;
      seen.emplace(k, table.size());
    }
    table.push_back(k);
    return table.size() - 1;
  };
  for (const SubRecord& s : records) {
    RawSubRecord r;
    r.partition_key_index = index_of(agg.partition_key_table, pk_index, s.partition_key);
    if (s.explicit_hash_key) {
      r.explicit_hash_key_index =
          index_of(agg.explicit_hash_key_table, ehk_index, *s.explicit_hash_key);
    }
    r.data = s.data;
    r.tags = s.tags;
    agg.records.push_back(std::move(r));
  }
  return agg;
}

std::string encode_protobuf(const RawAggregate& aggregate) {
  std::string out;
  for (const std::string& k : aggregate.partition_key_table) out += bytes_field(1, k);
  for (const std::string& k : aggregate.explicit_hash_key_table) out += bytes_field(2, k);
  for (const RawSubRecord& r : aggregate.records) out += bytes_field(3, encode_record(r));
  out += aggregate.extra_fields;
  return out;
}

std::string frame(std::string_view protobuf_body) {
  return kpl_magic() + std::string(protobuf_body) + md5(protobuf_body);
}

std::string build_aggregate(const std::vector<SubRecord>& records, bool share_keys) {
  return frame(encode_protobuf(to_raw(records, share_keys)));
}

std::string with_bad_md5(std::string aggregate) {
  if (aggregate.size() < 16) throw std::invalid_argument("not an aggregate");
  aggregate[aggregate.size() - 5] = static_cast<char>(aggregate[aggregate.size() - 5] ^ 0x10);
  return aggregate;
}

std::string with_truncated_body(std::string_view protobuf_body, std::size_t keep) {
  return frame(protobuf_body.substr(0, keep));
}

kinesis::KinesisRecord kinesis_record(std::string data, std::string sequence_number,
                                      std::string partition_key) {
  // A KinesisRecord is views: its strings are kept for the rest of the test program (a deque
  // never moves what it holds), as a GetRecords answer's buffer keeps a batch's.
  static std::mutex mu;
  static std::deque<std::string> kept;
  std::lock_guard<std::mutex> lock(mu);
  kinesis::KinesisRecord r;
  r.sequence_number = kept.emplace_back(std::move(sequence_number));
  r.partition_key = kept.emplace_back(std::move(partition_key));
  r.approximate_arrival_timestamp =
      std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000000123));
  r.data = kept.emplace_back(std::move(data));
  return r;
}

}  // namespace kcl::testing
