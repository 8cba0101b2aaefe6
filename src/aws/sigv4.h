// AWS Signature Version 4 (header signing) for kcl-cpp.
//
// sign() computes the canonical request, the string to sign and the signature of a request,
// and returns the headers to add to it (X-Amz-Date, X-Amz-Security-Token when the
// credentials carry a session token, x-amz-content-sha256 when asked for, Authorization).
// Hashes and HMACs use OpenSSL.
//
// Secrets: the secret key never leaves this module except through the derived signature;
// the signing-key cache is keyed by a SHA-256 of the secret, never the secret itself.
//
// Thread safety: the free functions are pure; SigV4Signer::sign() may be called from many
// threads at once (its key cache is guarded by a mutex).
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "aws/credentials.h"
#include "aws/http_transport.h"
#include "base/digest.h"

namespace kcl::aws {

struct SigningInput {
  std::string method = "POST";
  // The path as sent on the wire ("/" for the JSON protocols). It is URI-encoded again for
  // the canonical request, as every service except S3 expects.
  std::string path = "/";
  // The raw query string, without '?'; may be empty.
  std::string query;
  // Headers to sign (Host must be among them). Names in any case; repeated names are
  // joined with ',' in order, values are trimmed and inner runs of whitespace collapsed.
  Headers headers;
  // The request body (not copied; must outlive the call).
  std::string_view payload;
  // Lower-case hex SHA-256 of the payload when already known (e.g. across retries);
  // empty = computed from `payload`.
  std::string payload_hash;
  std::string region;   // e.g. "us-east-1"
  std::string service;  // signing name, e.g. "kinesis"
  Credentials credentials;
  std::chrono::system_clock::time_point time;  // wall time of signing
  // Remove "." / ".." segments and repeated slashes from the path before encoding.
  bool normalize_path = true;
  // Add (and sign) x-amz-content-sha256 with the payload hash.
  bool add_content_sha256 = false;
  // Sign X-Amz-Security-Token (true for every service kcl-cpp calls). When false the token
  // is still added to the request, after signing.
  bool sign_session_token = true;
};

struct SigningResult {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;       // lower-case hex
  std::string signed_headers;  // "host;x-amz-date;..."
  // To add to the request as they are (X-Amz-Date, [X-Amz-Security-Token],
  // [x-amz-content-sha256], Authorization).
  Headers headers_to_add;
};

// Lower-case hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data);
// HMAC-SHA256 of `data` under `key`, as raw bytes.
std::string hmac_sha256(std::string_view key, std::string_view data);
// "20150830T123600Z".
std::string format_amz_date(std::chrono::system_clock::time_point t);
// The signing key: HMAC chain over "AWS4"+secret, date (yyyymmdd), region, service,
// "aws4_request".
std::string derive_signing_key(std::string_view secret, std::string_view date,
                               std::string_view region, std::string_view service);

// The steps of sign(), exposed for tests. Both include the headers sign() adds.
std::string canonical_request(const SigningInput& in);
std::string string_to_sign(const SigningInput& in);

// Signs without a key cache.
SigningResult sign(const SigningInput& in);

// Signs with a cache of derived signing keys per (date, region, service, secret hash): a key
// is derived once a day for each, and kept prepared for HMAC (base::HmacSha256Key), so that a
// request's signature costs one HMAC of its string to sign and no set-up of the key.
class SigV4Signer {
 public:
  explicit SigV4Signer(std::size_t max_cached_keys = 32) : max_keys_(max_cached_keys) {}
  SigningResult sign(const SigningInput& in) const;
  // Number of signing keys derived so far (for tests of the cache).
  std::size_t keys_derived() const;

 private:
  using Key = std::shared_ptr<const base::HmacSha256Key>;
  Key signing_key(std::string_view secret, std::string_view date, std::string_view region,
                  std::string_view service) const;

  std::size_t max_keys_;
  mutable std::mutex mu_;
  // cache key -> signing key; `order_` lists cache keys oldest first for eviction.
  mutable std::unordered_map<std::string, Key> keys_;
  mutable std::list<std::string> order_;
  mutable std::size_t derived_ = 0;
};

}  // namespace kcl::aws
