#include "producer/kpl_aggregator.h"

#include <algorithm>

#include "base/digest.h"
#include "kpl/kpl_format.h"
#include "kpl/protobuf_wire.h"

namespace kcl::producer {

namespace pb = kpl::pb;
namespace agg_field = kpl::aggregated_record;
namespace rec_field = kpl::record;

namespace {

// Bytes of a length-delimited field with a one-byte key (field numbers 1..15, as all of the
// KPL format's are).
std::size_t bytes_field_size(std::size_t n) { return 1 + pb::varint_size(n) + n; }

}  // namespace

HashKey partition_key_hash(std::string_view partition_key) {
  base::Md5Digest md{};
  // Without MD5 (a FIPS-only OpenSSL) every key hashes to 0: the records still go out, all
  // to the shard owning hash key 0.
  if (!base::md5(partition_key, md)) return 0;
  HashKey h = 0;
  for (unsigned char byte : md) h = (h << 8) | byte;
  return h;
}

std::optional<HashKey> parse_hash_key(std::string_view decimal) {
  if (decimal.empty() || decimal.size() > 39) return std::nullopt;
  HashKey value = 0;
  const HashKey max = ~HashKey{0};
  for (char c : decimal) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<unsigned>(c - '0');
    if (value > (max - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

std::string hash_key_to_string(HashKey key) {
  if (key == 0) return "0";
  std::string out;
  while (key != 0) {
    out.push_back(static_cast<char>('0' + static_cast<int>(key % 10)));
    key /= 10;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::size_t KplAggregator::record_cost(std::string_view partition_key,
                                       std::string_view explicit_hash_key,
                                       std::size_t data_size) const {
  std::size_t table = 0;
  std::uint64_t pk_index = pk_index_.size();
  if (auto it = pk_index_.find(std::string(partition_key)); it != pk_index_.end()) {
    pk_index = it->second;
  } else {
    table += bytes_field_size(partition_key.size());
  }
  std::size_t body = 1 + pb::varint_size(pk_index) + bytes_field_size(data_size);
  if (!explicit_hash_key.empty()) {
    std::uint64_t ehk_index = ehk_index_.size();
    if (auto it = ehk_index_.find(std::string(explicit_hash_key)); it != ehk_index_.end()) {
      ehk_index = it->second;
    } else {
      table += bytes_field_size(explicit_hash_key.size());
    }
    body += 1 + pb::varint_size(ehk_index);
  }
  return table + bytes_field_size(body);
}

std::size_t KplAggregator::size() const {
  return kpl::framed_size(keys_.size() + records_bytes_.size());
}

std::size_t KplAggregator::size_with(std::string_view partition_key,
                                     std::string_view explicit_hash_key,
                                     std::string_view data) const {
  return size() + record_cost(partition_key, explicit_hash_key, data.size());
}

void KplAggregator::add(std::string_view partition_key, std::string_view explicit_hash_key,
                        std::string_view data) {
  auto index_of = [this](std::unordered_map<std::string, std::uint64_t>& table, std::uint32_t field,
                         std::string_view key) {
    auto [it, inserted] = table.try_emplace(std::string(key), table.size());
    if (inserted) pb::append_bytes_field(keys_, field, key);
    return it->second;
  };
  std::string body;
  pb::append_varint_field(body, rec_field::kPartitionKeyIndex,
                          index_of(pk_index_, agg_field::kPartitionKeyTable, partition_key));
  if (!explicit_hash_key.empty()) {
    pb::append_varint_field(
        body, rec_field::kExplicitHashKeyIndex,
        index_of(ehk_index_, agg_field::kExplicitHashKeyTable, explicit_hash_key));
  }
  pb::append_bytes_field(body, rec_field::kData, data);
  pb::append_bytes_field(records_bytes_, agg_field::kRecords, body);
  ++records_;
}

std::string KplAggregator::finish() {
  std::string out;
  out.reserve(size());
  kpl::append_magic(out);
  out.append(keys_);
  out.append(records_bytes_);
  kpl::append_digest(out);
  clear();
  return out;
}

void KplAggregator::clear() {
  keys_.clear();
  records_bytes_.clear();
  pk_index_.clear();
  ehk_index_.clear();
  records_ = 0;
}

}  // namespace kcl::producer
