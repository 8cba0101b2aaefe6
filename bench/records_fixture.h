// bench/records_fixture.h: Kinesis records as the service writes them in JSON, for the decoding
// benchmarks (GetRecords answers and SubscribeToShard events are built from the same records,
// so their rates compare).
//
// A record: AWS-style 56-digit sequence number (increasing), epoch-seconds arrival timestamp
// with milliseconds, Data of random bytes (base64), a UUID partition key, EncryptionType NONE.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "aws/base64.h"

namespace kcl::bench {

class RecordsFixture {
 public:
  // Data sizes are drawn uniformly from [min_data, max_data].
  RecordsFixture(std::uint64_t seed, std::size_t min_data, std::size_t max_data)
      : rng_(seed), min_(min_data), max_(max_data) {
    seq_prefix_ = "4965";
    for (int i = 0; i < 30; ++i) seq_prefix_ += static_cast<char>('0' + rng_() % 10);
  }

  // The next `count` records as JSON objects separated by commas (no brackets).
  std::string next(int count) {
    std::string json;
    std::string data;
    for (int k = 0; k < count; ++k, ++index_) {
      if (k) json += ',';
      const std::size_t len = min_ + (max_ > min_ ? rng_() % (max_ - min_ + 1) : 0);
      data.resize(len);
      for (std::size_t j = 0; j < len; j += 8) {
        const std::uint64_t v = rng_();
        std::memcpy(data.data() + j, &v, std::min<std::size_t>(8, len - j));
      }
      char seq_tail[32];
      std::snprintf(seq_tail, sizeof seq_tail, "%022llu",
                    1000000000000ULL + 4096ULL * static_cast<unsigned long long>(index_));
      char ts[64];
      std::snprintf(ts, sizeof ts, "%.3f", 1717243200.123 + static_cast<double>(index_) * 0.0007);
      json += "{\"SequenceNumber\":\"";
      json += seq_prefix_;
      json += seq_tail;
      json += "\",\"ApproximateArrivalTimestamp\":";
      json += ts;
      json += ",\"Data\":\"";
      json += aws::base64_encode(data);
      json += "\",\"PartitionKey\":\"";
      json += hex(8) + "-" + hex(4) + "-" + hex(4) + "-" + hex(4) + "-" + hex(12);
      json += "\",\"EncryptionType\":\"NONE\"}";
    }
    return json;
  }

  // A shard iterator's worth of random letters.
  std::string letters(int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += static_cast<char>('A' + rng_() % 26);
    return s;
  }

 private:
  std::string hex(int n) {
    static const char digits[] = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < n; ++i) s += digits[rng_() & 15];
    return s;
  }

  std::mt19937_64 rng_;
  std::size_t min_, max_;
  std::string seq_prefix_;
  std::uint64_t index_ = 0;
};

}  // namespace kcl::bench
