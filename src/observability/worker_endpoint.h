// observability/worker_endpoint.h: what a Worker with `http_address` set runs besides its
// own work: a MetricsRegistry fed by every metric point (as well as the user's sink, if any)
// and the StatusServer reading it.
//
// Thread safety: start() and stop() from the worker's start/stop path; sink() from any thread.
#pragma once

#include <memory>
#include <string>

#include "leases/lease_store.h"
#include "metrics/tee_sink.h"
#include "observability/status_server.h"

namespace kcl::observability {

using metrics::TeeMetricsSink;

// What the endpoint shows, besides its registry.
struct EndpointSources {
  std::string application;
  std::string stream;
  std::string worker_id;
  std::shared_ptr<leases::LeaseStore> store;  // required
  std::function<HealthState()> health;        // required
  // As StatusSources' (optional).
  std::function<std::map<std::string, std::string>()> shard_states;
  std::function<Result<std::vector<PeerAddress>>()> peers;
  std::string peers_note;
};

// The URL peers are told to fetch this endpoint at: `advertise` ("HOST", "HOST:PORT",
// "[IPv6]:PORT" or "http://..."; a missing or 0 port is the bound one), or the bound URL
// when `advertise` is empty.
std::string advertised_url(const std::string& advertise, int bound_port,
                           const std::string& bound_url);

// Whether `address` (as StatusServerConfig::address) listens on every interface (0.0.0.0,
// ::): its own address is then no address a peer can fetch.
bool is_wildcard_address(const std::string& address);

// This machine's host name (gethostname), or empty when it has none worth publishing
// ("localhost", or none at all).
std::string published_host_name();

// What the worker publishes for an endpoint listening on `address`: advertised_url() of
// `advertise`; without one, on a wildcard address, http://`host_name`:PORT (the other
// workers cannot reach 0.0.0.0 or ::, and 127.0.0.1 leads each of them to itself); the bound
// URL otherwise, or when `host_name` is empty.
std::string published_url(const std::string& address, const std::string& advertise,
                          const std::string& host_name, int bound_port,
                          const std::string& bound_url);

// A warning for the log when `address` listens on every interface, `advertise` is empty and
// the worker publishes `published` on a loopback address (it has no host name to publish):
// each worker of another host then finds itself there, not this one. Empty when there is
// nothing to say.
std::string wildcard_address_warning(const std::string& address, const std::string& advertise,
                                     const std::string& published);

class WorkerEndpoint {
 public:
  // `user_sink` (may be null) keeps receiving every point. `advertise`: as advertised_url's.
  WorkerEndpoint(std::string address, std::shared_ptr<MetricsSink> user_sink,
                 std::string advertise = {});
  ~WorkerEndpoint();

  // The sink the worker should report to.
  std::shared_ptr<MetricsSink> sink() const { return sink_; }
  const std::shared_ptr<metrics::MetricsRegistry>& registry() const { return registry_; }

  Status start(EndpointSources sources);
  void stop();
  std::string url() const { return server_ ? server_->url() : std::string(); }
  // What the worker publishes for its peers (published_url()); empty before start().
  std::string advertised() const;
  // wildcard_address_warning() for this endpoint; empty before start().
  std::string advertise_warning() const;

 private:
  std::string address_;
  std::string advertise_;
  std::string host_name_;  // published_host_name(), read at start() for a wildcard address
  std::shared_ptr<metrics::MetricsRegistry> registry_;
  std::shared_ptr<MetricsSink> sink_;
  std::unique_ptr<StatusServer> server_;
};

}  // namespace kcl::observability
