// worker/worker_clients.h: what a worker talks to the world through (the Kinesis and
// DynamoDB clients, the lease store, the CloudWatch publisher, the fan-out records sources,
// the HTTP endpoint), each made from the worker's configuration unless a test or an
// embedding tool gave it (worker_access.h).
//
// Thread safety: the make_* functions run on the thread that starts the worker; what they
// made is thread-safe as each part documents.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cloudwatch/cloudwatch_publisher.h"
#include "dynamodb/dynamodb_client.h"
#include "kcl/clock.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"
#include "kcl/worker.h"
#include "kinesis/kinesis_client.h"
#include "leases/lease_store.h"
#include "observability/worker_endpoint.h"
#include "retrieval/records_source.h"
#include "worker/stream_set.h"
#include "worker/worker_access.h"

namespace kcl::worker {

struct WorkerClients {
  std::shared_ptr<kinesis::KinesisClient> kinesis;
  std::shared_ptr<dynamodb::DynamoDbClient> dynamodb;  // empty with a given lease store
  std::shared_ptr<leases::LeaseStore> store;
  std::unique_ptr<cloudwatch::CloudWatchPublisher> cloudwatch;  // set when publishing
  retrieval::RecordsSourceFactory fanout;                       // set when reading with fan-out
};

// The HTTP endpoint when `http_address` is set (null otherwise); then every metric point goes
// through it (`*metrics` becomes its sink, fed to `given` as well).
std::unique_ptr<observability::WorkerEndpoint> make_endpoint(
    const WorkerConfig& config, const std::shared_ptr<MetricsSink>& given,
    std::shared_ptr<MetricsSink>* metrics);

// The CloudWatch publisher when configured, started; every metric point goes there too
// (`*metrics` becomes a tee).
Status make_cloudwatch(const WorkerConfig& config, std::shared_ptr<Logger> logger,
                       const Clock& clock, WorkerClients& clients,
                       std::shared_ptr<MetricsSink>* metrics);

// The Kinesis client (its wire chosen: kinesis/wire_probe), the DynamoDB client and the lease
// store, or those `internals` gives.
Status make_data_clients(const WorkerConfig& config, const WorkerInternals& internals,
                         const std::shared_ptr<MetricsSink>& metrics,
                         const std::shared_ptr<Logger>& logger, WorkerClients& clients);

// The fan-out records sources: the stream consumer of each stream known at start found or
// registered (five at a time: AWS keeps at most 5 of an account CREATING at once) and ACTIVE;
// a stream that appears later has its consumer looked up by its shards' first subscription.
// Called after the first shard sync; `streams` outlives every source.
Status make_fanout_sources(const WorkerConfig& config, StreamSet& streams,
                           const std::shared_ptr<MetricsSink>& metrics, const Clock& clock,
                           const std::function<void(LogLevel, const std::string&)>& log,
                           WorkerClients& clients);

}  // namespace kcl::worker
