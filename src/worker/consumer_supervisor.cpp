#include "worker/consumer_supervisor.h"

#include <algorithm>
#include <cctype>

#include "base/repeat_report.h"
#include "leases/stream_identifier.h"

namespace kcl::worker {

namespace {

// The stream a shard sync is asked for when a lease's consumer ends: the stream named in a
// multi-stream lease key, "" (every stream) for a one-stream key.
std::string stream_of_lease(const std::string& lease_key) {
  Lease l;
  l.lease_key = lease_key;
  return leases::lease_stream_name(l);
}

}  // namespace

ConsumerSupervisor::ConsumerSupervisor(Options options, leases::HeldLeases& held,
                                       lifecycle::TaskPool& pool, const Clock& clock,
                                       MetricsSink& metrics, MakeConsumer make, Log log)
    : options_(options),
      held_(held),
      pool_(pool),
      clock_(clock),
      metrics_(metrics),
      make_(std::move(make)),
      log_(std::move(log)) {}

ConsumersEnded ConsumerSupervisor::reconcile(bool stopping) {
  const std::vector<Lease> held = held_.held_leases();
  const std::map<std::string, std::string> handing_off = held_.pending_handoffs();
  std::set<std::string> held_keys;
  for (const auto& l : held) held_keys.insert(l.lease_key);
  ConsumersEnded ended;
  std::vector<std::shared_ptr<lifecycle::ShardConsumer>> run;
  std::vector<std::string> handoffs_ready;
  std::size_t consumers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sweep_locked(held_keys, ended, run);
    for (const auto& [key, new_owner] : handing_off) {
      auto c = consumers_.find(key);
      if (c == consumers_.end()) {
        handoffs_ready.push_back(key);
      } else if (!c->second->shutdown_requested()) {
        // The handoff was noted while this consumer was being started from an earlier look
        // (hand_off() found no consumer then): it is asked to finish now.
        c->second->request_shutdown(options_.handoff_bound);
        run.push_back(c->second);
      }
    }
    if (!stopping && !ended.fatal) start_locked(held, handing_off, run);
    consumers = consumers_.size();
  }
  for (auto& c : run) pool_.schedule_now(c);
  complete_handoffs(handoffs_ready, handing_off);
  metrics_.gauge("worker.consumers", static_cast<double>(consumers), {});
  return ended;
}

// Running consumers go on (a lease no longer held stops its consumer: belt and braces);
// ended ones are forgotten.
void ConsumerSupervisor::sweep_locked(const std::set<std::string>& held_keys, ConsumersEnded& ended,
                                      std::vector<std::shared_ptr<lifecycle::ShardConsumer>>& run) {
  for (auto it = consumers_.begin(); it != consumers_.end();) {
    auto& c = it->second;
    if (c->done()) {
      if (c->outcome() == lifecycle::ConsumerOutcome::kFailed) awaiting_restart_[it->first] = c;
      on_ended_locked(it->first, *c, ended);
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
  // A lease no longer held (taken by another worker, handed off, deleted) takes its shard's
  // records with it: the shard is no longer this worker's, failing or not.
  const auto not_held = [&](const auto& entry) { return !held_keys.count(entry.first); };
  std::erase_if(finished_, [&](const std::string& k) { return !held_keys.count(k); });
  std::erase_if(failures_, not_held);
  std::erase_if(restart_at_, not_held);
  for (auto it = awaiting_restart_.begin(); it != awaiting_restart_.end();) {
    if (held_keys.count(it->first)) {
      ++it;
      continue;
    }
    it->second->forget_metrics();
    it = awaiting_restart_.erase(it);
  }
}

// A finished shard asks for a shard sync (its children's leases); a failed one is restarted
// after a backoff (a deleted stream stops a one-stream worker; of several streams, it asks
// for a shard sync, which deletes that stream's leases); one that ended otherwise (shard end,
// lease lost, shutdown) ends its shard's series of failures.
void ConsumerSupervisor::on_ended_locked(const std::string& shard,
                                         const lifecycle::ShardConsumer& c, ConsumersEnded& ended) {
  switch (c.outcome()) {
    case lifecycle::ConsumerOutcome::kShardFinished:
      // Ended cleanly: whatever failed before is over.
      failures_.erase(shard);
      restart_at_.erase(shard);
      finished_.insert(shard);
      ended.sync_streams.insert(stream_of_lease(shard));  // create the children's leases now
      break;
    case lifecycle::ConsumerOutcome::kFailed: {
      Status f = c.failure();
      if (f.code() == StatusCode::kNotFound && options_.multi_stream) {
        ended.sync_streams.insert(stream_of_lease(shard));  // its stream's leases go now
      } else if (f.code() == StatusCode::kNotFound && !ended.fatal) {
        ended.fatal = f;
      }
      on_failed_locked(shard, c, f);
      // Any other failure: try the shard again, but not in a tight loop.
      restart_at_[shard] = clock_.now() + options_.restart_backoff;
      break;
    }
    default:
      // Ended cleanly (its lease lost or handed off, a shutdown): not failing.
      failures_.erase(shard);
      restart_at_.erase(shard);
      break;
  }
}

// The first failure of a series is logged; then the series is reported at 3 and at each power
// of ten, with its count, instead of once per restart.
void ConsumerSupervisor::on_failed_locked(const std::string& shard,
                                          const lifecycle::ShardConsumer& c,
                                          const Status& failure) {
  const std::uint64_t delivered = c.records_delivered();
  FailureRecord& r = failures_[shard];
  const bool first = r.consecutive == 0;
  const bool same = r.consecutive > 0 && r.cause.code() == failure.code() &&
                    r.cause.message() == failure.message();
  r.consecutive = same && delivered == 0 ? r.consecutive + 1 : 1;  // progress starts a new series
  r.cause = failure;
  r.delivered += delivered;
  // A consumer that read the shard before it failed was not looping: the loop, if any, begins
  // with this failure (a change of error does not begin one).
  if (first || delivered > 0 || c.reads_answered() > 0) r.looping_since = clock_.now();
  MetricTag tag{"shard", shard};
  metrics_.count("consumer.failed", 1, MetricTags(&tag, 1));
  const int n = r.consecutive;
  if (n == 1) {
    log_(LogLevel::kError, "shard " + shard + ": the consumer stopped: " + failure.to_string() +
                               "; restarting it after a backoff");
  } else if (base::worth_reporting(static_cast<std::uint64_t>(n))) {
    log_(LogLevel::kError,
         "shard " + shard + ": the consumer failed " + std::to_string(n) +
             " times in a row with the same error (" +
             (r.delivered == 0 ? std::string("no record delivered yet")
                               : std::to_string(r.delivered) + " records delivered before") +
             "): " + failure.to_string() +
             "; still restarting it; repeats are reported at each power of ten");
  }
}

// A consumer for each held lease that has none, is not finished or being handed off, and
// whose restart after a failure is due.
void ConsumerSupervisor::start_locked(const std::vector<Lease>& held,
                                      const std::map<std::string, std::string>& handing_off,
                                      std::vector<std::shared_ptr<lifecycle::ShardConsumer>>& run) {
  for (const auto& lease : held) {
    if (consumers_.count(lease.lease_key) || finished_.count(lease.lease_key) ||
        handing_off.count(lease.lease_key)) {
      continue;
    }
    if (auto r = restart_at_.find(lease.lease_key); r != restart_at_.end()) {
      if (clock_.now() < r->second) continue;
      restart_at_.erase(r);
    }
    auto c = make_(lease);
    awaiting_restart_.erase(lease.lease_key);  // the new consumer carries the shard's series
    consumers_[lease.lease_key] = c;
    run.push_back(c);
  }
}

namespace {
constexpr std::chrono::milliseconds kHandoffRetryBase{250};
constexpr std::chrono::milliseconds kHandoffRetryMax{4000};
}  // namespace

void ConsumerSupervisor::complete_handoffs(const std::vector<std::string>& keys,
                                           const std::map<std::string, std::string>& handing_off) {
  // Handoffs no longer pending (completed by a retry, or the lease gone) leave no series.
  std::erase_if(handoff_retries_, [&](const auto& r) { return !handing_off.contains(r.first); });
  const Clock::MonoTime now = clock_.now();
  for (const std::string& key : keys) {
    auto retry = handoff_retries_.find(key);
    if (retry != handoff_retries_.end() && now < retry->second.next_try) continue;
    Status s = held_.complete_handoff(key);
    if (s.ok() || s.code() == StatusCode::kLeaseLost) {
      if (retry != handoff_retries_.end()) {
        if (s.ok()) {
          if (auto line = retry->second.series.succeeded(now)) log_(LogLevel::kInfo, *line);
        }
        handoff_retries_.erase(retry);
      }
      if (s.ok()) {
        log_(LogLevel::kInfo,
             "lease " + key + " handed off (checkpointed; the new owner starts there)");
      } else {
        log_(LogLevel::kWarn,
             "lease " + key + " lost before its handoff completed: " + s.to_string());
      }
      continue;
    }
    // Still held and still handing off: tried again after a backoff (a throttled table is
    // not asked again at every look, nor logged at every look).
    if (retry == handoff_retries_.end()) retry = handoff_retries_.try_emplace(key, key).first;
    HandoffRetry& r = retry->second;
    if (auto line = r.series.failed(s, now)) log_(LogLevel::kWarn, *line + "; trying again");
    const auto failures = static_cast<int>(std::min<std::uint64_t>(r.series.consecutive(), 8));
    r.next_try = now + std::min(kHandoffRetryMax, kHandoffRetryBase * (1 << (failures - 1)));
  }
}

Clock::MonoTime ConsumerSupervisor::next_restart(Clock::MonoTime latest) const {
  const Clock::MonoTime now = clock_.now();
  Clock::MonoTime next = latest;
  std::lock_guard<std::mutex> lock(mu_);
  // Past ones are not waited for: reconcile() drops them when their lease is held, or no
  // longer held; until then one must not make the loop spin.
  for (const auto& [shard, when] : restart_at_) {
    if (when > now) next = std::min(next, when);
  }
  return next;
}

void ConsumerSupervisor::check_hung() {
  const auto now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.now().time_since_epoch()).count();
  const auto limit =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.hung_warning).count();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, c] : consumers_) {
    const auto started = c->callback_started_ns();
    if (started != 0 && now_ns - started > limit && !c->hung_reported()) {
      c->mark_hung_reported();
      log_(LogLevel::kWarn, "the processor of shard " + key + " has been in a callback for over " +
                                std::to_string(options_.hung_warning.count()) + " ms (state " +
                                std::string(lifecycle::to_string(c->state())) +
                                "); it may be hung");
      MetricTag tag{"shard", key};
      metrics_.count("processor.hung", 1, MetricTags(&tag, 1));
    }
  }
}

std::map<std::string, std::optional<lifecycle::StallSignal>> ConsumerSupervisor::stall_signals()
    const {
  const Clock::MonoTime now = clock_.now();
  std::map<std::string, std::optional<lifecycle::StallSignal>> signals;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, c] : consumers_) {
    if (!c->done()) signals[key] = c->stall_signal(now);
  }
  // A consumer that fails, is restarted after a backoff and fails again says nothing for long
  // enough to be judged: the loop is the stall, until a consumer of the shard reads.
  for (const auto& [key, f] : failures_) {
    if (auto c = consumers_.find(key);
        c != consumers_.end() && !c->second->done() &&
        (c->second->reads_answered() > 0 || c->second->records_delivered() > 0)) {
      continue;
    }
    signals[key] = lifecycle::StallSignal{
        lifecycle::kStallConsumerFailing,
        "the consumer failed " + std::to_string(f.consecutive) +
            (f.consecutive == 1 ? " time" : " times in a row") +
            ", restarted after a backoff each time, without reading the shard: " +
            f.cause.to_string(),
        f.looping_since};
  }
  return signals;
}

std::vector<std::shared_ptr<lifecycle::ShardConsumer>> ConsumerSupervisor::stop_all(
    std::chrono::milliseconds drain) {
  std::vector<std::shared_ptr<lifecycle::ShardConsumer>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, c] : consumers_) all.push_back(c);
  }
  for (auto& c : all) {
    c->request_shutdown(drain);
    pool_.schedule_now(c);
  }
  return all;
}

void ConsumerSupervisor::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  consumers_.clear();
}

std::shared_ptr<lifecycle::ShardConsumer> ConsumerSupervisor::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = consumers_.find(key);
  return it == consumers_.end() ? nullptr : it->second;
}

void ConsumerSupervisor::lease_lost(const std::string& key) {
  if (auto c = find(key)) {
    c->notify_lease_lost();
    pool_.schedule_now(c);
  }
}

void ConsumerSupervisor::hand_off(const std::string& key, std::chrono::milliseconds bound) {
  if (auto c = find(key)) {
    c->request_shutdown(bound);
    pool_.schedule_now(c);
  }
}

std::map<std::string, std::string> ConsumerSupervisor::shard_states() const {
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

std::size_t ConsumerSupervisor::consumer_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return consumers_.size();
}

std::vector<FailingShard> ConsumerSupervisor::failing_shards() const {
  std::vector<FailingShard> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [shard, r] : failures_) {
    out.push_back(FailingShard{shard, r.cause, r.consecutive, r.delivered});
  }
  return out;
}

}  // namespace kcl::worker
