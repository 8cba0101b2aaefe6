#include "kcl/pull_consumer.h"

#include <atomic>
#include <future>
#include <mutex>
#include <utility>

#include "base/background_once.h"
#include "base/config_checks.h"
#include "pull/pull_hub.h"
#include "pull/pull_processor.h"
#include "worker/worker_access.h"

namespace kcl {

std::vector<std::string> PullConsumerConfig::validate() const {
  using std::chrono::milliseconds;
  std::vector<std::string> problems = worker.validate();
  base::check_range(problems, "max_unacked_per_shard", max_unacked_per_shard, 1, 1000000);
  base::check_range(problems, "max_unacked_bytes_per_shard", max_unacked_bytes_per_shard, 1024,
                    std::size_t{1} << 30, " bytes");
  base::check_range(problems, "checkpoint_interval", checkpoint_interval, milliseconds(10),
                    milliseconds(3600000));
  base::check_range(problems, "stuck_record_warning", stuck_record_warning, milliseconds(1000),
                    milliseconds(86400000));
  base::check_range(problems, "shutdown_ack_timeout", shutdown_ack_timeout, milliseconds(0),
                    milliseconds(3600000));
  return problems;
}

// ---- PulledRecord ----

PulledRecord::PulledRecord(std::shared_ptr<pull::PullShard> shard, std::uint64_t index,
                           Record record)
    : shard_(std::move(shard)), index_(index), record_(std::move(record)) {}
PulledRecord::PulledRecord(PulledRecord&&) noexcept = default;
PulledRecord& PulledRecord::operator=(PulledRecord&&) noexcept = default;
PulledRecord::~PulledRecord() = default;

Status PulledRecord::ack() {
  if (!shard_ || acked_) {
    return Status(StatusCode::kFailedPrecondition, "record " +
                                                       std::string(record_.sequence_number()) +
                                                       " was already acknowledged (or moved from)");
  }
  acked_ = true;
  return shard_->hub().ack(*shard_, index_);
}

Status PulledRecord::nack(std::string_view reason) {
  if (!shard_ || acked_) {
    return Status(StatusCode::kFailedPrecondition, "record " +
                                                       std::string(record_.sequence_number()) +
                                                       " was already acknowledged (or moved from)");
  }
  if (!shard_->hub().limits().dead_letter_sink) {
    return Status(StatusCode::kFailedPrecondition,
                  "nack() needs a dead-letter sink: set worker.processing.dead_letter_sink");
  }
  acked_ = true;  // settled now (or the shard is gone): not to be acknowledged again
  return shard_->hub().nack(*shard_, index_, record_, std::string(reason));
}

const std::string& PulledRecord::stream_name() const {
  static const std::string none;
  return shard_ ? shard_->stream_name() : none;
}

// ---- PullConsumer ----

namespace {

// now + timeout, or the end of time when that is too far to add (milliseconds::max()
// overflowed the clock's nanoseconds).
std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  using Steady = std::chrono::steady_clock;
  const Steady::time_point now = Steady::now();
  if (timeout <= std::chrono::milliseconds::zero()) return now;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(Steady::time_point::max() - now);
  return timeout >= left ? Steady::time_point::max() : now + timeout;
}

}  // namespace

class PullConsumer::Impl {
 public:
  Impl(PullConsumerConfig config, Dependencies deps)
      : config_(std::move(config)), deps_(std::move(deps)) {
    const Clock& clock = deps_.clock ? *deps_.clock : SystemClock::instance();
    pull::PullLimits limits;
    limits.max_unacked_per_shard = config_.max_unacked_per_shard;
    limits.max_unacked_bytes_per_shard = config_.max_unacked_bytes_per_shard;
    limits.checkpoint_interval = config_.checkpoint_interval;
    limits.stuck_record_warning = config_.stuck_record_warning;
    limits.dead_letter_sink = config_.worker.processing.dead_letter_sink;
    limits.sink_backoff_base = config_.worker.processing.failure_backoff_base;
    limits.sink_backoff_max = config_.worker.processing.failure_backoff_max;
    hub_ = std::make_shared<pull::PullHub>(limits, clock);
    if (!deps_.logger) deps_.logger = make_default_logger();
  }

  Status start() {
    std::lock_guard<std::mutex> lock(mu_);
    if (worker_)
      return Status(StatusCode::kFailedPrecondition, "the pull consumer was started already");
    std::vector<std::string> problems = config_.validate();
    if (!problems.empty()) {
      std::string message = "invalid pull consumer configuration:";
      for (const std::string& p : problems) message += "\n  - " + p;
      return Status(StatusCode::kInvalidArgument, message);
    }
    worker::WorkerInternals internals;
    internals.paced_factory = std::make_shared<pull::PullProcessorFactory>(hub_);
    internals.paced_shutdown_drain = config_.shutdown_ack_timeout;
    worker_ = worker::make_worker(config_.worker, nullptr, deps_, std::move(internals));
    Status s = worker_->start();
    if (!s.ok()) {
      worker_.reset();
    } else {
      running_.store(worker_.get());
    }
    return s;
  }

  // Before start() the hub has no shard: the caller waits until its timeout (or shutdown()),
  // as during a drain, instead of spinning.
  std::vector<PulledRecord> take(std::size_t max, std::chrono::milliseconds timeout) {
    return hub_->take(max, deadline_after(timeout));
  }

  Status shutdown() {
    std::lock_guard<std::mutex> lock(mu_);
    if (result_) return *result_;
    hub_->close();
    if (!worker_) {
      hub_->stop();  // frees callers of next()
      result_ = Status::Ok();
      return *result_;
    }
    // Each shard stops offering its records and waits up to shutdown_ack_timeout for those
    // taken, checkpoints its watermark and hands its lease back (the same path as a handoff).
    result_ = worker_->shutdown();
    hub_->stop();
    return *result_;
  }

  std::shared_future<Status> begin_shutdown() {
    return stopper_.run([this] { return shutdown(); });
  }

  // Waits for a stop begun by begin_shutdown() (the destructor's last step).
  void join_stopper() { stopper_.join(); }

  // Not under mu_, which shutdown() holds for as long as it drains: a caller waiting here
  // during a stop waits its timeout, not the whole stop.
  std::optional<Status> wait_for(std::chrono::milliseconds timeout) {
    Worker* w = running_.load();
    if (!w) return std::nullopt;
    return w->wait_for(timeout);
  }

  PullStats stats() const { return hub_->stats(); }
  const std::string& worker_id() const {
    static const std::string none;
    const Worker* w = running_.load();
    return w ? w->worker_id() : none;
  }
  std::string http_url() const {
    const Worker* w = running_.load();
    return w ? w->http_url() : std::string();
  }

 private:
  const PullConsumerConfig config_;
  Dependencies deps_;
  std::shared_ptr<pull::PullHub> hub_;
  std::mutex mu_;
  std::unique_ptr<Worker> worker_;  // guarded by mu_; kept until the consumer is destroyed
  // The worker once started, for the calls that must not wait for mu_ (set once, under mu_).
  std::atomic<Worker*> running_{nullptr};
  std::optional<Status> result_;
  base::BackgroundOnce stopper_;  // runs shutdown() for begin_shutdown()
};

PullConsumer::PullConsumer(PullConsumerConfig config, Dependencies deps)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(deps))) {}
PullConsumer::~PullConsumer() {
  (void)impl_->shutdown();
  impl_->join_stopper();
}
Status PullConsumer::start() { return impl_->start(); }
std::optional<PulledRecord> PullConsumer::next(std::chrono::milliseconds timeout) {
  std::vector<PulledRecord> one = impl_->take(1, timeout);
  if (one.empty()) return std::nullopt;
  return std::move(one.front());
}
std::vector<PulledRecord> PullConsumer::next_batch(std::size_t max,
                                                   std::chrono::milliseconds timeout) {
  return impl_->take(max, timeout);
}
Status PullConsumer::shutdown() { return impl_->shutdown(); }
std::shared_future<Status> PullConsumer::begin_shutdown() { return impl_->begin_shutdown(); }
std::optional<Status> PullConsumer::wait_for(std::chrono::milliseconds timeout) {
  return impl_->wait_for(timeout);
}
PullStats PullConsumer::stats() const { return impl_->stats(); }
const std::string& PullConsumer::worker_id() const { return impl_->worker_id(); }
std::string PullConsumer::http_url() const { return impl_->http_url(); }

}  // namespace kcl
