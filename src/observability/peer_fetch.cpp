#include "observability/peer_fetch.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "aws/http_transport.h"
#include "base/thread_name.h"

namespace kcl::observability {

namespace {

using SteadyClock = std::chrono::steady_clock;

std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// A transport for one gather: `timeout` to connect, 2 x `timeout` for a whole answer (each
// request may ask for less), bodies up to `max_bytes`. Made per gather and dropped after it,
// so no connection to a peer stays open.
std::shared_ptr<aws::HttpTransport> make_transport(std::chrono::milliseconds timeout,
                                                   std::size_t max_bytes) {
  HttpConfig config;
  config.connect_timeout = timeout;
  config.request_timeout = 2 * timeout;
  config.max_response_bytes = max_bytes;
  return aws::make_curl_transport(config);
}

// GET `url` + `path` through `transport`, its whole answer by `deadline`.
Result<std::string> get(aws::HttpTransport& transport, const std::string& url,
                        const std::string& path, SteadyClock::time_point deadline,
                        std::size_t max_bytes) {
  if (url.rfind("http://", 0) != 0 || url.size() <= 7) {
    return Status(StatusCode::kInvalidArgument,
                  "status endpoint '" + url + "' is not an http://HOST:PORT address");
  }
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  if (left.count() <= 0) {
    return Status(StatusCode::kUnavailable, url + ": not asked, its deadline had passed")
        .as_timeout();
  }
  aws::HttpRequest request;
  request.method = "GET";
  request.url = url + path;
  request.headers = {{"Connection", "close"}};
  request.timeout = left;
  request.max_response_bytes = max_bytes;
  // A worker's endpoint is reached directly: a proxy the environment names is for the AWS
  // services.
  request.no_proxy = true;
  auto res = transport.send(request);
  if (!res.ok()) {
    const Status& s = res.status();
    if (!s.timed_out()) return s;  // the message names the url
    // A peer that sends a byte now and then, or nothing, is cut off here.
    return Status(StatusCode::kUnavailable,
                  url + ": no complete answer within " + ms_text(left) + " (" + s.message() + ")")
        .as_timeout();
  }
  if (res->status != 200) {
    return Status(StatusCode::kUnavailable,
                  url + path + " answered HTTP " + std::to_string(res->status));
  }
  return std::move(res->body);
}

PeerReport fetch_one(aws::HttpTransport& transport, const PeerAddress& peer,
                     SteadyClock::time_point deadline, std::size_t max_bytes) {
  PeerReport out;
  out.worker_id = peer.worker_id;
  out.url = peer.url;
  if (peer.url.empty()) {
    out.error = "published no status endpoint (its http endpoint is off, or it is older)";
    return out;
  }
  auto body = get(transport, peer.url, kLocalReportPath, deadline, max_bytes);
  if (!body.ok()) {
    out.error = "worker '" + peer.worker_id + "': " + body.status().message();
    return out;
  }
  auto report = parse_local_report(*body);
  if (!report.ok()) {
    out.error = peer.url + ": " + report.status().message();
    return out;
  }
  // Whose report it is: workers listening on 0.0.0.0 without an advertise address all
  // published http://127.0.0.1:PORT (before they published the host name), where each finds
  // itself; its figures shown under the peer's name would be wrong for every shard the peer
  // reads.
  if (report->worker.worker_id != peer.worker_id) {
    out.error = peer.url + " answered with the report of worker '" + report->worker.worker_id +
                "', not of '" + peer.worker_id +
                "' (the address it published reaches another worker: set "
                "http_advertise_address, --http-advertise, when workers run on several hosts)";
    return out;
  }
  out.report = std::move(report).value();
  return out;
}

}  // namespace

Result<std::string> http_get(const std::string& url, const std::string& path,
                             std::chrono::milliseconds timeout, std::size_t max_bytes) {
  auto transport = make_transport(timeout, max_bytes);
  return get(*transport, url, path, SteadyClock::now() + 2 * timeout, max_bytes);
}

std::vector<PeerReport> fetch_peer_reports(const std::vector<PeerAddress>& peers,
                                           std::chrono::milliseconds timeout, int parallel,
                                           std::size_t max_bytes) {
  std::vector<PeerReport> out(peers.size());
  if (peers.empty()) return out;
  const auto deadline = SteadyClock::now() + 2 * timeout;
  const std::size_t n =
      std::min<std::size_t>(peers.size(), static_cast<std::size_t>(std::max(1, parallel)));
  auto transport = make_transport(timeout, max_bytes);
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < peers.size(); i = next++) {
      if (SteadyClock::now() >= deadline) {
        out[i].worker_id = peers[i].worker_id;
        out[i].url = peers[i].url;
        out[i].error = "worker '" + peers[i].worker_id + "': not asked: the fleet view's " +
                       ms_text(2 * timeout) + " for the peers' reports ran out before its turn (" +
                       std::to_string(peers.size()) + " peers, " + std::to_string(n) +
                       " at a time)";
        continue;
      }
      out[i] = fetch_one(*transport, peers[i], deadline, max_bytes);
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (std::size_t i = 0; i < n; ++i) threads.push_back(base::named_thread("kcl-peer-fetch", work));
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace kcl::observability
