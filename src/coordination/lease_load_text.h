// Lease load figures as one short string, for a worker's coordination entry (leaseLoad).
//
// A heartbeat is an UpdateItem, and DynamoDB bills it one write unit per KB of the entry
// (the larger of before and after), whatever the heartbeat changes. A map of lease key ->
// KB/s took about 25 bytes a lease, so a worker with 50 leases wrote 2 units a heartbeat.
// Sorted lease keys share long prefixes ("shardId-00000000012" ...), so each key is written as
// how much it shares with the one before and what follows, and each figure with at most one
// decimal: about 7 bytes a lease and its figure. Format, one record per lease in key order:
//
//   <shared>,<suffix length>:<suffix><KB/s>;
//
// where <shared> and <suffix length> are decimal byte counts (the suffix may hold any byte,
// ';' and ':' included) and <KB/s> a non-negative decimal number.
//
// Thread safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "kcl/status.h"

namespace kcl::coordination {

std::string encode_lease_load(const std::map<std::string, double>& kbps);

// kInvalidArgument naming the byte offset and what was expected there.
Result<std::map<std::string, double>> decode_lease_load(std::string_view text);

}  // namespace kcl::coordination
