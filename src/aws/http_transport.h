// HttpTransport: the seam between kcl-cpp and the network. One real implementation on
// libcurl (CurlTransport); tests may supply their own.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/capacity_recycler.h"
#include "kcl/aws_config.h"
#include "kcl/status.h"

namespace kcl::aws {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method = "POST";
  std::string url;  // absolute: scheme://host[:port]/path[?query]
  Headers headers;
  std::string body;
  // 0 = the transport's configured request timeout.
  std::chrono::milliseconds timeout{0};
  // Straight to the host, whatever proxy the environment names (http_proxy, ALL_PROXY):
  // for the link-local credential endpoints (instance metadata, the container endpoint),
  // which the AWS SDKs never open through a proxy.
  bool no_proxy = false;
  // The largest response body accepted for this request; 0 (or more than the transport's) =
  // the transport's cap (HttpConfig::max_response_bytes).
  std::size_t max_response_bytes = 0;
};

// Large response bodies given back once their contents are no longer needed (by the records
// that point into a GetRecords body), for the transport to receive later answers into. Keeps
// at most 8 bodies and 32 MiB. See base/capacity_recycler.h.
base::CapacityRecycler<std::string>& response_body_recycler();

struct HttpResponse {
  int status = 0;
  Headers headers;  // names lower-cased
  // A transport reserves at least kBodySlack bytes past an announced Content-Length, so a
  // parser that needs padding after the body (simdjson) can use it without copying.
  static constexpr std::size_t kBodySlack = 64;
  std::string body;
  // First value of a header (name compared case-insensitively); empty when absent.
  std::string header(std::string_view name) const;
};

// Errors: kUnavailable for connection failures and timeouts (retryable),
// kPermissionDenied for TLS verification failures, kInvalidArgument for bad URLs,
// kInternal for a response larger than the cap. The message names the URL (host and path
// only) and never contains request headers.
//
// Thread safety: send() may be called from many threads at once.
class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  virtual Result<HttpResponse> send(const HttpRequest& request) = 0;
};

// libcurl transport with connection reuse (a pool of easy handles), HTTP/1.1 keep-alive,
// TLS verification on by default and a response size cap.
std::shared_ptr<HttpTransport> make_curl_transport(const HttpConfig& config);

}  // namespace kcl::aws
