// The JSON envelope of a dead letter (kcl/dead_letter.h), shared by the file and stream sinks.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "aws/base64.h"
#include "deadletter/dead_letter_parts.h"
#include "kcl/dead_letter.h"

namespace kcl {

namespace {

std::int64_t epoch_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

nlohmann::ordered_json envelope(const DeadLetter& letter, const std::string& error) {
  const Record& r = letter.record;
  return {
      {"stream", letter.stream},
      {"shard_id", letter.shard_id},
      {"sequence_number", std::string(r.sequence_number())},
      {"sub_sequence_number", r.sub_sequence_number()},
      {"partition_key", std::string(r.partition_key())},
      {"approximate_arrival_timestamp", epoch_ms(r.approximate_arrival_timestamp())},
      {"attempts", letter.attempts},
      {"error", error},
      {"dead_lettered_at", epoch_ms(letter.dead_lettered_at)},
  };
}

// Errors quote what processors threw, which may hold any bytes: invalid UTF-8 is replaced.
std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The error as the parts carry it: its first 4 KiB, saying it was cut and how long it was
// (the parts have room for the data, not for an error that quotes a whole payload).
std::string error_for_parts(const std::string& error) {
  constexpr std::size_t kMaxError = 4096;
  if (error.size() <= kMaxError) return error;
  return error.substr(0, kMaxError) + "... (cut: the error held " + std::to_string(error.size()) +
         " bytes)";
}

}  // namespace

std::string dead_letter_json(const DeadLetter& letter) {
  nlohmann::ordered_json j = envelope(letter, letter.error);
  j["data"] = aws::base64_encode(letter.record.data());
  return dump(j);
}

namespace deadletter {

std::vector<std::string> dead_letter_json_parts(const DeadLetter& letter, std::size_t max_bytes) {
  std::string whole = dead_letter_json(letter);
  if (whole.size() <= max_bytes) return {std::move(whole)};
  const std::string data = aws::base64_encode(letter.record.data());
  nlohmann::ordered_json j = envelope(letter, error_for_parts(letter.error));
  j["part"] = 1'000'000;
  j["parts"] = 1'000'000;
  j["data"] = "";
  const std::size_t overhead = dump(j).size();
  const std::size_t slice = (max_bytes > overhead + 4 ? max_bytes - overhead : 4) / 4 * 4;
  // One part at least: a letter over the room only because of its error has no data.
  const std::size_t parts = std::max<std::size_t>(1, (data.size() + slice - 1) / slice);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < parts; ++i) {
    j["part"] = i + 1;
    j["parts"] = parts;
    j["data"] = data.substr(i * slice, slice);
    out.push_back(dump(j));
  }
  return out;
}

}  // namespace deadletter
}  // namespace kcl
