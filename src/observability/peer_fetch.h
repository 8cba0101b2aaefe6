// observability/peer_fetch.h: fetching the other workers' own reports
// (/status.json?scope=local) for the fleet view, all at once, within a deadline and a size
// cap. A peer that cannot be reached, answers with an error, too slowly (a peer that sends a
// byte now and then is cut off at the deadline, not at a read that waits too long), with
// more than the cap, with something unreadable, or with the report of another worker (an
// address such as http://127.0.0.1:PORT that reaches the fetching worker itself) gets a
// PeerReport with the reason, naming the peer, instead of a report; the view is never failed
// or held by one peer.
//
// The requests go through the library's HTTP transport (libcurl, aws/http_transport.h),
// straight to the peer (no proxy from the environment), one connection per peer closed after
// its answer: a peer's request threads are not held by idle connections.
//
// Thread safety: fetch_peer_reports may be called from any thread; it starts its own.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "observability/fleet_figures.h"

namespace kcl::observability {

// The path a peer's own report is served at.
inline constexpr const char* kLocalReportPath = "/status.json?scope=local";

// The most a peer's own report may be (a worker holding a thousand shards reports about
// 1.5 MB with its records/s history); a larger answer is cut off, not read.
inline constexpr std::size_t kMaxPeerReportBytes = std::size_t{8} << 20;
// The most a whole fleet view (/status.json) may be, for `kcl status --endpoint`.
inline constexpr std::size_t kMaxFleetViewBytes = std::size_t{64} << 20;

// GET `url` + `path` (url "http://HOST:PORT"): the body of a 200 answer. The connection must
// be made within `timeout` and the whole answer come within 2 x `timeout`, at most
// `max_bytes` of body. Errors: kUnavailable naming the url and what happened (no connection,
// no complete answer by the deadline, an HTTP status other than 200), kInternal for an
// answer over `max_bytes`, kInvalidArgument for a url that is not http://HOST:PORT.
Result<std::string> http_get(const std::string& url, const std::string& path,
                             std::chrono::milliseconds timeout,
                             std::size_t max_bytes = kMaxFleetViewBytes);

// One report per peer, in the order given. At most `parallel` requests at once; each gets
// `timeout` to connect and 2 x `timeout` in all for its answer of at most `max_bytes`, and
// the whole gather ends by 2 x `timeout` after it began: a peer whose turn did not come by
// then is reported as not asked.
std::vector<PeerReport> fetch_peer_reports(const std::vector<PeerAddress>& peers,
                                           std::chrono::milliseconds timeout, int parallel = 16,
                                           std::size_t max_bytes = kMaxPeerReportBytes);

}  // namespace kcl::observability
