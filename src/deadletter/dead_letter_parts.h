// deadletter/dead_letter_parts.h: a dead letter too large for one Kinesis record (its base64
// makes a record of about 780 KB or more exceed 1 MiB) written as several records.
//
// Thread safety: a pure function.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kcl/dead_letter.h"

namespace kcl::deadletter {

// dead_letter_json(letter) when it fits in `max_bytes`; otherwise the same object in several
// parts, each at most `max_bytes`, with "part" (1, 2, ...) and "parts" (their number) and a
// slice of "data": the slices in part order, joined, are the base64 of the record's bytes
// (each slice a whole number of base64 quads, so each decodes alone). A long "error" is cut
// to 4 KiB in the parts, saying so; a letter too large only for its error is one part
// (with an empty "data"). `max_bytes` must leave room for the envelope (64 KiB at least).
std::vector<std::string> dead_letter_json_parts(const DeadLetter& letter, std::size_t max_bytes);

}  // namespace kcl::deadletter
