#include "observability/worker_endpoint.h"

namespace kcl::observability {

WorkerEndpoint::WorkerEndpoint(std::string address, std::shared_ptr<MetricsSink> user_sink)
    : address_(std::move(address)), registry_(std::make_shared<metrics::MetricsRegistry>()) {
  sink_ = user_sink ? std::make_shared<TeeMetricsSink>(registry_, std::move(user_sink))
                    : std::shared_ptr<MetricsSink>(registry_);
}

WorkerEndpoint::~WorkerEndpoint() { stop(); }

Status WorkerEndpoint::start(std::string application, std::string stream, std::string worker_id,
                             std::shared_ptr<leases::LeaseStore> store,
                             std::function<HealthState()> health) {
  StatusServerConfig config;
  config.address = address_;
  StatusSources sources;
  sources.application = std::move(application);
  sources.stream = std::move(stream);
  sources.worker_id = std::move(worker_id);
  sources.registry = registry_;
  sources.list_leases = [store] { return store->list_leases(); };
  sources.health = std::move(health);
  server_ = std::make_unique<StatusServer>(std::move(config), std::move(sources));
  Status s = server_->start();
  if (!s.ok()) server_.reset();
  return s;
}

void WorkerEndpoint::stop() {
  if (server_) server_->stop();
}

}  // namespace kcl::observability
