// lease_set_digest: a short fingerprint of a set of (marked) lease keys, so that a worker can say
// in its heartbeat which leases it holds (lease_digest of its coordination entry) in a few bytes
// whatever their number, and the leader can compare it with what the lease table gives that
// worker (lease_leader.h). "<count>:<FNV-1a 64 of the sorted keys, hex>".
//
// Thread safety: a pure function.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace kcl::assignment {

// How a worker stands to a lease it claims, as marked in its digest.
enum class LeaseClaim {
  kHeld,        // it holds the lease
  kHandingOff,  // it holds the lease and knows it is to hand it off (checkpointOwner = it)
  kIncoming,    // the lease is handed to it; the old owner has not finished
};

inline std::string lease_claim_mark(const std::string& key, LeaseClaim claim) {
  switch (claim) {
    case LeaseClaim::kHeld:
      return key;
    case LeaseClaim::kHandingOff:
      return key + ">";
    case LeaseClaim::kIncoming:
      return key + "<";
  }
  return key;
}

inline std::string lease_set_digest(std::vector<std::string> keys) {
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const std::string& k : keys) {
    for (unsigned char c : k) {
      h ^= c;
      h *= 0x100000001b3ULL;
    }
    h ^= '\n';
    h *= 0x100000001b3ULL;
  }
  char text[48];
  std::snprintf(text, sizeof text, "%zu:%016llx", keys.size(), static_cast<unsigned long long>(h));
  return text;
}

}  // namespace kcl::assignment
