// kcl/record.h: a record as delivered to a record processor (after KPL deaggregation).
//
// Thread safety: a plain value.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kcl {

// The index of a user record inside a KPL aggregated record (0 for a plain record). One type
// everywhere: records, checkpoints, leases.
using SubSequenceNumber = std::uint64_t;

struct Record {
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

}  // namespace kcl
