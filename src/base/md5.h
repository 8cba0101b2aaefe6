// base/md5.h: MD5 (RFC 1321) written out in portable C++, for short inputs such as a
// partition key, whose MD5 picks its shard. Through OpenSSL's EVP interface (base/digest.h)
// the fixed cost of a call (context set-up and provider dispatch) is most of a short key's
// hash; here a key of up to 55 bytes is one compression of one block, and nothing else.
// Long inputs (a KPL aggregate's digest) stay with base::md5 of digest.h, OpenSSL's
// assembly. Routing is not a security use of MD5, so a FIPS-only OpenSSL does not matter.
//
// Thread safety: a pure function.
#pragma once

#include <string_view>

#include "base/digest.h"

namespace kcl::base {

// The MD5 of `data` (any length), computed without OpenSSL.
Md5Digest md5_portable(std::string_view data) noexcept;

}  // namespace kcl::base
