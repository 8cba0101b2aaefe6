// The JSON envelope of a dead letter (kcl/dead_letter.h), shared by the file and stream sinks.
#include <nlohmann/json.hpp>

#include "aws/base64.h"
#include "kcl/dead_letter.h"

namespace kcl {

namespace {

std::int64_t epoch_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

std::string dead_letter_json(const DeadLetter& letter) {
  const Record& r = letter.record;
  nlohmann::ordered_json j = {
      {"stream", letter.stream},
      {"shard_id", letter.shard_id},
      {"sequence_number", std::string(r.sequence_number())},
      {"sub_sequence_number", r.sub_sequence_number()},
      {"partition_key", std::string(r.partition_key())},
      {"approximate_arrival_timestamp", epoch_ms(r.approximate_arrival_timestamp())},
      {"attempts", letter.attempts},
      {"error", letter.error},
      {"dead_lettered_at", epoch_ms(letter.dead_lettered_at)},
      {"data", aws::base64_encode(r.data())},
  };
  // Errors quote what processors threw, which may hold any bytes: replace invalid UTF-8.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kcl
