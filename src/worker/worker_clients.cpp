#include "worker/worker_clients.h"

#include "aws/aws_json_client.h"
#include "base/status_macros.h"
#include "leases/dynamodb_lease_store.h"
#include "metrics/tee_sink.h"
#include "retrieval/fanout_consumers.h"
#include "retrieval/fanout_source.h"

namespace kcl::worker {

std::unique_ptr<observability::WorkerEndpoint> make_endpoint(
    const WorkerConfig& config, const std::shared_ptr<MetricsSink>& given,
    std::shared_ptr<MetricsSink>* metrics) {
  if (config.http_address.empty()) return nullptr;
  auto endpoint = std::make_unique<observability::WorkerEndpoint>(config.http_address, given,
                                                                  config.http_advertise_address);
  *metrics = endpoint->sink();
  return endpoint;
}

Status make_cloudwatch(const WorkerConfig& config, std::shared_ptr<Logger> logger,
                       const Clock& clock, WorkerClients& clients,
                       std::shared_ptr<MetricsSink>* metrics) {
  const CloudWatchMetricsConfig& cw = config.cloudwatch;
  if (cw.mode == CloudWatchMetricsMode::kOff || cw.level == MetricsLevel::kNone) {
    return Status::Ok();
  }
  std::unique_ptr<aws::AwsJsonClient> client;
  if (cw.mode == CloudWatchMetricsMode::kPutMetricData) {
    // A client of its own: its calls are not reported as metrics (no feedback loop).
    auto made = aws::make_aws_json_client(cloudwatch::cloudwatch_service(), config.aws);
    if (!made.ok()) return made.status().with_context("CloudWatch metrics: ");
    client = std::move(made).value();
  }
  clients.cloudwatch = std::make_unique<cloudwatch::CloudWatchPublisher>(
      cw, cw.metrics_namespace.empty() ? config.leases.application_name : cw.metrics_namespace,
      config.leases.worker_id, std::move(client), std::move(logger), clock);
  clients.cloudwatch->report_failures_to(*metrics);  // seen where CloudWatch is not
  KCL_RETURN_IF_ERROR(clients.cloudwatch->start());
  *metrics = std::make_shared<metrics::TeeMetricsSink>(*metrics, clients.cloudwatch->sink());
  return Status::Ok();
}

Status make_data_clients(const WorkerConfig& config, const WorkerInternals& internals,
                         const std::shared_ptr<MetricsSink>& metrics,
                         const std::shared_ptr<Logger>& logger, WorkerClients& clients) {
  aws::AwsClientParts aws_parts;  // one connection pool and credentials chain for both
  aws_parts.metrics = metrics;
  if (internals.kinesis) {
    clients.kinesis = internals.kinesis;
  } else {
    KCL_ASSIGN_OR_RETURN(auto raw,
                         aws::make_aws_json_client(aws::kinesis_service(), config.aws, &aws_parts));
    clients.kinesis = std::make_shared<kinesis::KinesisClient>(
        std::shared_ptr<aws::AwsJsonClient>(std::move(raw)));
    std::string why;
    clients.kinesis->set_wire(kinesis::decide_wire(*clients.kinesis, config.aws.kinesis_wire, why));
    logger->log(LogLevel::kInfo, "worker",
                std::string("Kinesis data calls in ") +
                    (clients.kinesis->wire() == kinesis::Wire::kCbor ? "CBOR" : "JSON") + " (" +
                    why + ")");
  }
  if (internals.lease_store) {
    clients.store = internals.lease_store;
    return Status::Ok();
  }
  KCL_ASSIGN_OR_RETURN(auto raw,
                       aws::make_aws_json_client(aws::dynamodb_service(), config.aws, &aws_parts));
  clients.dynamodb = std::make_shared<dynamodb::DynamoDbClient>(
      std::shared_ptr<aws::AwsJsonClient>(std::move(raw)));
  clients.dynamodb->report_capacity_to(metrics);
  auto options = leases::DynamoDbLeaseStoreOptions::from_config(config.leases);
  options.logger = logger;
  clients.store =
      std::make_shared<leases::DynamoDbLeaseStore>(clients.dynamodb, std::move(options));
  return Status::Ok();
}

Status make_fanout_sources(const WorkerConfig& config, StreamSet& streams,
                           const std::shared_ptr<MetricsSink>& metrics, const Clock& clock,
                           const std::function<void(LogLevel, const std::string&)>& log,
                           WorkerClients& clients) {
  const std::string name = config.retrieval.consumer_name.empty() ? config.leases.application_name
                                                                  : config.retrieval.consumer_name;
  auto consumers = std::make_shared<retrieval::FanOutConsumers>(
      clients.kinesis, name, clock,
      [&streams](const std::string& stream) { return streams.stream_arn_of(stream); });
  // Throttling is retried by the AWS client's policy.
  for (const auto& [stream, s] :
       consumers->prepare(streams.stream_names(), std::chrono::minutes(2))) {
    // Of several streams, one that is gone or still failing is left to its shards'
    // subscriptions (which retry); a problem of configuration or rights stops the start.
    const StatusCode c = s.code();
    if (!streams.multi_stream() || c == StatusCode::kPermissionDenied ||
        c == StatusCode::kInvalidArgument) {
      return s;
    }
    log(LogLevel::kWarn,
        s.to_string() + "; its shards look the consumer up again when they subscribe");
  }
  for (const auto& [stream, arn] : consumers->known()) {
    log(LogLevel::kInfo, "enhanced fan-out on stream " + stream + " through stream consumer " +
                             name + " (" + arn + ")");
  }
  retrieval::FanOutContext fan;
  fan.kinesis = clients.kinesis;
  fan.transport = std::make_shared<aws::StreamingTransport>(config.aws.http);
  fan.metrics = metrics;
  fan.stream_label = streams.multi_stream();  // as the shard consumers' metrics
  clients.fanout =
      retrieval::fanout_sources(std::move(fan), std::move(consumers), config.retrieval, clock);
  return Status::Ok();
}

}  // namespace kcl::worker
