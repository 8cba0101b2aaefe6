#include "observability/peer_fetch.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "base/thread_name.h"

namespace kcl::observability {

namespace {

void set_timeout(httplib::Client& c, std::chrono::milliseconds t) {
  const auto sec = static_cast<time_t>(t.count() / 1000);
  const auto usec = static_cast<time_t>((t.count() % 1000) * 1000);
  c.set_connection_timeout(sec, usec);
  c.set_read_timeout(sec, usec);
  c.set_write_timeout(sec, usec);
}

// What went wrong, in words (cpp-httplib's own names are terse: "Connection", "Read").
std::string describe(httplib::Error e, std::chrono::milliseconds timeout) {
  const std::string ms = std::to_string(timeout.count()) + " ms";
  switch (e) {
    case httplib::Error::Connection:
      return "cannot connect (refused, or nothing listens there)";
    case httplib::Error::ConnectionTimeout:
      return "no connection within " + ms;
    case httplib::Error::Read:
      return "no answer within " + ms + " (or the connection closed)";
    case httplib::Error::Write:
      return "the request could not be sent";
    default:
      return "request failed (" + httplib::to_string(e) + ")";
  }
}

PeerReport fetch_one(const PeerAddress& peer, std::chrono::milliseconds timeout) {
  PeerReport out;
  out.worker_id = peer.worker_id;
  out.url = peer.url;
  if (peer.url.empty()) {
    out.error = "published no status endpoint (its http endpoint is off, or it is older)";
    return out;
  }
  auto body = http_get(peer.url, kLocalReportPath, timeout);
  if (!body.ok()) {
    out.error = body.status().message();
    return out;
  }
  auto report = parse_local_report(*body);
  if (!report.ok()) {
    out.error = peer.url + ": " + report.status().message();
    return out;
  }
  // Whose report it is: workers listening on 0.0.0.0 without an advertise address all
  // publish http://127.0.0.1:PORT, where each finds itself; its figures shown under the
  // peer's name would be wrong for every shard the peer reads.
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
                             std::chrono::milliseconds timeout) {
  httplib::Client client(url);
  if (!client.is_valid()) {
    return Status(StatusCode::kInvalidArgument,
                  "status endpoint '" + url + "' is not an http://HOST:PORT address");
  }
  set_timeout(client, timeout);
  client.set_keep_alive(false);
  auto res = client.Get(path);
  if (!res) return Status(StatusCode::kUnavailable, url + ": " + describe(res.error(), timeout));
  if (res->status != 200) {
    return Status(StatusCode::kUnavailable,
                  url + path + " answered HTTP " + std::to_string(res->status));
  }
  return std::move(res->body);
}

std::vector<PeerReport> fetch_peer_reports(const std::vector<PeerAddress>& peers,
                                           std::chrono::milliseconds timeout, int parallel) {
  std::vector<PeerReport> out(peers.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < peers.size(); i = next++)
      out[i] = fetch_one(peers[i], timeout);
  };
  const std::size_t n =
      std::min<std::size_t>(peers.size(), static_cast<std::size_t>(std::max(1, parallel)));
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (std::size_t i = 0; i < n; ++i) threads.push_back(base::named_thread("kcl-peer-fetch", work));
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace kcl::observability
