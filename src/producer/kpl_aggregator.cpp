#include "producer/kpl_aggregator.h"

#include <algorithm>
#include <functional>

#include "base/md5.h"
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

std::uint64_t KeyIndex::find(std::string_view key, std::size_t hash,
                             const std::string& text) const {
  if (slots_.empty()) return kAbsent;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t at = hash & mask;; at = (at + 1) & mask) {
    const std::uint32_t slot = slots_[at];
    if (slot == 0) return kAbsent;
    const Key& k = keys_[slot - 1];
    if (k.hash == hash && k.size == key.size() &&
        text.compare(k.offset, k.size, key.data(), key.size()) == 0) {
      return slot - 1;
    }
  }
}

void KeyIndex::add(std::size_t hash, std::size_t offset, std::size_t size) {
  if ((keys_.size() + 1) * 2 > slots_.size()) grow();
  keys_.push_back(Key{hash, offset, size});
  const std::size_t mask = slots_.size() - 1;
  std::size_t at = hash & mask;
  while (slots_[at] != 0) at = (at + 1) & mask;
  slots_[at] = static_cast<std::uint32_t>(keys_.size());
}

void KeyIndex::grow() {
  slots_.assign(std::max<std::size_t>(64, slots_.size() * 2), 0);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    std::size_t at = keys_[i].hash & mask;
    while (slots_[at] != 0) at = (at + 1) & mask;
    slots_[at] = static_cast<std::uint32_t>(i + 1);
  }
}

void KeyIndex::clear() {
  keys_.clear();
  std::fill(slots_.begin(), slots_.end(), 0);
}

KplAggregator::Found KplAggregator::find(const KeyIndex& table, std::string_view key) const {
  Found f;
  f.hash = std::hash<std::string_view>{}(key);
  f.index = table.find(key, f.hash, keys_);
  return f;
}

std::size_t KplAggregator::record_cost(std::string_view partition_key, const Found& pk,
                                       std::string_view explicit_hash_key, const Found& ehk,
                                       std::size_t data_size) const {
  std::size_t table = 0;
  std::uint64_t pk_index = pk.index;
  if (pk_index == KeyIndex::kAbsent) {
    pk_index = pk_index_.size();
    table += bytes_field_size(partition_key.size());
  }
  std::size_t body = 1 + pb::varint_size(pk_index) + bytes_field_size(data_size);
  if (!explicit_hash_key.empty()) {
    std::uint64_t ehk_index = ehk.index;
    if (ehk_index == KeyIndex::kAbsent) {
      ehk_index = ehk_index_.size();
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
  const Found pk = find(pk_index_, partition_key);
  const Found ehk = explicit_hash_key.empty() ? Found{} : find(ehk_index_, explicit_hash_key);
  return size() + record_cost(partition_key, pk, explicit_hash_key, ehk, data.size());
}

void KplAggregator::add(std::string_view partition_key, std::string_view explicit_hash_key,
                        std::string_view data) {
  const Found pk = find(pk_index_, partition_key);
  const Found ehk = explicit_hash_key.empty() ? Found{} : find(ehk_index_, explicit_hash_key);
  append(partition_key, pk, explicit_hash_key, ehk, data);
}

bool KplAggregator::add_within(std::string_view partition_key, std::string_view explicit_hash_key,
                               std::string_view data, std::size_t limit) {
  const Found pk = find(pk_index_, partition_key);
  const Found ehk = explicit_hash_key.empty() ? Found{} : find(ehk_index_, explicit_hash_key);
  if (size() + record_cost(partition_key, pk, explicit_hash_key, ehk, data.size()) > limit) {
    return false;
  }
  append(partition_key, pk, explicit_hash_key, ehk, data);
  return true;
}

std::uint64_t KplAggregator::index_of(KeyIndex& table, std::uint32_t field, std::string_view key,
                                      const Found& found) {
  if (found.index != KeyIndex::kAbsent) return found.index;
  pb::append_key(keys_, field, pb::WireType::kLengthDelimited);
  pb::append_varint(keys_, key.size());
  const std::size_t offset = keys_.size();
  keys_.append(key);
  table.add(found.hash, offset, key.size());
  return table.size() - 1;
}

void KplAggregator::append(std::string_view partition_key, const Found& pk,
                           std::string_view explicit_hash_key, const Found& ehk,
                           std::string_view data) {
  const std::uint64_t pk_index =
      index_of(pk_index_, agg_field::kPartitionKeyTable, partition_key, pk);
  std::uint64_t ehk_index = 0;
  std::size_t body = 1 + pb::varint_size(pk_index) + bytes_field_size(data.size());
  if (!explicit_hash_key.empty()) {
    ehk_index = index_of(ehk_index_, agg_field::kExplicitHashKeyTable, explicit_hash_key, ehk);
    body += 1 + pb::varint_size(ehk_index);
  }
  // The Record message written in place: its key and length, then its fields.
  pb::append_key(records_bytes_, agg_field::kRecords, pb::WireType::kLengthDelimited);
  pb::append_varint(records_bytes_, body);
  pb::append_varint_field(records_bytes_, rec_field::kPartitionKeyIndex, pk_index);
  if (!explicit_hash_key.empty()) {
    pb::append_varint_field(records_bytes_, rec_field::kExplicitHashKeyIndex, ehk_index);
  }
  pb::append_bytes_field(records_bytes_, rec_field::kData, data);
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
