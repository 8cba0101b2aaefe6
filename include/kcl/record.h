// kcl/record.h: a record as delivered to a record processor (after KPL deaggregation).
//
// A Record's strings are views into bytes it keeps alive itself. The records of one
// GetRecords answer (or fan-out event) share that answer's body: the data is base64-decoded
// in place in it, and the sequence numbers, partition keys and sub-records of KPL aggregates
// point into it, so a batch of records costs no allocation per record. Each Record holds a
// reference on the shared bytes, so:
//   - every view a Record returns is valid for as long as that Record (or a copy of it)
//     lives, wherever it is kept: copying a Record is cheap and always safe;
//   - keeping one record of a batch keeps the whole batch's bytes (up to the 10 MiB of a
//     GetRecords answer) alive. To keep a few records for long, keep `record.owned()`: a
//     copy whose bytes are its own (one allocation).
//
// Records made by an application (tests, a processor that fabricates input) come from
// Record::Fields or the setters; those copy into storage of the record's own.
//
// Thread safety: a value. Const members may be called from any number of threads at once;
// copies of one record may be used on different threads (the shared bytes are immutable).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kcl {

// The index of a user record inside a KPL aggregated record (0 for a plain record). One type
// everywhere: records, checkpoints, leases.
using SubSequenceNumber = std::uint64_t;

class Record {
 public:
  // A record's contents as owning strings: to build a Record, or taken from one.
  struct Fields {
    std::string shard_id;
    // Kinesis sequence number (decimal string, up to 128 bits). For a sub-record of a KPL
    // aggregate, the sequence number of the aggregate.
    std::string sequence_number;
    // Position inside a KPL aggregate; 0 for a plain record.
    SubSequenceNumber sub_sequence_number = 0;
    // True when this record came out of a KPL aggregate.
    bool aggregated = false;
    std::string partition_key;
    // Explicit hash key (decimal), when the producer set one; else empty.
    std::string explicit_hash_key;
    std::chrono::system_clock::time_point approximate_arrival_timestamp{};
    std::string data;  // raw bytes
  };

  // The same contents as views, for the zero-copy constructor below.
  struct Views {
    std::string_view shard_id;
    std::string_view sequence_number;
    SubSequenceNumber sub_sequence_number = 0;
    bool aggregated = false;
    std::string_view partition_key;
    std::string_view explicit_hash_key;
    std::chrono::system_clock::time_point approximate_arrival_timestamp{};
    std::string_view data;
  };

  // An empty record (every string empty).
  Record() = default;
  // A record owning a copy of `fields` (one allocation).
  explicit Record(Fields fields);
  // Zero copy: a record whose strings are `views`, which must point into memory that
  // `owner` keeps alive and never changes (or be empty). The record holds `owner`.
  Record(std::shared_ptr<const void> owner, const Views& views) noexcept
      : owner_(std::move(owner)),
        shard_id_(views.shard_id),
        sequence_number_(views.sequence_number),
        partition_key_(views.partition_key),
        explicit_hash_key_(views.explicit_hash_key),
        data_(views.data),
        approximate_arrival_timestamp_(views.approximate_arrival_timestamp),
        sub_sequence_number_(views.sub_sequence_number),
        aggregated_(views.aggregated) {}

  Record(const Record&) = default;
  Record& operator=(const Record&) = default;
  // A moved-from record is empty (its views do not outlive the bytes they point into).
  Record(Record&& other) noexcept;
  Record& operator=(Record&& other) noexcept;
  ~Record() = default;

  std::string_view shard_id() const noexcept { return shard_id_; }
  // Kinesis sequence number (decimal string, up to 128 bits). For a sub-record of a KPL
  // aggregate, the sequence number of the aggregate.
  std::string_view sequence_number() const noexcept { return sequence_number_; }
  // Position inside a KPL aggregate; 0 for a plain record.
  SubSequenceNumber sub_sequence_number() const noexcept { return sub_sequence_number_; }
  // True when this record came out of a KPL aggregate.
  bool aggregated() const noexcept { return aggregated_; }
  std::string_view partition_key() const noexcept { return partition_key_; }
  // Explicit hash key (decimal), when the producer set one; else empty.
  std::string_view explicit_hash_key() const noexcept { return explicit_hash_key_; }
  std::chrono::system_clock::time_point approximate_arrival_timestamp() const noexcept {
    return approximate_arrival_timestamp_;
  }
  // The record's bytes (raw, not base64).
  std::string_view data() const noexcept { return data_; }

  // All the contents as views (valid while this record lives), or as owning strings.
  Views views() const noexcept;
  Fields fields() const;
  // A copy holding only its own bytes (releases the batch's shared bytes, if any).
  Record owned() const { return Record(fields()); }

  // Setters copy: a record shares no bytes with anything it was copied from afterwards
  // (the first set on a record that shares its bytes copies all of them once).
  void set_shard_id(std::string_view v) { set(&Fields::shard_id, v); }
  void set_sequence_number(std::string_view v) { set(&Fields::sequence_number, v); }
  void set_sub_sequence_number(SubSequenceNumber v) noexcept { sub_sequence_number_ = v; }
  void set_aggregated(bool v) noexcept { aggregated_ = v; }
  void set_partition_key(std::string_view v) { set(&Fields::partition_key, v); }
  void set_explicit_hash_key(std::string_view v) { set(&Fields::explicit_hash_key, v); }
  void set_approximate_arrival_timestamp(std::chrono::system_clock::time_point v) noexcept {
    approximate_arrival_timestamp_ = v;
  }
  void set_data(std::string_view v) { set(&Fields::data, v); }

  // Equal contents (not the same storage).
  friend bool operator==(const Record& a, const Record& b) noexcept;

 private:
  void set(std::string Fields::*field, std::string_view value);
  void point_at(const Fields& f) noexcept;

  std::shared_ptr<const void> owner_;
  // Set when owner_ is a Fields this record made (then a setter may write into it once no
  // copy shares it).
  Fields* own_ = nullptr;
  std::string_view shard_id_;
  std::string_view sequence_number_;
  std::string_view partition_key_;
  std::string_view explicit_hash_key_;
  std::string_view data_;
  std::chrono::system_clock::time_point approximate_arrival_timestamp_{};
  SubSequenceNumber sub_sequence_number_ = 0;
  bool aggregated_ = false;
};

}  // namespace kcl
