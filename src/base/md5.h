// base/md5.h: MD5 (RFC 1321) of short inputs such as a partition key, whose MD5 picks its
// shard, through OpenSSL's low-level MD5 functions. Through OpenSSL's EVP interface
// (base/digest.h) the fixed cost of a call (context set-up and provider dispatch) is most of
// a short key's hash; the low-level functions run the same implementation on a context on
// the stack and nothing else. Long inputs (a KPL aggregate's digest) stay with base::md5 of
// digest.h. Routing is not a security use of MD5, so a FIPS-only OpenSSL does not matter.
//
// Thread safety: a pure function.
#pragma once

#include <string_view>

#include "base/digest.h"

namespace kcl::base {

// The MD5 of `data` (any length).
Md5Digest md5_direct(std::string_view data) noexcept;

}  // namespace kcl::base
