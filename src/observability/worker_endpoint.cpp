#include "observability/worker_endpoint.h"

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
  server_ = std::make_unique<StatusServer>(std::move(config), std::move(sources));
  Status s = server_->start();
  if (!s.ok()) server_.reset();
  return s;
}

std::string WorkerEndpoint::advertised() const {
  return server_ ? advertised_url(advertise_, server_->port(), server_->url()) : std::string();
}

void WorkerEndpoint::stop() {
  if (server_) server_->stop();
}

}  // namespace kcl::observability
