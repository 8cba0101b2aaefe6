#include "aws/sigv4.h"

#include <algorithm>
#include <array>
#include <ctime>
#include <utility>
#include <vector>

#include "aws/text.h"
#include "base/digest.h"

namespace kcl::aws {
namespace {

constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";

std::string hex(const unsigned char* data, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

bool is_unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

// AWS URI encoding: every byte except the unreserved set (and '/' when keep_slash) as %XX.
void uri_encode_append(std::string_view in, bool keep_slash, std::string& out) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  for (char ch : in) {
    auto c = static_cast<unsigned char>(ch);
    if (is_unreserved(c) || (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kDigits[c >> 4];
      out += kDigits[c & 0xf];
    }
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes (an invalid escape is kept as it is). '+' stays '+'.
std::string percent_decode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size()) {
      int hi = hex_value(in[i + 1]);
      int lo = hex_value(in[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += in[i];
  }
  return out;
}

// RFC 3986 remove_dot_segments plus collapsing of empty segments.
std::string normalize_path(std::string_view path) {
  std::vector<std::string_view> segments;
  bool trailing_slash = !path.empty() && path.back() == '/';
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view seg = path.substr(start, end - start);
    if (seg == "..") {
      if (!segments.empty()) segments.pop_back();
      if (end == path.size()) trailing_slash = true;
    } else if (seg == ".") {
      if (end == path.size()) trailing_slash = true;
    } else if (!seg.empty()) {
      segments.push_back(seg);
    }
    start = end + 1;
  }
  std::string out = "/";
  for (std::size_t i = 0; i < segments.size(); ++i) {
    if (i > 0) out += '/';
    out += segments[i];
  }
  if (!segments.empty() && trailing_slash) out += '/';
  return out;
}

std::string canonical_uri(const SigningInput& in) {
  std::string path = in.path.empty() ? std::string("/") : in.path;
  if (in.normalize_path) path = normalize_path(path);
  std::string out;
  out.reserve(path.size() + 8);
  uri_encode_append(path, /*keep_slash=*/true, out);
  return out;
}

std::string canonical_query(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> params;
  std::size_t start = 0;
  while (start <= query.size()) {
    std::size_t end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    std::string_view part = query.substr(start, end - start);
    if (!part.empty()) {
      std::size_t eq = part.find('=');
      std::string_view k = part.substr(0, eq);
      std::string_view v = eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1);
      std::string ek;
      std::string ev;
      uri_encode_append(percent_decode(k), false, ek);
      uri_encode_append(percent_decode(v), false, ev);
      params.emplace_back(std::move(ek), std::move(ev));
    }
    start = end + 1;
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (i > 0) out += '&';
    out += params[i].first;
    out += '=';
    out += params[i].second;
  }
  return out;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Trims and collapses inner runs of whitespace (including folded lines) to one space.
std::string canonical_header_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  bool pending_space = false;
  for (char c : v) {
    if (is_space(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

// Headers never signed: hop-by-hop or added/changed by proxies and transports.
bool is_unsigned_header(std::string_view lower_name) {
  return lower_name == "authorization" || lower_name == "connection" || lower_name == "expect" ||
         lower_name == "transfer-encoding" || lower_name == "user-agent" ||
         lower_name == "x-amzn-trace-id";
}

struct Prepared {
  std::string amz_date;
  std::string date;  // yyyymmdd
  std::string scope;
  std::string payload_hash;
  std::string canonical_request;
  std::string signed_headers;
  Headers added;  // headers sign() adds, except Authorization
};

Prepared prepare(const SigningInput& in) {
  Prepared p;
  p.amz_date = format_amz_date(in.time);
  p.date = p.amz_date.substr(0, 8);
  p.scope = p.date + "/" + in.region + "/" + in.service + "/aws4_request";
  p.payload_hash = in.payload_hash.empty() ? sha256_hex(in.payload) : in.payload_hash;

  p.added.emplace_back("X-Amz-Date", p.amz_date);
  const bool has_token = !in.credentials.session_token.empty();
  if (in.add_content_sha256) p.added.emplace_back("x-amz-content-sha256", p.payload_hash);

  // (lower-case name, canonical value) in the order given; sorted by name below, a stable
  // sort keeping the values of a repeated name in their order. A flat vector: a request has a
  // handful of headers, and a map of vectors cost an allocation or two per header.
  std::vector<std::pair<std::string, std::string>> headers;
  headers.reserve(in.headers.size() + 3);
  for (const auto& [name, value] : in.headers) {
    std::string lname = to_lower(name);
    if (is_unsigned_header(lname) || lname == "x-amz-date" ||
        (lname == "x-amz-security-token" && has_token) ||
        (lname == "x-amz-content-sha256" && in.add_content_sha256)) {
      continue;
    }
    headers.emplace_back(std::move(lname), canonical_header_value(value));
  }
  headers.emplace_back("x-amz-date", p.amz_date);
  if (in.add_content_sha256) headers.emplace_back("x-amz-content-sha256", p.payload_hash);
  if (has_token && in.sign_session_token) {
    headers.emplace_back("x-amz-security-token",
                         canonical_header_value(in.credentials.session_token));
  }
  std::stable_sort(headers.begin(), headers.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });

  std::string canonical_headers;
  std::size_t text_size = 0;
  for (const auto& [name, value] : headers) text_size += name.size() + value.size() + 2;
  canonical_headers.reserve(text_size);
  p.signed_headers.reserve(text_size);
  for (std::size_t i = 0; i < headers.size(); ++i) {
    const auto& [name, value] = headers[i];
    if (i > 0 && headers[i - 1].first == name) {
      // A repeated name: its values joined with ',' on the name's one line.
      canonical_headers.back() = ',';
    } else {
      canonical_headers += name;
      canonical_headers += ':';
      if (!p.signed_headers.empty()) p.signed_headers += ';';
      p.signed_headers += name;
    }
    canonical_headers += value;
    canonical_headers += '\n';
  }

  std::string& cr = p.canonical_request;
  cr.reserve(256 + canonical_headers.size());
  cr += in.method;
  cr += '\n';
  cr += canonical_uri(in);
  cr += '\n';
  cr += canonical_query(in.query);
  cr += '\n';
  cr += canonical_headers;
  cr += '\n';
  cr += p.signed_headers;
  cr += '\n';
  cr += p.payload_hash;
  return p;
}

std::string make_string_to_sign(const Prepared& p) {
  std::string sts;
  sts.reserve(160);
  sts += kAlgorithm;
  sts += '\n';
  sts += p.amz_date;
  sts += '\n';
  sts += p.scope;
  sts += '\n';
  sts += sha256_hex(p.canonical_request);
  return sts;
}

// `mac_fn(date, string_to_sign, out)` computes the raw signature under the day's signing key.
template <typename MacFn>
SigningResult sign_with(const SigningInput& in, MacFn&& mac_fn) {
  Prepared p = prepare(in);
  SigningResult r;
  r.string_to_sign = make_string_to_sign(p);
  base::Sha256Digest raw_sig{};
  mac_fn(p.date, r.string_to_sign, raw_sig);
  r.signature = hex(raw_sig.data(), raw_sig.size());
  r.signed_headers = p.signed_headers;
  r.canonical_request = std::move(p.canonical_request);
  r.headers_to_add = std::move(p.added);
  if (!in.credentials.session_token.empty()) {
    r.headers_to_add.emplace_back("X-Amz-Security-Token", in.credentials.session_token);
  }
  std::string auth;
  auth.reserve(200);
  auth += kAlgorithm;
  auth += " Credential=";
  auth += in.credentials.access_key_id;
  auth += '/';
  auth += p.scope;
  auth += ", SignedHeaders=";
  auth += r.signed_headers;
  auth += ", Signature=";
  auth += r.signature;
  r.headers_to_add.emplace_back("Authorization", std::move(auth));
  return r;
}

}  // namespace

std::string sha256_hex(std::string_view data) {
  base::Sha256Digest md{};
  // OpenSSL cannot fail SHA-256 short of running out of memory; a zero digest then only
  // makes the request's signature wrong, which the service reports.
  (void)base::sha256(data, md);
  return hex(md.data(), md.size());
}

std::string hmac_sha256(std::string_view key, std::string_view data) {
  base::Sha256Digest md{};
  (void)base::hmac_sha256(key, data, md);  // as sha256_hex
  return std::string(reinterpret_cast<const char*>(md.data()), md.size());
}

std::string format_amz_date(std::chrono::system_clock::time_point t) {
  // Requests of one second share the text (gmtime_r and strftime on every request were 1.4%
  // of an idle worker's CPU).
  thread_local std::time_t cached_second = -1;
  thread_local std::string cached_text;
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  if (tt != cached_second || cached_text.empty()) {
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char buf[32];
    const std::size_t n = std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
    cached_text.assign(buf, n);
    cached_second = tt;
  }
  return cached_text;
}

std::string derive_signing_key(std::string_view secret, std::string_view date,
                               std::string_view region, std::string_view service) {
  std::string k = "AWS4";
  k += secret;
  std::string k_date = hmac_sha256(k, date);
  // Do not leave the secret in a freed buffer longer than needed.
  base::wipe(k);
  std::string k_region = hmac_sha256(k_date, region);
  std::string k_service = hmac_sha256(k_region, service);
  return hmac_sha256(k_service, "aws4_request");
}

std::string canonical_request(const SigningInput& in) { return prepare(in).canonical_request; }

std::string string_to_sign(const SigningInput& in) { return make_string_to_sign(prepare(in)); }

SigningResult sign(const SigningInput& in) {
  return sign_with(in, [&](std::string_view date, std::string_view sts, base::Sha256Digest& out) {
    const std::string key =
        derive_signing_key(in.credentials.secret_access_key, date, in.region, in.service);
    (void)base::hmac_sha256(key, sts, out);  // as sha256_hex
  });
}

SigningResult SigV4Signer::sign(const SigningInput& in) const {
  return sign_with(in, [&](std::string_view date, std::string_view sts, base::Sha256Digest& out) {
    const Key key = signing_key(in.credentials.secret_access_key, date, in.region, in.service);
    (void)key->mac(sts, out);  // as sha256_hex
  });
}

std::size_t SigV4Signer::keys_derived() const {
  std::lock_guard<std::mutex> lock(mu_);
  return derived_;
}

SigV4Signer::Key SigV4Signer::signing_key(std::string_view secret, std::string_view date,
                                          std::string_view region, std::string_view service) const {
  std::string cache_key;
  cache_key.reserve(date.size() + region.size() + service.size() + 67);
  cache_key += date;
  cache_key += '\n';
  cache_key += region;
  cache_key += '\n';
  cache_key += service;
  cache_key += '\n';
  cache_key += sha256_hex(secret);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = keys_.find(cache_key);
    if (it != keys_.end()) return it->second;
  }
  std::string derived = derive_signing_key(secret, date, region, service);
  auto key = std::make_shared<const base::HmacSha256Key>(derived);
  base::wipe(derived);
  std::lock_guard<std::mutex> lock(mu_);
  ++derived_;
  if (keys_.emplace(cache_key, key).second) {
    order_.push_back(cache_key);
    while (order_.size() > max_keys_ && !order_.empty()) {
      keys_.erase(order_.front());
      order_.pop_front();
    }
  }
  return key;
}

}  // namespace kcl::aws
