// observability/peer_fetch.h: fetching the other workers' own reports
// (/status.json?scope=local) for the fleet view, all at once, each within a short timeout.
// A peer that cannot be reached, answers with an error or with something unreadable, or with
// the report of another worker (an address such as http://127.0.0.1:PORT that reaches the
// fetching worker itself) gets a PeerReport with the reason instead of a report; the view is
// never failed by one peer.
//
// Thread safety: fetch_peer_reports may be called from any thread; it starts its own.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "observability/fleet_figures.h"

namespace kcl::observability {

// The path a peer's own report is served at.
inline constexpr const char* kLocalReportPath = "/status.json?scope=local";

// GET `url` + `path` (url "http://HOST:PORT"): the body of a 200 answer; else kUnavailable
// (or kInvalidArgument for a bad url) naming the url and what happened.
Result<std::string> http_get(const std::string& url, const std::string& path,
                             std::chrono::milliseconds timeout);

// One report per peer, in the order given. At most `parallel` requests at once; each gets
// `timeout` to connect and as much again to answer.
std::vector<PeerReport> fetch_peer_reports(const std::vector<PeerAddress>& peers,
                                           std::chrono::milliseconds timeout, int parallel = 16);

}  // namespace kcl::observability
