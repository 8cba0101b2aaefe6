// The worker (scheduler): ties lease coordination, shard sync and shard consumers together
// and stops them in order. See kcl/worker.h.
#include "kcl/worker.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "assignment/assignment_strategy.h"
#include "assignment/membership.h"
#include "aws/retry.h"
#include "base/repeat_report.h"
#include "base/status_macros.h"
#include "base/thread_name.h"
#include "leases/load_meter.h"
#include "lifecycle/shard_consumer.h"
#include "lifecycle/task_pool.h"
#include "observability/worker_endpoint.h"
#include "worker/consumer_supervisor.h"
#include "worker/health_reporter.h"
#include "worker/stream_set.h"
#include "worker/worker_access.h"
#include "worker/worker_clients.h"

namespace kcl {

namespace {

// How long a stop waits for the pool's threads once a processor is known not to return: the
// others end within it (each fetch's call is bounded by its own timeout).
constexpr std::chrono::seconds kStuckThreadsGrace{1};

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

}  // namespace

// The worker is an assembly of parts (docs/architecture.md, "The worker"): WorkerClients
// (what it talks to the world through), the assignment strategy (which leases it holds), the
// StreamSet (shard syncs), the ConsumerSupervisor (a consumer per held lease) and the
// HealthReporter (stalls, gauges, /healthz). Impl starts them in order, runs the scheduler's
// loop that looks at them, and stops them in order.
class Worker::Impl final : public leases::LeaseListener {
 public:
  Impl(WorkerConfig config, std::shared_ptr<RecordProcessorFactory> factory, Dependencies deps,
       worker::WorkerInternals internals)
      : config_(std::move(config)), factory_(std::move(factory)), internals_(std::move(internals)) {
    if (config_.leases.worker_id.empty()) config_.leases.worker_id = default_worker_id();
    logger_ = deps.logger ? deps.logger : make_default_logger();
    metrics_ = deps.metrics ? deps.metrics
                            : std::shared_ptr<MetricsSink>(std::shared_ptr<MetricsSink>{},
                                                           &NoopMetricsSink::instance());
    clock_ = deps.clock ? deps.clock : &SystemClock::instance();
    ending_.done = ending_.promise.get_future().share();
    endpoint_ = worker::make_endpoint(config_, deps.metrics, &metrics_);
  }

  ~Impl() override {
    if (started_.load()) {
      shutdown();
      ending_.done.wait();
    }
    join_threads();
    // A pool thread still in a processor's callback after the stop (it did not return within
    // shutdown_timeout) is waited for here, before any member its consumer uses is destroyed.
    if (pool_) pool_->stop();
  }

  Status start();
  // Runs `step` until it succeeds, a failure the retry policy calls final, 8 attempts or a
  // shutdown (aws/retry.h, SeriesRule::start_up).
  Status retry_at_start(const std::string& what, const std::function<Status()>& step);
  std::shared_future<Status> shutdown();
  // How the worker ended, once (later calls change nothing).
  void end_with(const Status& how);
  Status wait() {
    if (!started_.load())
      return Status(StatusCode::kFailedPrecondition, "the worker was not started");
    return ending_.done.get();
  }
  std::optional<Status> wait_for(std::chrono::milliseconds timeout) {
    if (!started_.load())
      return Status(StatusCode::kFailedPrecondition, "the worker was not started");
    if (ending_.done.wait_for(timeout) != std::future_status::ready) return std::nullopt;
    return ending_.done.get();
  }
  // True on the scheduler's thread or one of the pool's (where processors run).
  bool on_own_thread() const {
    return (pool_ && pool_->on_pool_thread()) || scheduler_id_.load() == std::this_thread::get_id();
  }
  const std::string& worker_id() const { return config_.leases.worker_id; }
  void refresh_streams() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      asked_.refresh_streams = true;
    }
    wake_scheduler();
  }
  std::string http_url() const { return endpoint_ ? endpoint_->url() : ""; }
  observability::HealthState health() const;
  WorkerStats stats() const;

  // LeaseListener: called on the lease threads; quick, no blocking on the coordinator.
  void on_lease_gained(const Lease& lease) override {
    log(LogLevel::kInfo,
        "lease " + lease.lease_key + " taken (checkpoint " + lease.checkpoint.to_string() + ")");
    wake_scheduler();
  }
  void on_lease_lost(const std::string& key, const Status& reason) override {
    log(LogLevel::kWarn, "lease " + key + " lost: " + reason.to_string());
    if (supervisor_) supervisor_->lease_lost(key);
    wake_scheduler();
  }
  // The leader moves `key` to `new_owner`: the consumer stops gracefully (its processor
  // checkpoints), then the supervisor completes the handoff.
  void on_handoff_requested(const std::string& key, const std::string& new_owner) override {
    log(LogLevel::kInfo, "lease " + key + " to be handed off to " + new_owner +
                             ": finishing the batch in progress and checkpointing");
    if (supervisor_) supervisor_->hand_off(key, assignment::handoff_finish_bound(config_.leases));
    wake_scheduler();
  }

 private:
  // Something changed that the scheduler acts on (a lease taken, lost or to hand off, a
  // consumer done): it looks now rather than at its next interval.
  void wake_scheduler() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      asked_.wake = true;
    }
    cv_.notify_all();
  }
  void log(LogLevel level, const std::string& message) const {
    if (logger_->enabled(level)) logger_->log(level, "worker " + config_.leases.worker_id, message);
  }
  std::function<void(LogLevel, const std::string&)> log_fn() {
    return [this](LogLevel level, const std::string& message) { log(level, message); };
  }
  // The steps of start(): the clients, the assignment, the endpoint, the tables, the first
  // shard sync, the consumers' parts, the threads.
  void make_assignment();
  Status start_endpoint();
  Status prepare_tables();
  Status initial_sync();
  void make_consumer_parts();
  // The scheduler's loop, and its steps.
  void scheduler_loop();
  void reconcile();
  void run_shard_sync(const std::set<std::string>& now);
  // The stream, or the configured streams, for the status page.
  std::string stream_label() const;
  void graceful_stop();
  // The shards whose consumers did not finish within the stop's bound (their processors are
  // still in a callback); empty when every one did.
  std::vector<std::string> stop_consumers();
  void join_threads();

  WorkerConfig config_;
  std::shared_ptr<RecordProcessorFactory> factory_;
  worker::WorkerInternals internals_;
  std::shared_ptr<Logger> logger_;
  std::shared_ptr<MetricsSink> metrics_;
  const Clock* clock_ = nullptr;
  worker::WorkerClients clients_;

  // Who holds which lease (leader-based or worker-takes: assignment/assignment_strategy.h),
  // with the held leases every consumer writes through, and the load they carry.
  std::unique_ptr<leases::LoadMeter> load_;
  std::unique_ptr<assignment::AssignmentStrategy> assignment_;
  std::unique_ptr<worker::StreamSet> streams_;
  bool ran_periodic_sync_ = true;  // the periodic gate at the scheduler's last look (its thread)
  std::unique_ptr<lifecycle::TaskPool> pool_;
  lifecycle::ConsumerContext ctx_;
  worker::ConsumerFigures figures_;  // what the consumers count, for stats()
  std::unique_ptr<worker::ConsumerSupervisor> supervisor_;
  std::unique_ptr<worker::HealthReporter> health_;

  std::atomic<bool> started_{false};
  std::atomic<bool> ready_{false};  // shards synced and lease threads running, not stopping
  std::thread scheduler_;
  std::atomic<std::thread::id> scheduler_id_{};  // scheduler_'s, once started

  mutable std::mutex mu_;
  std::condition_variable cv_;
  // What the scheduler is asked to do at its next look (guarded by mu_).
  struct Asked {
    bool wake = false;  // look now: see wake_scheduler()
    bool stop = false;  // shutdown() or a fatal failure
    bool refresh_streams = false;
    // Streams whose shard sync is asked for now ("" = every stream: a one-stream worker's).
    std::set<std::string> sync;
    Status fatal;  // why the worker stops on its own
  } asked_;
  // How the worker ended, once it has.
  struct Ending {
    std::once_flag once;
    std::promise<Status> promise;
    std::shared_future<Status> done;
  } ending_;
  // The HTTP endpoint (http_address); last, so it stops before what it reads goes away.
  std::unique_ptr<observability::WorkerEndpoint> endpoint_;
};

observability::HealthState Worker::Impl::health() const {
  worker::WorkerState state;
  if (ending_.done.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    state.ended = ending_.done.get();
  }
  state.ready = ready_.load();  // set once assignment_ exists
  state.report = [this] { return assignment_->report(); };
  // The reporter exists once ready_ was set; its stalls are read only then.
  return worker::worker_health(
      state, state.ready ? health_->stalled_shards() : std::vector<observability::StalledShard>{},
      clock_->now());
}

void Worker::Impl::make_assignment() {
  load_ = std::make_unique<leases::LoadMeter>(*clock_);
  assignment::AssignmentParts parts;
  parts.store = clients_.store.get();
  parts.dynamodb = clients_.dynamodb;  // empty with a given lease store: an in-memory coordination
  parts.coordination = internals_.coordination_store;
  parts.clock = clock_;
  parts.metrics = metrics_.get();
  parts.logger = logger_.get();
  parts.load = load_.get();
  parts.seed = std::random_device{}();
  assignment_ = assignment::make_assignment(config_.leases, std::move(parts));
  assignment_->held().set_listener(this);
}

std::string Worker::Impl::stream_label() const {
  if (!config_.multi_stream()) return config_.stream_name;
  std::string names;
  for (const StreamConfig& s : config_.streams) names += (names.empty() ? "" : ",") + s.name;
  return names.empty() ? "(streams from the stream tracker)" : names;
}

Status Worker::Impl::start_endpoint() {
  observability::WorkerEndpoint& endpoint = *endpoint_;
  observability::EndpointSources src;
  src.application = config_.leases.application_name;
  src.stream = stream_label();
  src.worker_id = config_.leases.worker_id;
  src.store = clients_.store;
  src.health = [this] { return health(); };
  src.shard_states = [this] {
    return supervisor_ ? supervisor_->shard_states() : std::map<std::string, std::string>{};
  };
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
  if (Status s = endpoint.start(std::move(src)); !s.ok()) return s;
  assignment_->set_status_url(endpoint.advertised());
  log(LogLevel::kInfo, "serving " + endpoint.url() + "/status and /metrics (published as " +
                           endpoint.advertised() + ")");
  if (std::string warning = endpoint.advertise_warning(); !warning.empty()) {
    log(LogLevel::kWarn, warning);
  }
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
    // Attempts 1, 3, 10, ... are reported; the last failure is the caller's to report.
    const auto attempt = static_cast<std::uint64_t>(retries.failures_in_a_row());
    if (base::worth_reporting(attempt)) {
      log(LogLevel::kWarn,
          what + " failed (attempt " + std::to_string(attempt) + "), retrying: " + s.to_string());
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (clock_->wait_for(lock, cv_, *delay, [&] { return asked_.stop; })) break;
    }
    s = step();
  }
  return s;
}

Status Worker::Impl::start() {
  if (started_.exchange(true)) {
    return Status(StatusCode::kFailedPrecondition, "the worker was already started");
  }
  if (ending_.done.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    started_.store(false);
    return Status(StatusCode::kFailedPrecondition,
                  "the worker was shut down before it was started");
  }
  auto fail = [&](Status s) {
    if (s.code() != StatusCode::kInvalidArgument) s = s.with_context("starting the worker: ");
    bool stop_asked = false;
    {
      std::lock_guard<std::mutex> lock(mu_);  // against shutdown()'s look at started_
      stop_asked = asked_.stop;
      started_.store(false);
    }
    // A shutdown asked while starting waits on how the worker ended: this failure. Without
    // one, start() may be called again.
    if (stop_asked) end_with(s);
    return s;
  };
  auto problems = config_.validate();
  if (!problems.empty()) {
    return fail(Status(StatusCode::kInvalidArgument,
                       "invalid worker configuration: " + join(problems, "; ")));
  }
  if (!factory_ && !internals_.paced_factory) {
    return fail(Status(StatusCode::kInvalidArgument, "no RecordProcessorFactory was given"));
  }
  if (Status s = worker::make_cloudwatch(config_, logger_, *clock_, clients_, &metrics_); !s.ok())
    return fail(s);
  if (Status s = worker::make_data_clients(config_, internals_, metrics_, logger_, clients_);
      !s.ok())
    return fail(s);
  make_assignment();
  if (endpoint_) {
    if (Status s = start_endpoint(); !s.ok()) return fail(s);
  }
  if (Status s = prepare_tables(); !s.ok()) return fail(s);
  if (Status s = initial_sync(); !s.ok()) return fail(s);
  if (config_.retrieval.mode == RetrievalMode::kFanOut && !internals_.records_source_factory) {
    if (Status s =
            worker::make_fanout_sources(config_, *streams_, metrics_, *clock_, log_fn(), clients_);
        !s.ok())
      return fail(s);
  }
  make_consumer_parts();
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
                                [&] { return clients_.store->create_table_if_not_exists(); });
      !s.ok()) {
    return s.with_context("preparing lease table " + config_.leases.effective_table_name() + ": ");
  }
  return retry_at_start("preparing the lease assignment's table",
                        [&] { return assignment_->prepare(); });
}

Status Worker::Impl::initial_sync() {
  streams_ = std::make_unique<worker::StreamSet>(config_, *clients_.kinesis, *clients_.store,
                                                 *metrics_, *clock_, log_fn());
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

// The pool the consumers run on, what each consumer is given, the supervisor that makes
// them and the health reporter that watches them.
void Worker::Impl::make_consumer_parts() {
  pool_ = std::make_unique<lifecycle::TaskPool>(config_.processing.thread_pool_size, *clock_,
                                                "kcl-shard-task");
  ctx_.runtime = {pool_.get(), clock_, logger_.get(), metrics_.get(), [this] { wake_scheduler(); }};
  ctx_.leases = {clients_.store.get(), &assignment_->held(), load_.get()};
  ctx_.reading.stream = config_.stream_name;
  ctx_.reading.initial_position_of = [streams = streams_.get()](const std::string& stream) {
    return streams->initial_position_of(stream);
  };
  ctx_.reading.mode = config_.retrieval.mode;
  ctx_.reading.drop_aggregates_outside_shard = config_.retrieval.drop_aggregates_outside_shard;
  ctx_.reading.make_source = internals_.records_source_factory;
  if (!ctx_.reading.make_source) {
    ctx_.reading.make_source =
        config_.retrieval.mode == RetrievalMode::kFanOut
            ? clients_.fanout
            : lifecycle::polling_sources(*clients_.kinesis, config_.retrieval, *clock_);
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
          figures_.records_delivered, figures_.processor_failures, figures_.corrupt_aggregates,
          figures_.records_dead_lettered});
  worker::ConsumerSupervisor::Options options;
  options.multi_stream = config_.multi_stream();
  options.restart_backoff = std::min<std::chrono::milliseconds>(
      config_.processing.failure_backoff_max, std::chrono::seconds(5));
  options.hung_warning = config_.processing.hung_processor_warning;
  options.handoff_bound = assignment::handoff_finish_bound(config_.leases);
  supervisor_ = std::make_unique<worker::ConsumerSupervisor>(
      options, assignment_->held(), *pool_, *clock_, *metrics_,
      [this](const Lease& lease) {
        return std::make_shared<lifecycle::ShardConsumer>(ctx_, lease);
      },
      log_fn());
  health_ = std::make_unique<worker::HealthReporter>(config_.processing.stall_threshold, *metrics_,
                                                     *clock_, log_fn());
}

// The streams' shard syncs that are due, and those of `now` at once. A one-stream worker whose
// stream was deleted stops.
void Worker::Impl::run_shard_sync(const std::set<std::string>& now) {
  auto r = streams_->tick(now);
  if (!r.ok()) {
    log(LogLevel::kWarn, "shard sync: " + r.status().to_string());
    std::lock_guard<std::mutex> lock(mu_);
    if (asked_.fatal.ok())
      asked_.fatal = r.status().with_context("stream " + config_.stream_name + ": ");
    asked_.stop = true;
    return;
  }
  if (r->changed()) {
    assignment_->leases_changed();
    log(LogLevel::kInfo, "shard sync: " + std::to_string(r->leases_created) + " leases created, " +
                             std::to_string(r->leases_deleted) + " deleted");
  }
}

// One look of the supervisor; what ended asks for shard syncs, or stops a worker whose one
// stream is gone.
void Worker::Impl::reconcile() {
  bool stopping;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping = asked_.stop;
  }
  worker::ConsumersEnded ended = supervisor_->reconcile(stopping);
  if (ended.sync_streams.empty() && !ended.fatal) return;
  std::lock_guard<std::mutex> lock(mu_);
  asked_.sync.insert(ended.sync_streams.begin(), ended.sync_streams.end());
  if (ended.fatal && asked_.fatal.ok()) {
    asked_.fatal = *ended.fatal;
    asked_.stop = true;
  }
}

void Worker::Impl::scheduler_loop() {
  for (;;) {
    const Clock::MonoTime next_sync = streams_->next_due();
    const Clock::MonoTime next_look = supervisor_->next_restart(
        std::min(next_sync, clock_->now() + config_.processing.scheduler_interval));
    {
      std::unique_lock<std::mutex> lock(mu_);
      clock_->wait_until(lock, cv_, next_look, [&] { return asked_.stop || asked_.wake; });
      asked_.wake = false;
      if (asked_.stop) break;
    }
    reconcile();
    std::set<std::string> sync_now;
    bool relist = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sync_now = std::exchange(asked_.sync, {});  // a shard finished: its children's leases
      relist = std::exchange(asked_.refresh_streams, false);
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
    supervisor_->check_hung();
    const assignment::AssignmentReport report = assignment_->report();
    if (health_->judges_stalls()) health_->look(supervisor_->stall_signals(), report.unheld);
    health_->report_leading(report);
  }
  graceful_stop();
}

// Stop taking -> shutdown_requested on every processor -> hand leases back -> stop threads.
void Worker::Impl::graceful_stop() {
  log(LogLevel::kInfo, "shutting down: no more leases will be taken");
  assignment_->drain();  // nothing more is taken or assigned to this worker
  const std::vector<std::string> stuck = stop_consumers();
  Status released = assignment_->release_all();
  if (!released.ok()) log(LogLevel::kWarn, "handing leases back: " + released.to_string());
  assignment_->stop();
  if (Status left = assignment_->leave(); !left.ok()) {
    log(LogLevel::kWarn, "leaving the fleet: " + left.to_string());
  }
  // A processor that never returns keeps its pool thread: the stop ends without it (the
  // Worker's destructor waits for it), rather than never.
  bool threads_ended = true;
  if (stuck.empty()) {
    pool_->stop();
  } else {
    threads_ended = pool_->stop_within(clock_->now() + kStuckThreadsGrace);
  }
  if (clients_.cloudwatch) clients_.cloudwatch->stop();  // publishes what is left
  supervisor_->clear();
  Status exit_status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    exit_status = asked_.fatal;
  }
  if (exit_status.ok() && !stuck.empty()) {
    exit_status = Status(
        StatusCode::kDeadlineExceeded,
        "the consumers of " + join(stuck, ", ") + " did not finish within shutdown_timeout (" +
            std::to_string(config_.processing.shutdown_timeout.count()) +
            " ms: a processor callback that did not return, or a consumer waiting for a thread "
            "such a callback holds); their leases were handed back" +
            (threads_ended ? ""
                           : "; a thread of the worker's pool is still busy (in that callback "
                             "or a call), and the Worker's destructor waits for it"));
  }
  log(LogLevel::kInfo, exit_status.ok() ? "stopped" : "stopped: " + exit_status.to_string());
  end_with(exit_status);
}

void Worker::Impl::end_with(const Status& how) {
  std::call_once(ending_.once, [&] { ending_.promise.set_value(how); });
}

// Asks every consumer to stop (their processors' final checkpoints) and waits until they have,
// or until shutdown_timeout: a consumer that ends wakes the scheduler
// (ctx_.runtime.on_consumer_done), so this waits on that wake-up, looking at hung processors at the
// scheduler's interval.
std::vector<std::string> Worker::Impl::stop_consumers() {
  const auto all = supervisor_->stop_all(internals_.paced_shutdown_drain);
  const auto deadline =
      clock_->now() + internals_.paced_shutdown_drain + config_.processing.shutdown_timeout;
  auto all_done = [&] {
    return std::all_of(all.begin(), all.end(), [](const auto& c) { return c->done(); });
  };
  while (!all_done()) {
    if (clock_->now() >= deadline) {
      std::vector<std::string> stuck;
      for (const auto& c : all) {
        if (!c->done()) stuck.push_back(c->lease_key());
      }
      log(LogLevel::kError, "shutdown: the consumers of " + join(stuck, ", ") +
                                " did not finish within " +
                                std::to_string(config_.processing.shutdown_timeout.count()) +
                                " ms; handing their leases back anyway");
      return stuck;
    }
    supervisor_->check_hung();
    std::unique_lock<std::mutex> lock(mu_);
    clock_->wait_until(lock, cv_,
                       std::min(deadline, clock_->now() + config_.processing.scheduler_interval),
                       [&] { return asked_.wake; });
    asked_.wake = false;
  }
  return {};
}

std::shared_future<Status> Worker::Impl::shutdown() {
  bool started = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    started = started_.load();
    if (started) asked_.stop = true;
  }
  if (!started) {
    end_with(Status(StatusCode::kFailedPrecondition, "the worker was not started"));
    return ending_.done;
  }
  ready_.store(false);
  cv_.notify_all();
  return ending_.done;
}

void Worker::Impl::join_threads() {
  if (scheduler_.joinable() && scheduler_.get_id() != std::this_thread::get_id()) scheduler_.join();
}

WorkerStats Worker::Impl::stats() const {
  WorkerStats s;
  s.leases_held = assignment_ && ready_.load() ? assignment_->held().held_count() : 0;
  if (supervisor_) {
    s.consumers = supervisor_->consumer_count();
    s.failing_shards = supervisor_->failing_shards();
  }
  s.records_delivered = figures_.records_delivered.load();
  s.processor_failures = figures_.processor_failures.load();
  s.corrupt_aggregates = figures_.corrupt_aggregates.load();
  s.records_dead_lettered = figures_.records_dead_lettered.load();
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
