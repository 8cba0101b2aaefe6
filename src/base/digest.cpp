#include "base/digest.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <atomic>

namespace kcl::base {
namespace {

// Fetched once, never freed: digests may be computed by threads still running while static
// destructors run.
const EVP_MD* fetched_md(const char* name, const EVP_MD* (*builtin)()) {
  EVP_MD* md = EVP_MD_fetch(nullptr, name, nullptr);
  return md != nullptr ? md : builtin();
}

const EVP_MD* sha256_md() {
  static const EVP_MD* const md = fetched_md("SHA2-256", EVP_sha256);
  return md;
}

const EVP_MD* md5_md() {
  static const EVP_MD* const md = fetched_md("MD5", EVP_md5);
  return md;
}

EVP_MAC* hmac_mac() {
  static EVP_MAC* const mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  return mac;
}

// One context of each kind per thread, freed when the thread ends.
struct ThreadContexts {
  EVP_MD_CTX* digest = nullptr;
  EVP_MAC_CTX* hmac = nullptr;
  // The HmacSha256Key whose key `hmac` holds; 0: none, or a key given to hmac_sha256().
  std::uint64_t hmac_key_id = 0;
  ThreadContexts() = default;
  ThreadContexts(const ThreadContexts&) = delete;
  ThreadContexts& operator=(const ThreadContexts&) = delete;
  ~ThreadContexts() {
    EVP_MD_CTX_free(digest);
    EVP_MAC_CTX_free(hmac);
  }
};

ThreadContexts& contexts() {
  thread_local ThreadContexts c;
  return c;
}

bool digest(const EVP_MD* md, std::string_view data, unsigned char* out, std::size_t size) {
  if (md == nullptr) return false;
  ThreadContexts& c = contexts();
  if (c.digest == nullptr) c.digest = EVP_MD_CTX_new();
  if (c.digest == nullptr) return false;
  unsigned int len = 0;
  return EVP_DigestInit_ex2(c.digest, md, nullptr) == 1 &&
         EVP_DigestUpdate(c.digest, data.data(), data.size()) == 1 &&
         EVP_DigestFinal_ex(c.digest, out, &len) == 1 && len == size;
}

// The thread's HMAC context, its digest set to SHA-256 once (a later init with only a key
// keeps it).
EVP_MAC_CTX* hmac_sha256_context() {
  ThreadContexts& c = contexts();
  if (c.hmac != nullptr) return c.hmac;
  EVP_MAC* mac = hmac_mac();
  if (mac == nullptr) return nullptr;
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  if (ctx == nullptr) return nullptr;
  char digest_name[] = "SHA2-256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
      OSSL_PARAM_construct_end()};
  if (EVP_MAC_CTX_set_params(ctx, params) != 1) {
    EVP_MAC_CTX_free(ctx);
    return nullptr;
  }
  c.hmac = ctx;
  return ctx;
}

}  // namespace

bool sha256(std::string_view data, Sha256Digest& out) noexcept {
  return digest(sha256_md(), data, out.data(), out.size());
}

bool md5(std::string_view data, Md5Digest& out) noexcept {
  return digest(md5_md(), data, out.data(), out.size());
}

namespace {

// Sets the thread's HMAC context up with `key`.
bool hmac_init_key(EVP_MAC_CTX* ctx, std::string_view key) {
  // A null key would mean "the previous call's key" to OpenSSL; an empty one is a key too.
  static const unsigned char kEmpty = 0;
  const auto* k = key.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(key.data());
  return EVP_MAC_init(ctx, k, key.size(), nullptr) == 1;
}

bool hmac_finish(EVP_MAC_CTX* ctx, std::string_view data, Sha256Digest& out) {
  std::size_t len = 0;
  return EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(data.data()), data.size()) ==
             1 &&
         EVP_MAC_final(ctx, out.data(), &len, out.size()) == 1 && len == out.size();
}

std::uint64_t next_key_id() {
  static std::atomic<std::uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace

bool hmac_sha256(std::string_view key, std::string_view data, Sha256Digest& out) noexcept {
  EVP_MAC_CTX* ctx = hmac_sha256_context();
  if (ctx == nullptr) return false;
  ThreadContexts& c = contexts();
  c.hmac_key_id = 0;
  return hmac_init_key(ctx, key) && hmac_finish(ctx, data, out);
}

HmacSha256Key::HmacSha256Key(std::string_view key) : key_(key), id_(next_key_id()) {}

void wipe(std::string& secret) noexcept { OPENSSL_cleanse(secret.data(), secret.size()); }

HmacSha256Key::~HmacSha256Key() { wipe(key_); }

bool HmacSha256Key::mac(std::string_view data, Sha256Digest& out) const noexcept {
  EVP_MAC_CTX* ctx = hmac_sha256_context();
  if (ctx == nullptr) return false;
  ThreadContexts& c = contexts();
  if (c.hmac_key_id == id_) {
    // The context holds this key: a null key restarts from its prepared pads.
    if (EVP_MAC_init(ctx, nullptr, 0, nullptr) != 1) return false;
  } else {
    c.hmac_key_id = 0;
    if (!hmac_init_key(ctx, key_)) return false;
    c.hmac_key_id = id_;
  }
  return hmac_finish(ctx, data, out);
}

}  // namespace kcl::base
