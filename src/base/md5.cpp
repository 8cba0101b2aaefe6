// The low-level MD5 functions are deprecated in OpenSSL 3 in favour of EVP (which costs more
// per call than a short key's hash, see md5.h); they remain part of its API.
#define OPENSSL_SUPPRESS_DEPRECATED
#include "base/md5.h"

#include <openssl/md5.h>

namespace kcl::base {

Md5Digest md5_direct(std::string_view data) noexcept {
  Md5Digest out{};
  MD5(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data());
  return out;
}

}  // namespace kcl::base
