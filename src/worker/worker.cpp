// The worker (scheduler): ties lease coordination, shard sync and shard consumers together
// and stops them in order. See kcl/worker.h.
#include "kcl/worker.h"

#include <unistd.h>

#include <cctype>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "assignment/assignment_strategy.h"
#include "assignment/membership.h"
#include "aws/aws_json_client.h"
#include "aws/retry.h"
#include "base/jitter.h"
#include "base/repeat_report.h"
#include "base/status_macros.h"
#include "base/thread_name.h"
#include "cloudwatch/cloudwatch_publisher.h"
#include "dynamodb/dynamodb_client.h"
#include "kinesis/kinesis_client.h"
#include "kinesis/stream_consumers.h"
#include "leases/dynamodb_lease_store.h"
#include "leases/load_meter.h"
#include "leases/stream_identifier.h"
#include "lifecycle/shard_consumer.h"
#include "lifecycle/stall_detector.h"
#include "lifecycle/task_pool.h"
#include "metrics/tee_sink.h"
#include "observability/worker_endpoint.h"
#include "retrieval/fanout_consumers.h"
#include "retrieval/fanout_source.h"
#include "shardsync/shard_syncer.h"
#include "worker/stream_set.h"
#include "worker/worker_access.h"

namespace kcl {

namespace {

std::string default_worker_id() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "host");
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", rd());
  return std::string(host) + ":" + std::to_string(getpid()) + ":" + suffix;
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

// The stream a shard sync is asked for when a lease's consumer ends: the stream named in a
// multi-stream lease key, "" (every stream) for a one-stream key.
std::string stream_of_lease(const std::string& lease_key) {
  Lease l;
  l.lease_key = lease_key;
  return leases::lease_stream_name(l);
}

}  // namespace

class Worker::Impl final : public leases::LeaseListener {
 public:
  Impl(WorkerConfig config, std::shared_ptr<RecordProcessorFactory> factory, Dependencies deps,
       worker::WorkerInternals internals)
      : config_(std::move(config)),
        factory_(std::move(factory)),
        deps_(std::move(deps)),
        internals_(std::move(internals)) {
    if (config_.leases.worker_id.empty()) config_.leases.worker_id = default_worker_id();
    logger_ = deps_.logger ? deps_.logger : make_default_logger();
    metrics_ = deps_.metrics ? deps_.metrics
                             : std::shared_ptr<MetricsSink>(std::shared_ptr<MetricsSink>{},
                                                            &NoopMetricsSink::instance());
    clock_ = deps_.clock ? deps_.clock : &SystemClock::instance();
    done_ = done_promise_.get_future().share();
    if (!config_.http_address.empty()) {
      endpoint_ = std::make_unique<observability::WorkerEndpoint>(
          config_.http_address, deps_.metrics, config_.http_advertise_address);
      metrics_ = endpoint_->sink();
    }
  }

  ~Impl() override {
    if (started_.load()) {
      shutdown();
      done_.wait();
    }
    join_threads();
  }

  Status start();
  // Starts publishing to CloudWatch when configured; every metric point goes there too.
  Status start_cloudwatch();
  // Finds or registers the stream consumer of each stream read (one per stream, all of one
  // name) and makes the fan-out records sources' factory.
  Status start_fanout();
  // Runs `step` until it succeeds, a non-transient error, 8 attempts or a shutdown, with
  // the shared backoff between attempts (transient: kUnavailable, kInternal such as a
  // malformed answer, kDeadlineExceeded).
  Status retry_at_start(const std::string& what, const std::function<Status()>& step);
  std::shared_future<Status> shutdown();
  Status wait() {
    if (!started_.load())
      return Status(StatusCode::kFailedPrecondition, "the worker was not started");
    return done_.get();
  }
  std::optional<Status> wait_for(std::chrono::milliseconds timeout) {
    if (!started_.load())
      return Status(StatusCode::kFailedPrecondition, "the worker was not started");
    if (done_.wait_for(timeout) != std::future_status::ready) return std::nullopt;
    return done_.get();
  }
  // True on the scheduler's thread or one of the pool's (where processors run).
  bool on_own_thread() const {
    return (pool_ && pool_->on_pool_thread()) || scheduler_id_.load() == std::this_thread::get_id();
  }
  const std::string& worker_id() const { return config_.leases.worker_id; }
  void refresh_streams() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      refresh_streams_ = true;
    }
    wake_scheduler();
  }
  std::string http_url() const { return endpoint_ ? endpoint_->url() : std::string(); }
  observability::HealthState health() const;
  // This worker's stalled shards, with wall-clock times, for /readyz and /status.json.
  std::vector<observability::StalledShard> stalled_shards() const;
  WorkerStats stats() const;

  // LeaseListener: called on the lease threads; quick, no blocking on the coordinator.
  void on_lease_gained(const Lease& lease) override {
    log(LogLevel::kInfo,
        "lease " + lease.lease_key + " taken (checkpoint " + lease.checkpoint.to_string() + ")");
    wake_scheduler();
  }
  void on_lease_lost(const std::string& key, const Status& reason) override {
    log(LogLevel::kWarn, "lease " + key + " lost: " + reason.to_string());
    std::shared_ptr<lifecycle::ShardConsumer> c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = consumers_.find(key);
      if (it != consumers_.end()) c = it->second;
    }
    if (c) {
      c->notify_lease_lost();
      pool_->schedule_now(c);
    }
    wake_scheduler();
  }

  // The leader moves `key` to `new_owner`: the consumer stops gracefully (its processor
  // checkpoints), then reconcile() completes the handoff.
  void on_handoff_requested(const std::string& key, const std::string& new_owner) override {
    log(LogLevel::kInfo, "lease " + key + " to be handed off to " + new_owner +
                             ": finishing the batch in progress and checkpointing");
    std::shared_ptr<lifecycle::ShardConsumer> c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = consumers_.find(key);
      if (it != consumers_.end()) c = it->second;
    }
    if (c) {
      c->request_shutdown(assignment::handoff_finish_bound(config_.leases));
      pool_->schedule_now(c);
    }
    wake_scheduler();
  }

 private:
  // Something changed that reconcile() acts on (a lease taken, lost or to hand off, a consumer
  // done): the scheduler looks now rather than at its next interval.
  void wake_scheduler() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      wake_ = true;
    }
    cv_.notify_all();
  }
  // When the scheduler must look again even if nothing wakes it: its interval, or sooner
  // when a failed shard's restart falls due (requires mu_).
  Clock::MonoTime next_scheduler_look_locked() const;
  // Completes the handoffs whose consumer has stopped (no lock held).
  void complete_handoffs(const std::vector<std::string>& keys);
  void log(LogLevel level, const std::string& message) const {
    if (logger_->enabled(level)) logger_->log(level, "worker " + config_.leases.worker_id, message);
  }
  Status make_clients();
  void make_assignment();
  // The HTTP endpoint, and its address published for the fleet view.
  Status start_endpoint();
  // Lease key -> this worker's consumer state, for the status page.
  std::map<std::string, std::string> shard_states() const;
  // The steps of start(): tables, the first shard sync, the consumers' context, the threads.
  Status prepare_tables();
  Status initial_sync();
  void make_consumer_context();
  void scheduler_loop();
  void reconcile();
  void on_consumer_ended_locked(const std::string& shard, const lifecycle::ShardConsumer& c);
  void sweep_consumers_locked(const std::set<std::string>& held_keys,
                              std::vector<std::shared_ptr<lifecycle::ShardConsumer>>& run);
  // The leases being handed off (HeldLeases::pending_handoffs(), the one record of them)
  // whose consumer has stopped: ready to complete (requires mu_).
  std::vector<std::string> handoffs_ready_locked(
      const std::map<std::string, std::string>& handing_off) const;
  void start_consumers_locked(const std::vector<Lease>& held,
                              const std::map<std::string, std::string>& handing_off,
                              std::vector<std::shared_ptr<lifecycle::ShardConsumer>>& run);
  void run_shard_sync(const std::set<std::string>& now);
  // The stream, or the configured streams, for the status page.
  std::string stream_label() const {
    if (!config_.multi_stream()) return config_.stream_name;
    std::string names;
    for (const StreamConfig& s : config_.streams) names += (names.empty() ? "" : ",") + s.name;
    return names.empty() ? "(streams from the stream tracker)" : names;
  }
  void check_hung();
  // Asks every consumer what is in its way and reports stalls that begin, last or end
  // (scheduler thread only; lifecycle/stall_detector.h).
  void check_stalls();
  void report_stall(const lifecycle::StallEvent& e, Clock::MonoTime now);
  // The leader-based strategy's "am I the leader" as a gauge (the "no leader" alert).
  void report_leading();
  // A shard's consumer failed: restart it later; report the cause once, then repeats of the
  // same cause only as counts (requires mu_).
  void on_consumer_failed(const std::string& shard, const Status& failure, std::uint64_t delivered);
  void graceful_stop();
  void stop_consumers();
  void join_threads();

  WorkerConfig config_;
  std::shared_ptr<RecordProcessorFactory> factory_;
  Dependencies deps_;
  worker::WorkerInternals internals_;
  std::shared_ptr<Logger> logger_;
  std::shared_ptr<MetricsSink> metrics_;
  std::unique_ptr<cloudwatch::CloudWatchPublisher> cloudwatch_;
  const Clock* clock_ = nullptr;

  std::shared_ptr<kinesis::KinesisClient> kinesis_;
  retrieval::RecordsSourceFactory fanout_factory_;  // set when reading with fan-out
  std::shared_ptr<leases::LeaseStore> store_;
  std::shared_ptr<dynamodb::DynamoDbClient> dynamodb_;  // empty with a given lease store
  // Who holds which lease (leader-based or worker-takes: assignment/assignment_strategy.h),
  // with the held leases every consumer writes through, and the load they carry.
  std::unique_ptr<leases::LoadMeter> load_;
  std::unique_ptr<assignment::AssignmentStrategy> assignment_;
  std::unique_ptr<worker::StreamSet> streams_;
  bool refresh_streams_ = false;   // refresh_streams() was called (guarded by mu_)
  bool ran_periodic_sync_ = true;  // the periodic gate at the scheduler's last look (its thread)
  std::unique_ptr<lifecycle::TaskPool> pool_;
  lifecycle::ConsumerContext ctx_;

  std::atomic<std::uint64_t> records_delivered_{0};
  std::atomic<std::uint64_t> processor_failures_{0};
  std::atomic<std::uint64_t> records_dead_lettered_{0};
  std::atomic<std::uint64_t> corrupt_aggregates_{0};

  std::atomic<bool> started_{false};
  std::thread scheduler_;
  std::atomic<std::thread::id> scheduler_id_{};  // scheduler_'s, once started

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<lifecycle::ShardConsumer>> consumers_;  // guarded
  std::set<std::string> finished_shards_;  // guarded: held leases whose shard is done
  // guarded: shards whose consumer failed, not restarted before the time given
  std::map<std::string, Clock::MonoTime> retry_after_;
  struct FailureRecord {
    Status cause;
    int consecutive = 0;
    std::uint64_t delivered = 0;  // by this shard's consumers so far
  };
  std::map<std::string, FailureRecord> failures_;     // guarded: shards whose last consumer failed
  std::unique_ptr<lifecycle::StallDetector> stalls_;  // scheduler thread; null when off
  std::vector<lifecycle::ShardStall> stalled_;        // guarded: stalls_->stalled(), copied
  bool shutdown_requested_ = false;                   // guarded
  // Streams whose shard sync is asked for now (a shard of theirs finished; "" = every
  // stream: a one-stream worker's). Guarded.
  std::set<std::string> sync_requested_;
  bool wake_ = false;  // guarded: see wake_scheduler()
  Status fatal_;       // guarded: why the worker stops on its own
  std::once_flag shutdown_once_;
  std::promise<Status> done_promise_;
  std::shared_future<Status> done_;
  // The HTTP endpoint (http_address); last, so it stops before what it reads goes away.
  std::atomic<bool> ready_{false};  // shards synced and lease threads running, not stopping
  std::unique_ptr<observability::WorkerEndpoint> endpoint_;
};

observability::HealthState Worker::Impl::health() const {
  observability::HealthState h;
  if (done_.wait_for(std::chrono::seconds(0)) == std::future_status::ready && !done_.get().ok()) {
    h.live = false;
    h.live_reason = done_.get().to_string();
  }
  h.ready = h.live && ready_.load();
  if (h.ready) {  // ready_ is set once assignment_ exists
    // Coordination calls that keep failing (heartbeats, polls, lock renewals, posts, passes).
    const auto now = clock_->now();
    for (const auto& f : assignment_->report().failing) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.1f",
                    std::chrono::duration<double>(now - f.since).count());
      h.warnings.push_back(f.operation + " failing for " + secs + " s, " +
                           std::to_string(f.consecutive) +
                           " times in a row: " + f.last.to_string());
    }
  }
  if (h.ready) h.stalled = stalled_shards();
  if (!h.ready) {
    h.ready_reason = !h.live ? "the worker failed: " + h.live_reason
                     : done_.wait_for(std::chrono::seconds(0)) == std::future_status::ready
                         ? "the worker has stopped"
                         : "starting: syncing shards to leases, or shutting down";
  }
  return h;
}

std::vector<observability::StalledShard> Worker::Impl::stalled_shards() const {
  std::vector<lifecycle::ShardStall> stalled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stalled = stalled_;
  }
  const auto mono_now = clock_->now();
  const auto wall_now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  std::vector<observability::StalledShard> out;
  for (const auto& s : stalled) {
    const auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(mono_now - s.since);
    out.push_back({s.shard, s.cause, s.detail, wall_now_ms - ago.count()});
  }
  return out;
}

Status Worker::Impl::make_clients() {
  aws::AwsClientParts aws_parts;  // one connection pool and credentials chain for both
  aws_parts.metrics = metrics_;
  if (internals_.kinesis) {
    kinesis_ = internals_.kinesis;
  } else {
    KCL_ASSIGN_OR_RETURN(
        auto raw, aws::make_aws_json_client(aws::kinesis_service(), config_.aws, &aws_parts));
    kinesis_ = std::make_shared<kinesis::KinesisClient>(
        std::shared_ptr<aws::AwsJsonClient>(std::move(raw)));
    std::string why;
    kinesis_->set_wire(kinesis::decide_wire(*kinesis_, config_.aws.kinesis_wire, why));
    logger_->log(LogLevel::kInfo, "worker",
                 std::string("Kinesis data calls in ") +
                     (kinesis_->wire() == kinesis::Wire::kCbor ? "CBOR" : "JSON") + " (" + why +
                     ")");
  }
  if (internals_.lease_store) {
    store_ = internals_.lease_store;
  } else {
    KCL_ASSIGN_OR_RETURN(
        auto raw, aws::make_aws_json_client(aws::dynamodb_service(), config_.aws, &aws_parts));
    dynamodb_ = std::make_shared<dynamodb::DynamoDbClient>(
        std::shared_ptr<aws::AwsJsonClient>(std::move(raw)));
    dynamodb_->report_capacity_to(metrics_);
    auto options = leases::DynamoDbLeaseStoreOptions::from_config(config_.leases);
    options.logger = logger_;
    store_ = std::make_shared<leases::DynamoDbLeaseStore>(dynamodb_, std::move(options));
  }
  return Status::Ok();
}

void Worker::Impl::make_assignment() {
  load_ = std::make_unique<leases::LoadMeter>(*clock_);
  assignment::AssignmentParts parts;
  parts.store = store_.get();
  parts.dynamodb = dynamodb_;  // empty with a given lease store: an in-memory coordination
  parts.coordination = internals_.coordination_store;
  parts.clock = clock_;
  parts.metrics = metrics_.get();
  parts.logger = logger_.get();
  parts.load = load_.get();
  parts.seed = std::random_device{}();
  assignment_ = assignment::make_assignment(config_.leases, std::move(parts));
  assignment_->held().set_listener(this);
}

Status Worker::Impl::start_endpoint() {
  observability::EndpointSources src;
  src.application = config_.leases.application_name;
  src.stream = stream_label();
  src.worker_id = config_.leases.worker_id;
  src.store = store_;
  src.health = [this] { return health(); };
  src.shard_states = [this] { return shard_states(); };
  if (assignment_->status_urls()) {
    src.peers = [this]() -> Result<std::vector<observability::PeerAddress>> {
      auto urls = assignment_->status_urls();
      if (!urls || !urls->ok()) {
        return urls ? urls->status() : Status(StatusCode::kFailedPrecondition, "no directory");
      }
      std::vector<observability::PeerAddress> out;
      for (auto& [id, url] : **urls) out.push_back({std::move(id), std::move(url)});
      return out;
    };
  }
  src.peers_note = assignment_->directory_note();
  if (Status s = endpoint_->start(std::move(src)); !s.ok()) return s;
  assignment_->set_status_url(endpoint_->advertised());
  log(LogLevel::kInfo, "serving " + endpoint_->url() + "/status and /metrics (published as " +
                           endpoint_->advertised() + ")");
  return Status::Ok();
}

std::map<std::string, std::string> Worker::Impl::shard_states() const {
  std::map<std::string, std::string> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, c] : consumers_) {
    std::string state(lifecycle::to_string(c->state()));
    for (char& ch : state) ch = ch == '_' ? ' ' : static_cast<char>(std::tolower(ch));
    out[key] = std::move(state);
  }
  for (const auto& [key, r] : failures_) {
    out[key] = "failing (" + std::to_string(r.consecutive) + " in a row)";
  }
  return out;
}

Status Worker::Impl::start_cloudwatch() {
  const CloudWatchMetricsConfig& cw = config_.cloudwatch;
  if (cw.mode == CloudWatchMetricsMode::kOff || cw.level == MetricsLevel::kNone) {
    return Status::Ok();
  }
  std::unique_ptr<aws::AwsJsonClient> client;
  if (cw.mode == CloudWatchMetricsMode::kPutMetricData) {
    // A client of its own: its calls are not reported as metrics (no feedback loop).
    auto made = aws::make_aws_json_client(cloudwatch::cloudwatch_service(), config_.aws);
    if (!made.ok()) return made.status().with_context("CloudWatch metrics: ");
    client = std::move(made).value();
  }
  cloudwatch_ = std::make_unique<cloudwatch::CloudWatchPublisher>(
      cw, cw.metrics_namespace.empty() ? config_.leases.application_name : cw.metrics_namespace,
      config_.leases.worker_id, std::move(client), logger_, *clock_);
  KCL_RETURN_IF_ERROR(cloudwatch_->start());
  metrics_ = std::make_shared<metrics::TeeMetricsSink>(metrics_, cloudwatch_->sink());
  return Status::Ok();
}

Status Worker::Impl::retry_at_start(const std::string& what, const std::function<Status()>& step) {
  // The retry policy decides (aws/retry.h, SeriesRule::start_up): kUnavailable,
  // kDeadlineExceeded and kInternal are retried, 8 attempts in all, 100 ms doubling up to
  // 6.4 s, on top of the AWS client's own retries of each call.
  aws::RetrySeries retries(aws::SeriesRule::start_up());
  Status s = step();
  while (!s.ok()) {
    const std::optional<std::chrono::milliseconds> delay = retries.next_delay(s);
    if (!delay) break;
    log(LogLevel::kWarn, what + " failed (attempt " + std::to_string(retries.failures_in_a_row()) +
                             "), retrying: " + s.to_string());
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (clock_->wait_for(lock, cv_, *delay, [&] { return shutdown_requested_; })) break;
    }
    s = step();
  }
  return s;
}

// The streams known at start (the configured one, or those the stream set resolved) have
// their consumers found or registered here, five at a time (AWS keeps at most 5 of an account
// CREATING at once), waiting for them to be ACTIVE; a stream that appears later has its
// consumer looked up by its shards' first subscription. Called after the first shard sync.
Status Worker::Impl::start_fanout() {
  const std::string name = config_.retrieval.consumer_name.empty()
                               ? config_.leases.application_name
                               : config_.retrieval.consumer_name;
  // The stream set outlives every lookup: they run here and on the pool's threads, which
  // graceful_stop() ends before the worker (and streams_) goes away.
  auto consumers = std::make_shared<retrieval::FanOutConsumers>(
      kinesis_, name, *clock_, [streams = streams_.get()](const std::string& stream) {
        return streams->stream_arn_of(stream);
      });
  // Throttling is retried by the AWS client's policy.
  for (const auto& [stream, s] :
       consumers->prepare(streams_->stream_names(), std::chrono::minutes(2))) {
    // Of several streams, one that is gone or still failing is left to its shards'
    // subscriptions (which retry); a problem of configuration or rights stops the start.
    const StatusCode c = s.code();
    if (!streams_->multi_stream() || c == StatusCode::kPermissionDenied ||
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
  fan.kinesis = kinesis_;
  fan.transport = std::make_shared<aws::StreamingTransport>(config_.aws.http);
  fan.metrics = metrics_;
  fan.stream_label = streams_->multi_stream();  // as the shard consumers' metrics
  fanout_factory_ =
      retrieval::fanout_sources(std::move(fan), std::move(consumers), config_.retrieval, *clock_);
  return Status::Ok();
}

Status Worker::Impl::start() {
  if (started_.exchange(true)) {
    return Status(StatusCode::kFailedPrecondition, "the worker was already started");
  }
  auto fail = [&](Status s) {
    started_.store(false);
    return s.code() == StatusCode::kInvalidArgument ? s : s.with_context("starting the worker: ");
  };
  auto problems = config_.validate();
  if (!problems.empty()) {
    return fail(Status(StatusCode::kInvalidArgument,
                       "invalid worker configuration: " + join(problems, "; ")));
  }
  if (!factory_ && !internals_.paced_factory) {
    return fail(Status(StatusCode::kInvalidArgument, "no RecordProcessorFactory was given"));
  }
  if (Status s = start_cloudwatch(); !s.ok()) return fail(s);
  if (Status s = make_clients(); !s.ok()) return fail(s);
  make_assignment();
  if (endpoint_) {
    if (Status s = start_endpoint(); !s.ok()) return fail(s);
  }
  if (Status s = prepare_tables(); !s.ok()) return fail(s);
  if (Status s = initial_sync(); !s.ok()) return fail(s);
  if (config_.retrieval.mode == RetrievalMode::kFanOut && !internals_.records_source_factory) {
    if (Status s = start_fanout(); !s.ok()) return fail(s);
  }
  make_consumer_context();
  assignment_->set_on_leading([this] { wake_scheduler(); });  // the shard sync it now runs
  assignment_->start();
  scheduler_ = base::named_thread("kcl-scheduler", [this] { scheduler_loop(); });
  scheduler_id_.store(scheduler_.get_id());
  ready_.store(true);
  return Status::Ok();
}

// The lease table, and what the assignment strategy keeps besides it. Transient failures at
// start-up (throttling, a dropped connection, a malformed answer) are retried with backoff
// for a while rather than failing the start.
Status Worker::Impl::prepare_tables() {
  if (Status s = retry_at_start("preparing the lease table",
                                [&] { return store_->create_table_if_not_exists(); });
      !s.ok()) {
    return s.with_context("preparing lease table " + config_.leases.effective_table_name() + ": ");
  }
  return retry_at_start("preparing the lease assignment's table",
                        [&] { return assignment_->prepare(); });
}

Status Worker::Impl::initial_sync() {
  streams_ = std::make_unique<worker::StreamSet>(
      config_, *kinesis_, *store_, *metrics_, *clock_,
      [this](LogLevel level, const std::string& message) { log(level, message); });
  streams_->set_periodic_gate([this] { return assignment_->runs_periodic_shard_sync(); });
  Result<worker::StreamSet::Turn> synced = Status(StatusCode::kInternal, "not synced");
  (void)retry_at_start("initial shard sync", [&] {
    synced = streams_->start();
    return synced.status();
  });
  if (!synced.ok()) return synced.status();
  log(LogLevel::kInfo,
      std::string(streams_->multi_stream() ? "started: streams " : "started: stream ") +
          streams_->names() + ", lease table " + config_.leases.effective_table_name() + ", " +
          std::to_string(synced->leases_created) + " leases created, " +
          assignment_->report().strategy + " lease assignment");
  if (synced->changed()) assignment_->leases_changed();
  return Status::Ok();
}

void Worker::Impl::make_consumer_context() {
  pool_ = std::make_unique<lifecycle::TaskPool>(config_.processing.thread_pool_size, *clock_,
                                                "kcl-shard-task");
  ctx_.runtime = {pool_.get(), clock_, logger_.get(), metrics_.get(), [this] { wake_scheduler(); }};
  ctx_.leases = {store_.get(), &assignment_->held(), load_.get()};
  ctx_.reading.stream = config_.stream_name;
  ctx_.reading.initial_position_of = [streams = streams_.get()](const std::string& stream) {
    return streams->initial_position_of(stream);
  };
  ctx_.reading.mode = config_.retrieval.mode;
  ctx_.reading.make_source = internals_.records_source_factory;
  if (!ctx_.reading.make_source) {
    ctx_.reading.make_source =
        config_.retrieval.mode == RetrievalMode::kFanOut
            ? fanout_factory_
            : lifecycle::polling_sources(*kinesis_, config_.retrieval, *clock_);
  }
  ctx_.timings = {config_.processing.parent_check_interval, config_.processing.failure_backoff_base,
                  config_.processing.failure_backoff_max};
  lifecycle::PaceContext pace;
  pace.logger = logger_.get();
  pace.metrics = metrics_.get();
  pace.clock = clock_;
  ctx_.deliveries = lifecycle::make_delivery_factory(factory_.get(), internals_.paced_factory.get(),
                                                     config_.processing, pace);
  ctx_.counters =
      std::make_unique<lifecycle::AtomicConsumerCounters>(lifecycle::AtomicConsumerCounters::Totals{
          records_delivered_, processor_failures_, corrupt_aggregates_, records_dead_lettered_});
}

// The streams' shard syncs that are due, and those of `now` at once. A one-stream worker whose
// stream was deleted stops.
void Worker::Impl::run_shard_sync(const std::set<std::string>& now) {
  auto r = streams_->tick(now);
  if (!r.ok()) {
    log(LogLevel::kWarn, "shard sync: " + r.status().to_string());
    std::lock_guard<std::mutex> lock(mu_);
    if (fatal_.ok()) fatal_ = r.status().with_context("stream " + config_.stream_name + ": ");
    shutdown_requested_ = true;
    return;
  }
  if (r->changed()) {
    assignment_->leases_changed();
    log(LogLevel::kInfo, "shard sync: " + std::to_string(r->leases_created) + " leases created, " +
                             std::to_string(r->leases_deleted) + " deleted");
  }
}

// A consumer that ended: a finished shard asks for a shard sync (its children's leases); a
// failed one is restarted after a backoff (a deleted stream stops a one-stream worker; of several
// streams, it asks for a shard sync, which deletes that stream's leases); the rest end
// their shard's series of failures once they delivered (requires mu_).
void Worker::Impl::on_consumer_ended_locked(const std::string& shard,
                                            const lifecycle::ShardConsumer& c) {
  switch (c.outcome()) {
    case lifecycle::ConsumerOutcome::kShardFinished:
      finished_shards_.insert(shard);
      sync_requested_.insert(stream_of_lease(shard));  // create the children's leases now
      break;
    case lifecycle::ConsumerOutcome::kFailed: {
      Status f = c.failure();
      if (f.code() == StatusCode::kNotFound && config_.multi_stream()) {
        // One of several streams was deleted: its leases go now.
        sync_requested_.insert(stream_of_lease(shard));
      } else if (f.code() == StatusCode::kNotFound && fatal_.ok()) {
        fatal_ = f;
        shutdown_requested_ = true;
      }
      on_consumer_failed(shard, f, c.records_delivered());
      // Any other failure: try the shard again, but not in a tight loop.
      retry_after_[shard] =
          clock_->now() + std::min<std::chrono::milliseconds>(
                              config_.processing.failure_backoff_max, std::chrono::seconds(5));
      break;
    }
    default:
      if (c.records_delivered() > 0) failures_.erase(shard);
      break;
  }
}

// Running consumers go on (a lease no longer held stops its consumer: belt and braces);
// ended ones are forgotten; returns the consumers to run now (requires mu_).
void Worker::Impl::sweep_consumers_locked(
    const std::set<std::string>& held_keys,
    std::vector<std::shared_ptr<lifecycle::ShardConsumer>>& run) {
  for (auto it = consumers_.begin(); it != consumers_.end();) {
    auto& c = it->second;
    if (c->done()) {
      on_consumer_ended_locked(it->first, *c);
      it = consumers_.erase(it);
      continue;
    }
    // A restarted consumer that delivers again ends its shard's series of failures.
    if (c->records_delivered() > 0) failures_.erase(it->first);
    if (!held_keys.count(it->first)) {
      c->notify_lease_lost();
      run.push_back(c);
    }
    ++it;
  }
  std::erase_if(finished_shards_, [&](const std::string& k) { return !held_keys.count(k); });
}

std::vector<std::string> Worker::Impl::handoffs_ready_locked(
    const std::map<std::string, std::string>& handing_off) const {
  std::vector<std::string> ready;
  for (const auto& [key, new_owner] : handing_off) {
    if (!consumers_.count(key)) ready.push_back(key);
  }
  return ready;
}

// A consumer for each held lease that has none, is not finished or being handed off, and
// whose restart after a failure is due (requires mu_).
void Worker::Impl::start_consumers_locked(
    const std::vector<Lease>& held, const std::map<std::string, std::string>& handing_off,
    std::vector<std::shared_ptr<lifecycle::ShardConsumer>>& run) {
  if (shutdown_requested_) return;
  for (const auto& lease : held) {
    if (consumers_.count(lease.lease_key) || finished_shards_.count(lease.lease_key) ||
        handing_off.count(lease.lease_key)) {
      continue;
    }
    if (auto r = retry_after_.find(lease.lease_key); r != retry_after_.end()) {
      if (clock_->now() < r->second) continue;
      retry_after_.erase(r);
    }
    auto c = std::make_shared<lifecycle::ShardConsumer>(ctx_, lease);
    consumers_[lease.lease_key] = c;
    run.push_back(c);
  }
}

void Worker::Impl::reconcile() {
  std::vector<Lease> held = assignment_->held().held_leases();
  const std::map<std::string, std::string> handing_off = assignment_->held().pending_handoffs();
  std::set<std::string> held_keys;
  for (const auto& l : held) held_keys.insert(l.lease_key);
  std::vector<std::shared_ptr<lifecycle::ShardConsumer>> to_schedule;
  std::vector<std::string> handoffs_ready;
  std::size_t consumers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sweep_consumers_locked(held_keys, to_schedule);
    handoffs_ready = handoffs_ready_locked(handing_off);
    start_consumers_locked(held, handing_off, to_schedule);
    consumers = consumers_.size();
  }
  for (auto& c : to_schedule) pool_->schedule_now(c);
  complete_handoffs(handoffs_ready);
  metrics_->gauge("worker.consumers", static_cast<double>(consumers), {});
}

void Worker::Impl::complete_handoffs(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    Status s = assignment_->held().complete_handoff(key);
    if (s.ok()) {
      log(LogLevel::kInfo,
          "lease " + key + " handed off (checkpointed; the new owner starts there)");
    } else if (s.code() == StatusCode::kLeaseLost) {
      log(LogLevel::kWarn, "lease " + key + " lost before its handoff completed: " + s.to_string());
    } else {
      // Still held and still handing off: the next reconcile tries again.
      log(LogLevel::kWarn, "handing off lease " + key + ": " + s.to_string() + "; trying again");
    }
  }
}

void Worker::Impl::on_consumer_failed(const std::string& shard, const Status& failure,
                                      std::uint64_t delivered) {
  FailureRecord& r = failures_[shard];
  const bool same = r.consecutive > 0 && r.cause.code() == failure.code() &&
                    r.cause.message() == failure.message();
  r.consecutive = same && delivered == 0 ? r.consecutive + 1 : 1;  // progress starts a new series
  r.cause = failure;
  r.delivered += delivered;
  MetricTag tag{"shard", shard};
  metrics_->count("consumer.failed", 1, MetricTags(&tag, 1));
  // The first failure of a series is logged; then the series is reported at 3 and at each
  // power of ten, with its count, instead of once per restart.
  const int n = r.consecutive;
  if (n == 1) {
    log(LogLevel::kError, "shard " + shard + ": the consumer stopped: " + failure.to_string() +
                              "; restarting it after a backoff");
  } else if (base::worth_reporting(static_cast<std::uint64_t>(n))) {
    log(LogLevel::kError,
        "shard " + shard + ": the consumer failed " + std::to_string(n) +
            " times in a row with the same error (" +
            (r.delivered == 0 ? std::string("no record delivered yet")
                              : std::to_string(r.delivered) + " records delivered before") +
            "): " + failure.to_string() +
            "; still restarting it; repeats are reported at each power of ten");
  }
}

void Worker::Impl::check_hung() {
  auto now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock_->now().time_since_epoch())
          .count();
  auto limit = std::chrono::duration_cast<std::chrono::nanoseconds>(
                   config_.processing.hung_processor_warning)
                   .count();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, c] : consumers_) {
    auto started = c->callback_started_ns();
    if (started != 0 && now_ns - started > limit && !c->hung_reported()) {
      c->mark_hung_reported();
      log(LogLevel::kWarn, "the processor of shard " + key + " has been in a callback for over " +
                               std::to_string(config_.processing.hung_processor_warning.count()) +
                               " ms (state " + std::string(lifecycle::to_string(c->state())) +
                               "); it may be hung");
      MetricTag tag{"shard", key};
      metrics_->count("processor.hung", 1, MetricTags(&tag, 1));
    }
  }
}

void Worker::Impl::check_stalls() {
  if (config_.processing.stall_threshold.count() == 0) return;
  if (!stalls_)
    stalls_ = std::make_unique<lifecycle::StallDetector>(config_.processing.stall_threshold);
  const Clock::MonoTime now = clock_->now();
  std::map<std::string, std::optional<lifecycle::StallSignal>> signals;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, c] : consumers_) {
      if (!c->done()) signals[key] = c->stall_signal(now);
    }
  }
  // Leases another worker named as owner stopped renewing, and no one took.
  for (const assignment::UnheldLease& u : assignment_->report().unheld) {
    if (signals.count(u.lease_key)) continue;
    signals[u.lease_key] = lifecycle::StallSignal{
        lifecycle::kStallNoLiveOwner,
        "lease held by worker " + u.owner + ", which stopped renewing it " +
            lifecycle::seconds_text(now - u.since) + " ago; no live worker holds it",
        u.since};
  }
  const std::vector<lifecycle::StallEvent> events = stalls_->look(now, signals);
  std::vector<lifecycle::ShardStall> stalled = stalls_->stalled();
  metrics_->gauge("worker.shards_stalled", static_cast<double>(stalled.size()), {});
  {
    std::lock_guard<std::mutex> lock(mu_);
    stalled_ = std::move(stalled);
  }
  for (const auto& e : events) report_stall(e, now);
}

// A stall is logged when it begins, at its 3rd look and each power of ten while it lasts
// (base/repeat_report.h), and when it ends; the gauge is 1 while it lasts.
void Worker::Impl::report_stall(const lifecycle::StallEvent& e, Clock::MonoTime now) {
  const lifecycle::ShardStall& s = e.stall;
  const MetricTag tags[] = {{"shard", s.shard}, {"cause", s.cause}};
  const std::string lasted = lifecycle::seconds_text(now - s.since);
  switch (e.kind) {
    case lifecycle::StallEvent::Kind::kStarted:
      metrics_->gauge("shard.stalled", 1, MetricTags(tags, 2));
      log(LogLevel::kWarn,
          "shard " + s.shard + " stalled (" + s.cause + ") for " + lasted + ": " + s.detail);
      break;
    case lifecycle::StallEvent::Kind::kContinues:
      log(LogLevel::kWarn, "shard " + s.shard + " still stalled (" + s.cause + ") after " + lasted +
                               " (look " + std::to_string(s.looks) + "): " + s.detail);
      break;
    case lifecycle::StallEvent::Kind::kEnded:
      metrics_->gauge("shard.stalled", 0, MetricTags(tags, 2));
      log(LogLevel::kInfo, "shard " + s.shard + " no longer stalled (" + s.cause + ", " + lasted +
                               " since it began)");
      break;
  }
}

void Worker::Impl::report_leading() {
  const assignment::AssignmentReport r = assignment_->report();
  if (r.leading) metrics_->gauge("leader.is_leader", *r.leading ? 1 : 0, {});
}

Clock::MonoTime Worker::Impl::next_scheduler_look_locked() const {
  const Clock::MonoTime now = clock_->now();
  Clock::MonoTime next = now + config_.processing.scheduler_interval;
  // Past ones are not waited for: reconcile() drops them when their lease is held, and a
  // lease lost meanwhile leaves its entry behind, which must not make the loop spin.
  for (const auto& [shard, when] : retry_after_) {
    if (when > now) next = std::min(next, when);
  }
  return next;
}

void Worker::Impl::scheduler_loop() {
  for (;;) {
    const Clock::MonoTime next_sync = streams_->next_due();
    bool stop = false;
    std::set<std::string> sync_now;
    {
      std::unique_lock<std::mutex> lock(mu_);
      clock_->wait_until(lock, cv_, std::min(next_scheduler_look_locked(), next_sync),
                         [&] { return shutdown_requested_ || wake_; });
      wake_ = false;
      stop = shutdown_requested_;
    }
    if (stop) break;
    reconcile();
    bool relist = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sync_now = std::exchange(sync_requested_, {});  // a shard finished: its children's leases
      relist = std::exchange(refresh_streams_, false);
    }
    if (relist) streams_->list_now();
    // A worker that has just begun to run the periodic shard sync (leader-based: it became
    // the leader) syncs the streams it has not synced yet now: on a new multi-stream
    // deployment it alone creates the leases (stream_set.h).
    const bool syncs = assignment_->runs_periodic_shard_sync();
    if (syncs && !ran_periodic_sync_) streams_->sync_unsynced_soon();
    ran_periodic_sync_ = syncs;
    if (!sync_now.empty() || relist || clock_->now() >= streams_->next_due()) {
      run_shard_sync(sync_now);
      reconcile();
    }
    check_hung();
    check_stalls();
    report_leading();
  }
  graceful_stop();
}

// Stop taking -> shutdown_requested on every processor -> hand leases back -> stop threads.
void Worker::Impl::graceful_stop() {
  log(LogLevel::kInfo, "shutting down: no more leases will be taken");
  assignment_->drain();  // nothing more is taken or assigned to this worker
  stop_consumers();
  Status released = assignment_->held().release_all();
  if (!released.ok()) log(LogLevel::kWarn, "handing leases back: " + released.to_string());
  assignment_->stop();
  if (Status left = assignment_->leave(); !left.ok()) {
    log(LogLevel::kWarn, "leaving the fleet: " + left.to_string());
  }
  pool_->stop();
  if (cloudwatch_) cloudwatch_->stop();  // publishes what is left
  Status exit_status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    exit_status = fatal_;
    consumers_.clear();
  }
  log(LogLevel::kInfo, exit_status.ok() ? "stopped" : "stopped: " + exit_status.to_string());
  done_promise_.set_value(exit_status);
}

// Asks every consumer to stop (their processors' final checkpoints) and waits until they have,
// or until shutdown_timeout: a consumer that ends wakes the scheduler (ctx_.on_consumer_done),
// so this waits on that wake-up, looking at hung processors at the scheduler's interval.
void Worker::Impl::stop_consumers() {
  std::vector<std::shared_ptr<lifecycle::ShardConsumer>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, c] : consumers_) all.push_back(c);
  }
  for (auto& c : all) {
    c->request_shutdown(internals_.paced_shutdown_drain);
    pool_->schedule_now(c);
  }
  const auto deadline =
      clock_->now() + internals_.paced_shutdown_drain + config_.processing.shutdown_timeout;
  auto all_done = [&] {
    return std::all_of(all.begin(), all.end(), [](const auto& c) { return c->done(); });
  };
  while (!all_done()) {
    if (clock_->now() >= deadline) {
      log(LogLevel::kError, "shutdown: some processors did not finish within " +
                                std::to_string(config_.processing.shutdown_timeout.count()) +
                                " ms; handing their leases back anyway");
      return;
    }
    check_hung();
    std::unique_lock<std::mutex> lock(mu_);
    clock_->wait_until(lock, cv_,
                       std::min(deadline, clock_->now() + config_.processing.scheduler_interval),
                       [&] { return wake_; });
    wake_ = false;
  }
}

std::shared_future<Status> Worker::Impl::shutdown() {
  if (!started_.load()) {
    std::call_once(shutdown_once_, [&] {
      done_promise_.set_value(
          Status(StatusCode::kFailedPrecondition, "the worker was not started"));
    });
    return done_;
  }
  ready_.store(false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_requested_ = true;
  }
  cv_.notify_all();
  return done_;
}

void Worker::Impl::join_threads() {
  if (scheduler_.joinable() && scheduler_.get_id() != std::this_thread::get_id()) scheduler_.join();
}

WorkerStats Worker::Impl::stats() const {
  WorkerStats s;
  s.leases_held = assignment_ && ready_.load() ? assignment_->held().held_count() : 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.consumers = consumers_.size();
  }
  s.records_delivered = records_delivered_.load();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [shard, r] : failures_) {
      s.failing_shards.push_back(FailingShard{shard, r.cause, r.consecutive, r.delivered});
    }
  }
  s.processor_failures = processor_failures_.load();
  s.corrupt_aggregates = corrupt_aggregates_.load();
  s.records_dead_lettered = records_dead_lettered_.load();
  return s;
}

Worker::Worker(WorkerConfig config, std::shared_ptr<RecordProcessorFactory> factory,
               Dependencies deps)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(factory), std::move(deps),
                                   worker::WorkerInternals{})) {}
Worker::Worker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<Worker> worker::WorkerAccess::make(WorkerConfig config,
                                                   std::shared_ptr<RecordProcessorFactory> factory,
                                                   Dependencies deps, WorkerInternals internals) {
  return std::unique_ptr<Worker>(new Worker(std::make_unique<Worker::Impl>(
      std::move(config), std::move(factory), std::move(deps), std::move(internals))));
}
Worker::~Worker() = default;
Status Worker::start() { return impl_->start(); }
Status Worker::run() {
  KCL_RETURN_IF_ERROR(impl_->start());
  return impl_->wait();
}
Status Worker::shutdown() {
  std::shared_future<Status> done = impl_->shutdown();
  if (impl_->on_own_thread()) {
    return Status(StatusCode::kFailedPrecondition,
                  "Worker::shutdown() was called on one of the worker's own threads (a record "
                  "processor's?), which it would wait for: the shutdown was begun, not waited "
                  "for; call begin_shutdown() there");
  }
  return done.get();
}
std::shared_future<Status> Worker::begin_shutdown() { return impl_->shutdown(); }
Status Worker::wait() { return impl_->wait(); }
std::optional<Status> Worker::wait_for(std::chrono::milliseconds timeout) {
  return impl_->wait_for(timeout);
}
const std::string& Worker::worker_id() const { return impl_->worker_id(); }
void Worker::refresh_streams() { impl_->refresh_streams(); }
std::string Worker::http_url() const { return impl_->http_url(); }
WorkerStats Worker::stats() const { return impl_->stats(); }

}  // namespace kcl
