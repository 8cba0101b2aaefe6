// The libcurl HttpTransport.
//
// - A pool of easy handles: a handle keeps its connections open between requests
//   (HTTP/1.1 keep-alive), so taking a handle from the pool usually reuses a connection.
//   DNS results and TLS sessions are shared between the handles (a share handle with locks).
// - libcurl's global state is initialised once, internally, with std::call_once the first
//   time a transport is made (there is no global init API for users). It is never cleaned
//   up: curl_global_cleanup is not safe while other code in the process may use libcurl.
// - Proxies: libcurl's environment handling stays, so https_proxy / HTTPS_PROXY,
//   http_proxy, ALL_PROXY and NO_PROXY apply as libcurl documents them, except to a request
//   marked no_proxy (the credential endpoints), which goes straight to its host.
// - HTTP/2 is offered through ALPN on https:// (CURL_HTTP_VERSION_2TLS); plain http:// stays
//   on HTTP/1.1.
// - Error messages name the method and the URL without its query or user info, the curl
//   error, and never any request header (the Authorization header carries a signature).
#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "aws/http_transport.h"
#include "aws/text.h"
#include "base/capacity_recycler.h"

namespace kcl::aws {

namespace {

void global_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// The URL for messages: scheme://host[:port]/path, without user info, query or fragment.
std::string url_for_message(std::string_view url) {
  std::size_t cut = url.find_first_of("?#");
  if (cut != std::string_view::npos) url = url.substr(0, cut);
  std::size_t scheme_end = url.find("://");
  std::size_t auth_start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  std::size_t path_start = url.find('/', auth_start);
  std::string_view authority =
      url.substr(auth_start, path_start == std::string_view::npos ? std::string_view::npos
                                                                  : path_start - auth_start);
  std::size_t at = authority.rfind('@');
  std::string out(url.substr(0, auth_start));
  out += at == std::string_view::npos ? authority : authority.substr(at + 1);
  if (path_start != std::string_view::npos) out += url.substr(path_start);
  // Keep messages one line and short even for hostile input.
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  if (out.size() > 200) out = out.substr(0, 200) + "...";
  return out;
}

struct Transfer {
  HttpResponse* response = nullptr;
  std::size_t cap = 0;
  bool over_cap = false;
};

std::size_t write_cb(char* data, std::size_t size, std::size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::size_t n = size * nmemb;
  if (t->response->body.size() + n > t->cap) {
    t->over_cap = true;
    return 0;  // aborts the transfer with CURLE_WRITE_ERROR
  }
  t->response->body.append(data, n);
  return n;
}

std::size_t header_cb(char* data, std::size_t size, std::size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::size_t n = size * nmemb;
  std::string_view line(data, n);
  if (line.size() >= 5 && line.substr(0, 5) == "HTTP/") {
    // A new status line (after 100 Continue, or a redirect): start over.
    t->response->headers.clear();
    return n;
  }
  std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  std::string name(trim(line.substr(0, colon)));
  for (char& c : name) c = lower_ascii(c);
  std::string value(trim(line.substr(colon + 1)));
  if (name == "content-length") {
    // Reserve what is announced (never more than the cap) to avoid regrowing large bodies,
    // plus the slack a padded parser needs.
    try {
      std::size_t announced = std::stoull(value);
      if (announced <= t->cap) {
        std::string& body = t->response->body;
        const std::size_t need = announced + HttpResponse::kBodySlack;
        // A large body goes into one a finished answer gave back, when there is one: memory
        // already mapped, not fresh pages (see base/capacity_recycler.h).
        if (body.empty()) {
          body = response_body_recycler().take(need);
        } else {
          body.reserve(need);
        }
      }
    } catch (const std::exception&) {
    }
  }
  t->response->headers.emplace_back(std::move(name), std::move(value));
  return n;
}

bool is_tls_error(CURLcode rc) {
  switch (rc) {
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_USE_SSL_FAILED:
      return true;
    default:
      return false;
  }
}

StatusCode code_for(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_AGAIN:
      return StatusCode::kUnavailable;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return StatusCode::kInvalidArgument;
    case CURLE_WEIRD_SERVER_REPLY:
      return StatusCode::kInternal;
    default:
      if (is_tls_error(rc)) return StatusCode::kPermissionDenied;
      return StatusCode::kInternal;
  }
}

// Locks for the data shared between easy handles of one transport.
struct ShareLocks {
  std::array<std::mutex, CURL_LOCK_DATA_LAST> mu;
};

void share_lock(CURL*, curl_lock_data data, curl_lock_access, void* user) {
  static_cast<ShareLocks*>(user)->mu[static_cast<std::size_t>(data)].lock();
}

void share_unlock(CURL*, curl_lock_data data, void* user) {
  static_cast<ShareLocks*>(user)->mu[static_cast<std::size_t>(data)].unlock();
}

class CurlTransport final : public HttpTransport {
 public:
  explicit CurlTransport(const HttpConfig& config) : config_(config) {
    global_init_once();
    share_ = curl_share_init();
    if (share_ != nullptr) {
      curl_share_setopt(share_, CURLSHOPT_LOCKFUNC, share_lock);
      curl_share_setopt(share_, CURLSHOPT_UNLOCKFUNC, share_unlock);
      curl_share_setopt(share_, CURLSHOPT_USERDATA, &locks_);
      curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
      curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    }
  }

  ~CurlTransport() override {
    for (CURL* h : idle_) curl_easy_cleanup(h);
    if (share_ != nullptr) curl_share_cleanup(share_);
  }

  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  Result<HttpResponse> send(const HttpRequest& request) override {
    CURL* h = acquire();
    if (h == nullptr) {
      return Status(StatusCode::kInternal, "cannot create a libcurl handle");
    }
    Result<HttpResponse> result = perform(h, request);
    release(h);
    return result;
  }

 private:
  static constexpr std::size_t kMaxIdleHandles = 64;

  CURL* acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        CURL* h = idle_.back();
        idle_.pop_back();
        return h;
      }
    }
    return curl_easy_init();
  }

  void release(CURL* h) {
    // Reset clears options (not the connection cache), so no request state lingers in an
    // idle handle.
    curl_easy_reset(h);
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < kMaxIdleHandles) {
      idle_.push_back(h);
      return;
    }
    curl_easy_cleanup(h);
  }

  Result<HttpResponse> perform(CURL* h, const HttpRequest& request) {
    HttpResponse response;
    Transfer transfer;
    transfer.response = &response;
    transfer.cap = cap_of(request);
    char errbuf[CURL_ERROR_SIZE];
    errbuf[0] = '\0';
    const std::chrono::milliseconds timeout =
        request.timeout.count() > 0 ? request.timeout : config_.request_timeout;

    set_transfer_options(h, request.url, timeout, errbuf, transfer);
    // "*" matches every host; null (a pooled handle's earlier setting undone) leaves it to
    // NO_PROXY from the environment.
    curl_easy_setopt(h, CURLOPT_NOPROXY, request.no_proxy ? "*" : nullptr);
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(transfer.cap));
    set_method(h, request);
    curl_slist* headers = set_headers(h, request.headers);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    // The error buffer is owned by this frame; do not leave it in the pooled handle.
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);

    if (rc == CURLE_OK) {
      response.status = static_cast<int>(status);
      return response;
    }
    return error_status(rc, errbuf, request, timeout, transfer.over_cap);
  }

  // Everything but the method and the headers: limits, TLS, the shared caches, callbacks.
  void set_transfer_options(CURL* h, const std::string& url, std::chrono::milliseconds timeout,
                            char* errbuf, Transfer& transfer) const {
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(config_.connect_timeout.count()));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, static_cast<long>(config_.receive_buffer_bytes));
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, config_.verify_tls ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, config_.verify_tls ? 2L : 0L);
    if (!config_.ca_bundle.empty()) {
      curl_easy_setopt(h, CURLOPT_CAINFO, config_.ca_bundle.c_str());
    }
    if (share_ != nullptr) curl_easy_setopt(h, CURLOPT_SHARE, share_);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &transfer);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &transfer);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  }

  static void set_method(CURL* h, const HttpRequest& request) {
    if (request.method == "GET") {
      curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
      return;
    }
    if (request.method == "HEAD") {
      curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
      return;
    }
    if (request.method != "POST") {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
    if (request.method == "POST" || !request.body.empty()) {
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
    }
  }

  // Sets the request's headers (and a User-Agent when it has none); returns the list for the
  // caller to free after the transfer.
  static curl_slist* set_headers(CURL* h, const Headers& fields) {
    curl_slist* headers = nullptr;
    bool has_user_agent = false;
    bool has_content_type = false;
    std::string line;
    for (const auto& [name, value] : fields) {
      if (iequals(name, "user-agent")) has_user_agent = true;
      if (iequals(name, "content-type")) has_content_type = true;
      line.assign(name);
      // "Name;" is libcurl's way of sending a header with an empty value.
      if (value.empty()) {
        line += ';';
      } else {
        line += ": ";
        line += value;
      }
      headers = curl_slist_append(headers, line.c_str());
    }
    // No "Expect: 100-continue" round trip for larger bodies; no form content type.
    headers = curl_slist_append(headers, "Expect:");
    if (!has_content_type) headers = curl_slist_append(headers, "Content-Type:");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    if (!has_user_agent) curl_easy_setopt(h, CURLOPT_USERAGENT, "kcl-cpp");
    return headers;
  }

  // The request's own cap when it has one no larger than the transport's; else the
  // transport's.
  std::size_t cap_of(const HttpRequest& request) const {
    return request.max_response_bytes > 0
               ? std::min(request.max_response_bytes, config_.max_response_bytes)
               : config_.max_response_bytes;
  }

  Status error_status(CURLcode rc, const char* errbuf, const HttpRequest& request,
                      std::chrono::milliseconds timeout, bool over_cap) const {
    const std::string where = request.method + " " + url_for_message(request.url);
    if (over_cap || rc == CURLE_FILESIZE_EXCEEDED) {
      const bool own = request.max_response_bytes > 0 &&
                       request.max_response_bytes <= config_.max_response_bytes;
      return Status(StatusCode::kInternal,
                    where + ": response larger than the cap of " + std::to_string(cap_of(request)) +
                        " bytes (" + (own ? "the request's own" : "HttpConfig.max_response_bytes") +
                        "); transfer aborted");
    }
    std::string detail = curl_easy_strerror(rc);
    if (errbuf[0] != '\0') {
      std::string extra = errbuf;
      while (!extra.empty() && (extra.back() == '\n' || extra.back() == '\r')) extra.pop_back();
      if (extra != detail) detail += " (" + extra + ")";
    }
    StatusCode code = code_for(rc);
    // The connection closed or reset under the handshake (a load balancer, a NAT gateway or a
    // proxy dropping it) is a network failure, retried as any other; a handshake the peer
    // answered wrongly (not TLS, a bad certificate) stays a TLS problem.
    const bool dropped_in_handshake =
        rc == CURLE_SSL_CONNECT_ERROR && (detail.find("SSL_ERROR_SYSCALL") != std::string::npos ||
                                          detail.find("Connection reset") != std::string::npos ||
                                          detail.find("unexpected eof") != std::string::npos ||
                                          detail.find("Broken pipe") != std::string::npos);
    if (dropped_in_handshake) code = StatusCode::kUnavailable;
    std::string what;
    switch (rc) {
      case CURLE_OPERATION_TIMEDOUT:
        what = "timed out (connect timeout " + std::to_string(config_.connect_timeout.count()) +
               " ms, request timeout " + std::to_string(timeout.count()) + " ms)";
        break;
      case CURLE_COULDNT_CONNECT:
        what = "connection failed";
        break;
      case CURLE_COULDNT_RESOLVE_HOST:
        what = "cannot resolve host";
        break;
      case CURLE_URL_MALFORMAT:
        what = "malformed URL";
        break;
      case CURLE_UNSUPPORTED_PROTOCOL:
        what = "unsupported URL scheme (only http and https are allowed)";
        break;
      case CURLE_WEIRD_SERVER_REPLY:
        what = "the server did not answer in HTTP";
        break;
      default:
        if (dropped_in_handshake) {
          what = "the connection was closed during the TLS handshake";
        } else if (is_tls_error(rc)) {
          what = rc == CURLE_PEER_FAILED_VERIFICATION ? "TLS certificate verification failed"
                                                      : "TLS handshake or certificate problem";
          if (!config_.ca_bundle.empty()) what += " (CA bundle " + config_.ca_bundle + ")";
        } else {
          what = "request failed";
        }
        break;
    }
    Status failed(code, where + ": " + what + ": " + detail);
    return rc == CURLE_OPERATION_TIMEDOUT ? failed.as_timeout() : failed;
  }

  HttpConfig config_;
  ShareLocks locks_;
  CURLSH* share_ = nullptr;
  std::mutex mu_;
  std::vector<CURL*> idle_;
};

}  // namespace

base::CapacityRecycler<std::string>& response_body_recycler() {
  // Never destroyed: records (and the bodies they hold) may outlive static destructors.
  static auto* recycler = new base::CapacityRecycler<std::string>(8, 32 * 1024 * 1024);
  return *recycler;
}

std::string HttpResponse::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) return v;
  }
  return {};
}

std::shared_ptr<HttpTransport> make_curl_transport(const HttpConfig& config) {
  return std::make_shared<CurlTransport>(config);
}

}  // namespace kcl::aws
