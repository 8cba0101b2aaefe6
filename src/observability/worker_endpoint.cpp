#include "observability/worker_endpoint.h"

#include <unistd.h>

#include <climits>

namespace kcl::observability {

std::string advertised_url(const std::string& advertise, int bound_port,
                           const std::string& bound_url) {
  if (advertise.empty()) return bound_url;
  if (advertise.rfind("http://", 0) == 0) {
    std::string url = advertise;
    while (url.size() > 7 && url.back() == '/') url.pop_back();
    return url;
  }
  std::string host = advertise;
  int port = bound_port;
  // "HOST:PORT" / "[IPv6]:PORT"; anything else is a host alone.
  if (auto hp = parse_http_address(advertise);
      hp.ok() && advertise.find(':') != std::string::npos) {
    host = hp->first;
    if (hp->second != 0) port = hp->second;
  }
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(port);
}

bool is_wildcard_address(const std::string& address) {
  auto hp = parse_http_address(address);
  return hp.ok() && (hp->first == "0.0.0.0" || hp->first == "::");
}

std::string published_host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return {};
  const std::string host(name);
  if (host.empty() || host == "localhost" || host == "localhost.localdomain") return {};
  return host;
}

std::string published_url(const std::string& address, const std::string& advertise,
                          const std::string& host_name, int bound_port,
                          const std::string& bound_url) {
  if (!advertise.empty() || !is_wildcard_address(address) || host_name.empty()) {
    return advertised_url(advertise, bound_port, bound_url);
  }
  return advertised_url(host_name, bound_port, bound_url);
}

std::string wildcard_address_warning(const std::string& address, const std::string& advertise,
                                     const std::string& published) {
  if (!advertise.empty() || !is_wildcard_address(address)) return {};
  // A host name was published: the peers reach this host by it, wherever they run.
  if (published.rfind("http://127.", 0) != 0 && published.rfind("http://[::1]", 0) != 0) {
    return {};
  }
  return "the http endpoint listens on every interface (" + address +
         ") but no advertise address is set and this host has no name to publish: this "
         "worker publishes " +
         published +
         " to its peers, where each of them finds itself, so their fleet views cannot reach "
         "this one (they show it unreachable, naming whose report they got); set "
         "http_advertise_address (--http-advertise) to an address the other workers reach";
}

WorkerEndpoint::WorkerEndpoint(std::string address, std::shared_ptr<MetricsSink> user_sink,
                               std::string advertise)
    : address_(std::move(address)),
      advertise_(std::move(advertise)),
      registry_(std::make_shared<metrics::MetricsRegistry>()) {
  sink_ = user_sink ? std::make_shared<TeeMetricsSink>(registry_, std::move(user_sink))
                    : std::shared_ptr<MetricsSink>(registry_);
}

WorkerEndpoint::~WorkerEndpoint() { stop(); }

Status WorkerEndpoint::start(EndpointSources in) {
  StatusServerConfig config;
  config.address = address_;
  StatusSources sources;
  sources.application = std::move(in.application);
  sources.stream = std::move(in.stream);
  sources.worker_id = std::move(in.worker_id);
  sources.registry = registry_;
  sources.list_leases = [store = std::move(in.store)] { return store->list_leases(); };
  sources.health = std::move(in.health);
  sources.shard_states = std::move(in.shard_states);
  sources.peers = std::move(in.peers);
  if (!in.peers_note.empty()) sources.peers_note = std::move(in.peers_note);
  if (advertise_.empty() && is_wildcard_address(address_)) host_name_ = published_host_name();
  server_ = std::make_unique<StatusServer>(std::move(config), std::move(sources));
  Status s = server_->start();
  if (!s.ok()) server_.reset();
  return s;
}

std::string WorkerEndpoint::advertised() const {
  return server_ ? published_url(address_, advertise_, host_name_, server_->port(), server_->url())
                 : std::string();
}

std::string WorkerEndpoint::advertise_warning() const {
  return server_ ? wildcard_address_warning(address_, advertise_, advertised()) : std::string();
}

void WorkerEndpoint::stop() {
  if (server_) server_->stop();
}

}  // namespace kcl::observability
