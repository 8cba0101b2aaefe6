// base/digest.h: SHA-256, HMAC-SHA-256 and MD5 through OpenSSL, each algorithm looked up once.
//
// OpenSSL 3 finds an algorithm by name in its provider store (a locked hash-table search)
// on every EVP_Digest(EVP_sha256()) or HMAC() call, and allocates a context for it. Signing
// one AWS request takes three SHA-256s and an HMAC, and a KPL aggregate one MD5. Here each
// algorithm is fetched once for the process, and each thread keeps one context per algorithm
// that it re-initialises for every call. Measured on one machine: 0.59 -> 0.38 µs a SHA-256
// of 500 B in a loop, 1.37 -> 0.87 µs an HMAC; more on an idle worker, whose calls find the
// store's memory cold.
//
// Each function returns false when OpenSSL cannot compute the digest (e.g. MD5 in a
// FIPS-only configuration); `out` is then unspecified.
//
// Thread safety: all functions may be called from any thread (the contexts are per thread).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kcl::base {

inline constexpr std::size_t kSha256Size = 32;
inline constexpr std::size_t kMd5Size = 16;
using Sha256Digest = std::array<unsigned char, kSha256Size>;
using Md5Digest = std::array<unsigned char, kMd5Size>;

bool sha256(std::string_view data, Sha256Digest& out) noexcept;
bool hmac_sha256(std::string_view key, std::string_view data, Sha256Digest& out) noexcept;
bool md5(std::string_view data, Md5Digest& out) noexcept;
// Overwrites a secret's characters with zeros in a way the compiler does not drop as a dead
// store (OPENSSL_cleanse), before the string goes away.
void wipe(std::string& secret) noexcept;

// An HMAC-SHA-256 key for many messages (a SigV4 signing key): the first mac() on a thread
// sets that thread's HMAC context up with the key (hashing its inner and outer pads); later
// ones on the same thread, as long as no other key was used there in between, restart from
// those pads instead (two SHA-256 blocks and the key's set-up fewer a message). The result
// is the same as hmac_sha256(key, data).
//
// Thread safety: mac() may be called from many threads at once.
class HmacSha256Key {
 public:
  explicit HmacSha256Key(std::string_view key);
  ~HmacSha256Key();  // wipes its copy of the key
  HmacSha256Key(const HmacSha256Key&) = delete;
  HmacSha256Key& operator=(const HmacSha256Key&) = delete;

  bool mac(std::string_view data, Sha256Digest& out) const noexcept;

 private:
  std::string key_;
  std::uint64_t id_;  // unique in the process: which key a thread's context holds
};

}  // namespace kcl::base
