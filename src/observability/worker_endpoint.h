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

class WorkerEndpoint {
 public:
  // `user_sink` (may be null) keeps receiving every point.
  WorkerEndpoint(std::string address, std::shared_ptr<MetricsSink> user_sink);
  ~WorkerEndpoint();

  // The sink the worker should report to.
  std::shared_ptr<MetricsSink> sink() const { return sink_; }
  const std::shared_ptr<metrics::MetricsRegistry>& registry() const { return registry_; }

  Status start(std::string application, std::string stream, std::string worker_id,
               std::shared_ptr<leases::LeaseStore> store, std::function<HealthState()> health);
  void stop();
  std::string url() const { return server_ ? server_->url() : std::string(); }

 private:
  std::string address_;
  std::shared_ptr<metrics::MetricsRegistry> registry_;
  std::shared_ptr<MetricsSink> sink_;
  std::unique_ptr<StatusServer> server_;
};

}  // namespace kcl::observability
