// kcl/worker.h: a worker reads one stream together with the other workers of the same
// application, sharing its shards through leases in the DynamoDB lease table.
//
//   kcl::WorkerConfig config;
//   config.stream_name = "orders";
//   config.leases.application_name = "order-audit";
//   kcl::Worker worker(config, std::make_shared<MyFactory>());
//   worker.run();   // blocks until the worker stops: shutdown() or begin_shutdown() from
//                   // another thread (a signal handler's, say), or a fatal error
//
// What a worker does: creates the lease table if needed; syncs shards to leases at start
// and periodically (with jitter); holds its share of the leases (see LeaseConfig); runs one shard
// consumer per held lease (waiting on parents -> initializing -> processing -> shard end /
// lease lost / shutdown requested -> done) on a fixed pool of threads; stops in order.
//
// Threads: the worker owns (a) one scheduler thread (starts and stops consumers, runs shard
// sync), (b) the lease-assignment threads, one per step so a slow lease-table scan never
// delays a renewal: two with LeaseAssignment::kWorkerTakes (renew, take), three with
// kLeaderBased (heartbeat, poll of its own entry, leader pass), (c) a pool of
// `processing.thread_pool_size` threads that run every consumer's steps (GetRecords calls
// and processor callbacks). Fan-out's HTTP/2 transport, the HTTP endpoint and CloudWatch
// publishing run threads of their own when configured. No thread per shard: hundreds of shards
// share the pool. Calls for one shard are never concurrent (see kcl/processor.h).
//
// Thread safety: start(), run(), shutdown(), begin_shutdown() and the accessors may be called
// from any thread (shutdown() inside a record processor only begins the stop; see there). A
// Worker is started at most once.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kcl/aws_config.h"
#include "kcl/clock.h"
#include "kcl/cloudwatch_config.h"
#include "kcl/dependencies.h"
#include "kcl/initial_position.h"
#include "kcl/lease_config.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"
#include "kcl/processing_config.h"
#include "kcl/processor.h"
#include "kcl/retrieval_config.h"
#include "kcl/status.h"

namespace kcl {

namespace worker {
struct WorkerAccess;  // internal: builds a worker with injected clients (tests, embedding)
}

// One stream of a multi-stream application (WorkerConfig::streams).
struct StreamConfig {
  std::string name;
  // Where a shard of this stream without a checkpoint starts; empty: the worker's
  // initial_position.
  std::optional<InitialPosition> initial_position;
};

struct WorkerConfig {
  // The stream to read; or, to read several through one lease table, leave it empty and set
  // `streams` or `stream_tracker`. Exactly one of the three is required.
  std::string stream_name;
  // Multi-stream: the streams to read, through one lease table in the Java KCL's multi-stream
  // format (lease keys "<account>:<stream>:<creation epoch>:<shard>";
  // docs/lease-table-layouts.md). One pool, one lease assignment that balances all streams'
  // leases together, one set of metrics (with a "stream" label). Polling or
  // RetrievalMode::kFanOut: with fan-out each stream has its own stream consumer, all named
  // retrieval.consumer_name (else the application name), as the Java KCL names them.
  std::vector<StreamConfig> streams;
  // Multi-stream, with a list that changes: called at start and every stream_poll_interval
  // on the scheduler's thread (keep it quick; an exception keeps the last list). A stream
  // added starts at its initial position; one removed goes on being read until its leases
  // are deleted, former_stream_deletion_delay after this worker first saw it missing. A
  // stream that is deleted (ResourceNotFound) has its leases deleted at once. Every worker
  // of the application should list the same streams.
  std::function<std::vector<StreamConfig>()> stream_tracker;
  // Default 60 s (the Java KCL's), range 1 s..1 h.
  std::chrono::milliseconds stream_poll_interval{60000};
  // Default 1 h, range 0..7 d; 0 = never (the leases of a former stream stay, as the Java
  // KCL's NO_STREAMS_LEASES_DELETION).
  std::chrono::milliseconds former_stream_deletion_delay{3600000};
  // Lease table, worker id, failover and balance. leases.application_name is required;
  // leases.worker_id defaults to "<hostname>:<pid>:<random>" when empty.
  LeaseConfig leases;
  // Where a shard without a checkpoint starts. Default LATEST (as the Java KCL).
  InitialPosition initial_position;
  RetrievalConfig retrieval;
  ProcessingConfig processing;
  AwsConfig aws;
  // The embedded HTTP endpoint (/metrics, /healthz, /readyz, /status, /status.json):
  // "PORT", "HOST:PORT" or "[IPv6]:PORT"; a port alone listens on 127.0.0.1. Port 0 picks a
  // free port (see Worker::http_url()). Default empty: off. When on, every metric point also
  // goes to the endpoint's Prometheus registry (and still to Dependencies::metrics).
  std::string http_address;
  // What this worker tells the other workers its endpoint is, for the fleet view (every
  // worker's /status shows the whole fleet's lag, records/s and health by fetching each
  // peer's /status.json?scope=local): "HOST", "HOST:PORT", "[IPv6]:PORT" or "http://...";
  // without a port (or with port 0), the port the endpoint listens on. Default empty: the
  // listening address (127.0.0.1 for a bare port), or, for an endpoint listening on every
  // interface (0.0.0.0, ::), this host's name (http://HOSTNAME:PORT; the loopback address,
  // with a WARN, when the host has no name). Set it when the peers reach this host by
  // another address (in Kubernetes, the pod's IP). Published once, in the worker's
  // coordination-table entry at each registration (LeaseAssignment::kLeader; worker-takes
  // keeps no directory, and its fleet view has the lease table plus this worker's figures).
  std::string http_advertise_address;
  // Publishing the metrics to CloudWatch (EMF lines or PutMetricData) under the Java KCL's
  // names; off by default (kcl/cloudwatch_config.h).
  CloudWatchMetricsConfig cloudwatch;

  // Every problem with this configuration (including those of the nested structs), in
  // plain words; empty when valid.
  std::vector<std::string> validate() const;
  // True when the worker reads several streams (streams or stream_tracker).
  bool multi_stream() const { return !streams.empty() || stream_tracker != nullptr; }

 private:
  void check_streams(std::vector<std::string>& problems) const;
};

// Optional collaborators; anything left empty is made from the configuration.
// The name Dependencies (kcl/dependencies.h) had when only a worker took it.
using WorkerDependencies = Dependencies;

// A shard whose consumer keeps failing: it is restarted after a backoff each time.
struct FailingShard {
  std::string shard_id;
  Status cause;                  // the last failure
  int consecutive_failures = 0;  // with that same cause, in a row
  // Records the shard delivered to its processor since this worker first held it.
  std::uint64_t records_delivered = 0;
};

struct WorkerStats {
  std::size_t leases_held = 0;
  std::size_t consumers = 0;
  std::uint64_t records_delivered = 0;
  std::uint64_t processor_failures = 0;
  std::uint64_t corrupt_aggregates = 0;
  // Records handed to the dead-letter sink and accepted (ProcessorErrorPolicy::kDeadLetter).
  std::uint64_t records_dead_lettered = 0;
  // Shards whose last consumer ended in failure (and was not followed by one that
  // delivered), e.g. a response the library cannot read. Empty when all is well.
  std::vector<FailingShard> failing_shards;
};

class Worker {
 public:
  Worker(WorkerConfig config, std::shared_ptr<RecordProcessorFactory> factory,
         Dependencies deps = {});
  ~Worker();  // shuts down gracefully if still running, and waits
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Validates the configuration, prepares the lease table and shard leases, and starts the
  // threads; returns once running. Errors: kInvalidArgument listing every configuration
  // problem; kFailedPrecondition for a lease table with the wrong schema, or a worker already
  // shut down; AWS errors. A shutdown asked while start() retries ends it: start() returns
  // the failure, and the shutdown's result is that failure too. After a failed start without
  // a shutdown, start() may be called again.
  Status start();
  // start(), then blocks until the worker has stopped (after shutdown() or a fatal error).
  // Returns why it stopped (OK after a graceful shutdown).
  Status run();
  // Graceful shutdown: stop taking leases -> shutdown_requested on every processor (final
  // checkpoints) -> hand leases back -> stop threads. Blocks until the worker has stopped and
  // returns why (OK after a clean stop); calling it again returns the same result. (The
  // same meaning as PullConsumer::shutdown() and Producer::shutdown().)
  // On one of the worker's own threads (inside a RecordProcessor callback) it cannot wait
  // for those threads: it begins the shutdown and returns kFailedPrecondition saying so.
  // A processor whose callback has not returned within ProcessingConfig::shutdown_timeout
  // does not hold the stop up: its lease is handed back and the stop ends with
  // kDeadlineExceeded naming its shards; the Worker's destructor then waits for that callback
  // to return (a process may exit without destroying the Worker).
  Status shutdown();
  // Begins the same graceful shutdown and returns at once; the future is ready when the
  // worker has stopped. Safe from any thread, a record processor's or a signal-handling one
  // included; calling it again returns the same future.
  std::shared_future<Status> begin_shutdown();
  // Blocks until the worker has stopped; returns why (as run()).
  Status wait();
  // Waits at most `timeout` for the worker to stop; the reason when it has, else nothing.
  std::optional<Status> wait_for(std::chrono::milliseconds timeout);

  // Reads WorkerConfig::stream_tracker now rather than at the next stream_poll_interval
  // (e.g. on SIGHUP after the list changed); nothing for a worker without a tracker.
  void refresh_streams();

  const std::string& worker_id() const;
  // The embedded HTTP endpoint's base URL ("http://127.0.0.1:9400") once started with
  // WorkerConfig::http_address; else empty.
  std::string http_url() const;
  WorkerStats stats() const;

 private:
  class Impl;
  friend struct worker::WorkerAccess;
  explicit Worker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kcl
