#include "kcl/producer.h"

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <variant>

#include "aws/json_text.h"
#include "aws/retry.h"
#include "base/background_once.h"
#include "base/cache_prefetch.h"
#include "base/failure_series.h"
#include "base/status_macros.h"
#include "base/text_length.h"
#include "base/thread_name.h"
#include "kinesis/put_records_request.h"
#include "producer/kpl_aggregator.h"
#include "producer/producer_access.h"
#include "producer/put_planner.h"
#include "producer/shard_map.h"

namespace kcl {

using producer::kMaxRecordBytes;

namespace {
// The producer whose request thread this is (put() callbacks run on it).
thread_local const void* current_producer = nullptr;
// The most items of answered records kept for new records.
constexpr std::size_t kMaxSpareItems = 10000;

// kInvalidArgument listing every problem of `config`; OK when it is valid.
Status check_config(const ProducerConfig& config) {
  auto problems = config.validate();
  if (problems.empty()) return Status::Ok();
  std::string msg = "invalid producer configuration:";
  for (const auto& p : problems) msg += "\n  - " + p;
  return Status(StatusCode::kInvalidArgument, msg);
}
}  // namespace

std::vector<std::string> ProducerConfig::validate() const {
  std::vector<std::string> p;
  if (stream_name.empty()) p.push_back("stream_name is required");
  if (linger < std::chrono::milliseconds(0) || linger > std::chrono::minutes(1)) {
    p.push_back("linger must be between 0 and 60 s");
  }
  if (max_buffered_records < 1) p.push_back("max_buffered_records must be at least 1");
  if (max_buffered_bytes < kMaxRecordBytes)
    p.push_back("max_buffered_bytes must be at least 1 MiB");
  if (aggregation_max_bytes < 256 || aggregation_max_bytes > kMaxRecordBytes) {
    p.push_back("aggregation_max_bytes must be between 256 and 1048576");
  }
  if (max_attempts < 1 || max_attempts > 100) p.push_back("max_attempts must be between 1 and 100");
  if (max_concurrent_requests < 1 || max_concurrent_requests > 64) {
    p.push_back("max_concurrent_requests must be between 1 and 64");
  }
  if (max_in_flight_per_shard < 1 || max_in_flight_per_shard > 16) {
    p.push_back("max_in_flight_per_shard must be between 1 and 16");
  }
  if (shard_bytes_per_second < 0) p.push_back("shard_bytes_per_second must not be negative");
  if (shard_records_per_second < 0) p.push_back("shard_records_per_second must not be negative");
  if (arrival_jitter < std::chrono::milliseconds(0) || arrival_jitter > std::chrono::seconds(10)) {
    p.push_back("arrival_jitter must be between 0 and 10 s");
  }
  if (close_timeout < std::chrono::milliseconds(0) || close_timeout > std::chrono::hours(1)) {
    p.push_back("close_timeout must be between 0 and 1 h");
  }
  for (std::string& problem : aws.validate()) p.push_back(std::move(problem));
  return p;
}

using producer::kPrefetchAhead;
using producer::prefetch_data;
using producer::prefetch_item;

// The dispatcher: the lock, the buffer's bounds and the request threads. A request thread
// makes a call, hands the answer to the planner and answers the records outside the lock;
// between calls one idle request thread at a time plans (asks the planner for the next call
// and when to look again, and waits for that time) and sends the call it takes itself, the
// others wait until the planning is free or a look is asked for: a call due is never handed
// from one thread to another. What to send is the planner's (producer/put_planner.h).
class Producer::Impl {
 public:
  Impl(ProducerConfig config, std::shared_ptr<kinesis::KinesisClient> client,
       const Dependencies& deps)
      : config_(std::move(config)),
        client_(std::move(client)),
        clock_(deps.clock ? *deps.clock : SystemClock::instance()),
        metrics_(deps.metrics),
        logger_(deps.logger ? deps.logger : make_default_logger()),
        own_policy_(client_->retry_policy() ? nullptr
                                            : std::make_unique<aws::RetryPolicy>(RetryConfig{})),
        policy_(client_->retry_policy() ? *client_->retry_policy() : *own_policy_),
        call_failures_("PutRecords to stream '" + config_.stream_name + "'"),
        planner_(config_, policy_) {}

  ~Impl() {
    (void)shutdown();
    ending_.stopper.join();
  }

  // Validates the configuration, reads the shard map and starts the threads.
  Status start() {
    KCL_RETURN_IF_ERROR(check_config(config_));
    Status s = refresh_shard_map();
    if (!s.ok()) {
      return Status(s.code(), "kcl::Producer: cannot list the shards of stream '" +
                                  config_.stream_name + "': " + s.message());
    }
    refreshes_ = 0;
    for (int i = 0; i < config_.max_concurrent_requests; ++i) {
      requesters_.push_back(base::named_thread("kcl-put-call", [this] { request_loop(); }));
    }
    return Status::Ok();
  }

  // Refuses new records, sends what is buffered for at most close_timeout, fails the rest
  // with kCancelled and stops the threads; once (later calls return the first's result).
  Status shutdown() {
    if (on_own_thread()) {
      (void)begin_shutdown();
      return Status(StatusCode::kFailedPrecondition,
                    "Producer::shutdown() was called on one of the producer's own threads (a "
                    "put() callback?), which it would wait for: the stop was begun, not waited "
                    "for; call begin_shutdown() there");
    }
    std::lock_guard<std::mutex> once(ending_.mu);
    if (ending_.result) return *ending_.result;
    {
      std::lock_guard<std::mutex> lock(mu_);
      plan_state_.closing = true;
    }
    space_cv_.notify_all();  // put() calls waiting for room give up
    const Status flushed = requesters_.empty() ? Status::Ok() : flush(config_.close_timeout);
    stop_threads();
    const std::size_t cancelled = cancel_left(flushed);
    ending_.result = cancelled == 0
                         ? Status::Ok()
                         : Status(StatusCode::kDeadlineExceeded,
                                  "kcl::Producer shutdown: " + std::to_string(cancelled) +
                                      " records were not sent within close_timeout (" +
                                      std::to_string(config_.close_timeout.count()) +
                                      " ms) and failed with kCancelled");
    return *ending_.result;
  }

  std::shared_future<Status> begin_shutdown() {
    return ending_.stopper.run([this] { return shutdown(); });
  }

  // Queues one record, to be answered through one of `cb`, `record_cb` or `promise`.
  void put(std::string pk, std::string data, std::string ehk, PutCallback cb,
           PutRecordCallback record_cb, std::promise<Result<PutResult>>* promise) {
    Item staged;  // moved into a kept item under the lock
    if (record_cb) {
      staged.answer.emplace<PutRecordCallback>(std::move(record_cb));
    } else if (cb) {
      staged.answer.emplace<PutCallback>(std::move(cb));
    } else if (promise != nullptr) {
      staged.answer.emplace<std::promise<Result<PutResult>>>(std::move(*promise));
    }
    Status checked = fill(staged, std::move(pk), std::move(data), std::move(ehk));
    if (!checked.ok()) return resolve(staged, std::move(checked));
    enqueue(staged);
  }

  Status flush(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    ++plan_state_.flushing;
    const Look look = ask_look();
    lock.unlock();
    notify(look);
    lock.lock();
    const bool done = clock_.wait_for(lock, done_cv_, timeout,
                                      [&] { return buffered_.records == 0 || plan_state_.stop; });
    --plan_state_.flushing;
    if (done && buffered_.records == 0) return Status::Ok();
    return Status(StatusCode::kDeadlineExceeded,
                  "kcl::Producer flush: " + std::to_string(buffered_.records) +
                      " records still buffered after " + std::to_string(timeout.count()) + " ms");
  }

  ProducerStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    ProducerStats s = stats_;
    const producer::PutPlanner::Counts& planned = planner_.counts();
    s.records_succeeded += planned.records_succeeded;
    s.records_failed += planned.records_failed;
    s.records_retried += planned.records_retried;
    s.throttled += planned.throttled;
    s.buffered_records = buffered_.records;
    s.buffered_bytes = buffered_.bytes;
    s.in_flight_calls = in_flight_calls_;
    s.shard_map_refreshes = refreshes_;
    return s;
  }

 private:
  using Item = producer::PutItem;
  using Call = producer::PlannedCall;
  using Entry = producer::PlannedEntry;
  using Done = producer::PutPlanner::Done;
  // What one finished call did to its records (for the metrics).
  using CallCounts = producer::PutPlanner::Settled;

  static void resolve(Item& item, Result<PutResult> result) {
    if (auto* record_cb = std::get_if<PutRecordCallback>(&item.answer)) {
      (*record_cb)(std::move(result),
                   UserRecord{std::move(item.pk), std::move(item.data), std::move(item.ehk)});
    } else if (auto* cb = std::get_if<PutCallback>(&item.answer)) {
      (*cb)(std::move(result));
    } else if (auto* promise = std::get_if<std::promise<Result<PutResult>>>(&item.answer)) {
      promise->set_value(std::move(result));
    }
  }

  // Checks a record and fills `item` with it and its hash key; kInvalidArgument when Kinesis
  // would refuse it.
  static Status fill(Item& item, std::string pk, std::string data, std::string ehk) {
    // The item holds the record first, so that a refused one is handed back whole.
    item.pk = std::move(pk);
    item.data = std::move(data);
    item.ehk = std::move(ehk);
    item.bytes = item.pk.size() + item.data.size();
    // Characters (UTF-16, as AWS counts them), not bytes: 100 CJK characters are 300 bytes.
    if (const std::size_t chars = base::utf16_length(item.pk); chars == 0 || chars > 256) {
      return Status(StatusCode::kInvalidArgument,
                    "partition key must be 1 to 256 characters, got " + std::to_string(chars));
    }
    if (item.bytes > kMaxRecordBytes) {
      return Status(StatusCode::kInvalidArgument,
                    "record is " + std::to_string(item.bytes) +
                        " bytes with its partition key; at most 1 MiB");
    }
    if (!aws::is_valid_utf8(item.pk)) {
      return Status(StatusCode::kInvalidArgument, "partition key is not valid UTF-8");
    }
    if (!item.ehk.empty()) {
      auto h = producer::parse_hash_key(item.ehk);
      if (!h) {
        return Status(StatusCode::kInvalidArgument, "explicit hash key '" + item.ehk.substr(0, 64) +
                                                        "' is not a decimal below 2^128");
      }
      item.hash = *h;
      // The same id as a record of this key without one (the ordering of a key holds
      // whichever way its records name their shard).
      item.key_id = static_cast<std::uint64_t>(producer::partition_key_hash(item.pk));
    } else {
      item.hash = producer::partition_key_hash(item.pk);
      item.key_id = static_cast<std::uint64_t>(item.hash);
    }
    return Status::Ok();
  }

  // Queues a checked record on its shard's queue and asks for a look at the plan when it is
  // due sooner than the planning thread's next look or completes a call. A full buffer waits
  // for room (block_when_full) or resolves the record kUnavailable; closing resolves it
  // kCancelled.
  void enqueue(Item& staged) {
    std::unique_lock<std::mutex> lock(mu_);
    if (plan_state_.closing) {
      lock.unlock();
      return resolve(staged, Status(StatusCode::kCancelled,
                                    "kcl::Producer was shut down; the record was not sent"));
    }
    auto full = [&] {
      return buffered_.records + 1 > config_.max_buffered_records ||
             buffered_.bytes + staged.bytes > config_.max_buffered_bytes;
    };
    if (full()) {
      if (!config_.block_when_full) {
        lock.unlock();
        return resolve(
            staged,
            Status(StatusCode::kUnavailable,
                   "kcl::Producer buffer full (" + std::to_string(config_.max_buffered_records) +
                       " records / " + std::to_string(config_.max_buffered_bytes) + " bytes)"));
      }
      // Nothing more can join the buffered records until some are answered: the planning
      // need not wait for a linger to fill its calls. It is asked to look again only when that
      // makes a call due or its next look sooner (with a backlog waiting for its tokens,
      // neither: the look would find what it planned).
      ++buffered_.waiting_putters;
      if (buffered_.waiting_putters == 1 && !plan_state_.wake && look_for_waiting_putters()) {
        const Look look = ask_look();
        lock.unlock();
        notify(look);
        lock.lock();
      }
      // A put() from a callback runs on a request thread, which answers the records that free
      // the room it would wait for: it does not wait (the buffer may then hold more than its
      // bounds by what callbacks put while a call is answered).
      if (!on_own_thread()) {
        space_cv_.wait(lock, [&] { return plan_state_.stop || plan_state_.closing || !full(); });
      }
      --buffered_.waiting_putters;
      if (plan_state_.stop || plan_state_.closing) {
        lock.unlock();
        return resolve(staged, Status(StatusCode::kCancelled, "kcl::Producer is closing"));
      }
    }
    std::unique_ptr<Item> item = spare_item();
    *item = std::move(staged);
    ++stats_.records_put;
    ++buffered_.records;
    buffered_.bytes += item->bytes;
    const auto added = planner_.add(std::move(item), clock_.now());
    // The planning thread plans its wake-up from each shard's first record and the queued
    // totals: it needs waking only for a record that is its shard's first and due sooner, or
    // one that fills a call. (Behind a shard's first record, or once a call's worth waits for
    // its tokens, more records change nothing it plans; a finished call's thread plans
    // itself.) With nobody planning (next_wake is max) an idle request thread is woken.
    const bool wake_planner =
        !plan_state_.wake &&
        ((added.first_of_shard && added.deadline < plan_state_.next_wake) || added.fills_call);
    const Look look = wake_planner ? ask_look() : Look::kNone;
    // The item the next record will fill, last written by a request thread: its lines come
    // while the next put() checks and hashes its record.
    if (!spare_items_.empty()) base::prefetch_object(spare_items_.back().get(), /*for_write=*/true);
    lock.unlock();
    notify(look);  // after the lock: woken under it, the thread would wait for it
  }

  bool on_own_thread() const { return current_producer == this; }

  // Requires mu_. An item for a new record: one an answered record left (keep_spares()),
  // else a new one.
  std::unique_ptr<Item> spare_item() {
    if (spare_items_.empty()) return std::make_unique<Item>();
    std::unique_ptr<Item> item = std::move(spare_items_.back());
    spare_items_.pop_back();
    return item;
  }

  // Without mu_: empties the items of answered records (their records were handed out;
  // whatever is left of one goes, so a large record's bytes are not kept).
  static void scrub(std::vector<std::unique_ptr<Item>>& answered) {
    for (auto& item : answered) {
      std::string().swap(item->data);
      std::string().swap(item->pk);
      std::string().swap(item->ehk);
      item->answer.emplace<std::monostate>();
      item->attempts = 0;
    }
  }

  // Requires mu_. Keeps scrubbed items for spare_item(), up to a buffer's worth (the rest
  // stay in `answered`, to be freed after the lock): once the producer runs, a record costs
  // no allocation of its own.
  void keep_spares(std::vector<std::unique_ptr<Item>>& answered) {
    const std::size_t keep = std::min<std::size_t>(config_.max_buffered_records, kMaxSpareItems);
    while (!answered.empty() && spare_items_.size() < keep) {
      spare_items_.push_back(std::move(answered.back()));
      answered.pop_back();
    }
  }

  void stop_threads() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      plan_state_.stop = true;
    }
    cv_.notify_all();
    space_cv_.notify_all();
    request_cv_.notify_all();
    for (auto& t : requesters_) t.join();
    requesters_.clear();
  }

  // After the threads stopped: fails every record still queued with kCancelled; returns how
  // many there were.
  std::size_t cancel_left(const Status& flushed) {
    std::vector<std::unique_ptr<Item>> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left = planner_.drain();
    }
    const Status cancelled(StatusCode::kCancelled,
                           "kcl::Producer closed before the record was sent (" +
                               (flushed.ok() ? std::string("closing") : flushed.message()) + ")");
    std::size_t bytes = 0;
    for (auto& item : left) {
      bytes += item->bytes;
      resolve(*item, cancelled);
    }
    std::lock_guard<std::mutex> lock(mu_);
    buffered_.records -= std::min(buffered_.records, left.size());
    buffered_.bytes -= std::min(buffered_.bytes, bytes);
    stats_.records_failed += left.size();
    return left.size();
  }

  // Without mu_ held: calls ListShards, then installs the map and moves queued records of
  // shards no longer open.
  Status refresh_shard_map() {
    auto shards = client_->list_shards(config_.stream_name);
    if (!shards.ok()) return shards.status();
    auto map = producer::ShardMap::from_shards(*shards);
    if (!map.ok()) return map.status();
    std::uint64_t resent = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      planner_.set_map(std::move(*map), clock_.now());
      ++refreshes_;
      resent = std::exchange(aggregates_resent_, 0);
    }
    if (resent > 0) {
      logger_->log(LogLevel::kInfo, "producer",
                   "the stream's shards changed (a split or a merge): shard map read again; " +
                       std::to_string(resent) +
                       " KPL aggregate(s) written to another shard than the old map said are "
                       "sent again (a consumer following the Java KCL drops such an aggregate)");
    }
    return Status::Ok();
  }

  // Without mu_ (the call's records belong to it while it is in flight): its request body.
  kinesis::PutRecordsRequest request_of(const Call& call) const {
    kinesis::PutRecordsRequest request(config_.stream_name, client_->wire());
    request.reserve(call.entries.size(), call.bytes);
    request.keep_positions(config_.report_positions);
    for (const Entry& e : call.entries) {
      prefetch_item(call.items, e.first + 2 * kPrefetchAhead);
      prefetch_data(call.items, e.first + kPrefetchAhead);
      const Item& first = *call.items[e.first];
      if (e.aggregated()) {
        request.add(e.aggregate, first.pk, producer::hash_key_to_string(first.hash));
      } else {
        request.add(first.data, first.pk, first.ehk);
      }
    }
    return request;
  }

  // Whom a look at the plan is asked of: nobody, the planning thread (waiting on cv_ for its
  // next look), or an idle request thread (nobody plans: one takes the planning).
  enum class Look { kNone, kPlanner, kIdle };

  // Requires mu_. Asks for a look at the plan sooner than the planning thread's next one;
  // notify() the answer after the lock is let go.
  Look ask_look() {
    plan_state_.wake = true;
    return plan_state_.planning ? Look::kPlanner : Look::kIdle;
  }

  // Without mu_: wakes whom ask_look() named.
  void notify(Look look) {
    if (look == Look::kPlanner) cv_.notify_all();
    if (look == Look::kIdle) request_cv_.notify_one();
  }

  // Requires mu_. Whether a look at `wake` (the planner's next, just computed) must be asked
  // for: it is sooner than the planning thread's next look, or nobody plans (next_wake is
  // max) and the planner has a time to watch (not its hour of nothing to do).
  bool look_needed(Clock::MonoTime wake) const {
    return wake < plan_state_.next_wake && wake < clock_.now() + std::chrono::minutes(59);
  }

  // Requires mu_. Every permitted call is in flight (a finished call's thread plans next).
  bool calls_full() const {
    return in_flight_calls_ >= static_cast<std::size_t>(config_.max_concurrent_requests);
  }

  // Requires mu_. How urgent the queued records are: a flush or a stop sends what there is, and
  // so does a put() waiting for room.
  producer::PutPlanner::Urgency urgency() const {
    return {plan_state_.flushing > 0 || plan_state_.stop, buffered_.waiting_putters > 0};
  }

  // Requires mu_, put() about to wait for room (waiting_putters counted). Whether the planner
  // would now make a call or look again sooner than the planning thread will.
  bool look_for_waiting_putters() {
    if (calls_full()) return false;
    const auto now = clock_.now();
    Clock::MonoTime wake = now + std::chrono::hours(1);
    return planner_.call_due(now, urgency(), wake) || look_needed(wake);
  }

  // Requires mu_. The call due now, taken out of the planner and counted as in flight (the
  // thread that takes it sends it); nothing when none is due or every permitted call is in
  // flight. `wake`: when the planner wants to look again (in an hour when it was not asked).
  std::optional<Call> take_due_call(Clock::MonoTime& wake) {
    const auto now = clock_.now();
    wake = now + std::chrono::hours(1);
    if (calls_full()) return std::nullopt;
    auto next = planner_.next_call(now, urgency());
    wake = next.wake;
    if (next.call.empty()) return std::nullopt;
    ++in_flight_calls_;
    ++stats_.put_records_calls;
    stats_.kinesis_records_sent += next.call.entries.size();
    return std::move(next.call);
  }

  // Requires mu_ (held through `lock`). The next call for this idle request thread; nothing
  // once the producer stops. When nobody plans, this thread does: it refreshes the shard map
  // when asked, takes the call due, or waits for the planner's next look (or one asked for);
  // leaving with a call, it wakes an idle thread to plan only when the planner has a time
  // to watch. Otherwise it waits until the planning is free.
  std::optional<Call> wait_for_call(std::unique_lock<std::mutex>& lock) {
    for (;;) {
      if (plan_state_.stop) return std::nullopt;
      if (plan_state_.planning) {
        ++idle_threads_;
        request_cv_.wait(lock, [&] { return plan_state_.stop || !plan_state_.planning; });
        --idle_threads_;
        continue;
      }
      plan_state_.planning = true;
      plan_state_.next_wake = Clock::MonoTime::min();  // planning now: it sees every record
      plan_state_.wake = false;
      std::optional<Call> call;
      Clock::MonoTime wake = Clock::MonoTime::max();
      if (plan_state_.refresh_needed) {
        plan_state_.refresh_needed = false;
        lock.unlock();
        // On failure the old map stays (the next surprise asks again), said once per series.
        const Status refreshed = refresh_shard_map();
        if (auto line = refreshed.ok() ? refresh_failures_.succeeded(clock_.now())
                                       : refresh_failures_.failed(refreshed, clock_.now())) {
          logger_->log(refreshed.ok() ? LogLevel::kInfo : LogLevel::kWarn, "producer", *line);
        }
        lock.lock();
      } else if (!(call = take_due_call(wake))) {
        plan_state_.next_wake = wake;
        clock_.wait_until(lock, cv_, wake, [&] { return plan_state_.stop || plan_state_.wake; });
      }
      plan_state_.planning = false;
      plan_state_.next_wake = Clock::MonoTime::max();  // nobody plans
      if (!call) continue;
      const bool watch = look_needed(wake) && idle_threads_ > 0;
      if (watch) plan_state_.wake = true;
      lock.unlock();
      if (watch) request_cv_.notify_one();
      lock.lock();
      return call;
    }
  }

  // A request thread: makes a call, answers its records, and then, when the next call is due
  // already, takes it itself; else it plans (or waits, when another thread plans).
  void request_loop() {
    current_producer = this;
    Done done;  // these two are kept from call to call (their capacity)
    std::vector<std::unique_ptr<Item>> answered;
    std::optional<Call> next;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!next && !(next = wait_for_call(lock))) return;
      Call call = std::move(*next);
      next.reset();
      lock.unlock();
      answered.clear();  // the items the last call left beyond the spares kept
      const Answered a = send_and_answer(call, done, answered);
      call = Call{};
      lock.lock();
      keep_spares(answered);
      buffered_.records -= a.records;
      buffered_.bytes -= a.bytes;
      // Without a call of its own this thread plans next (wait_for_call) unless another one
      // does: that one is woken when the planner's next look is sooner than its own. With a
      // call (or a refresh to make), an idle thread is asked to plan when there is a time to
      // watch.
      Look look = Look::kNone;
      if (!plan_state_.stop && plan_state_.refresh_needed) {
        if (plan_state_.planning) look = ask_look();
      } else if (!plan_state_.stop) {
        Clock::MonoTime wake{};
        next = take_due_call(wake);
        if ((next || plan_state_.planning) && look_needed(wake) && !plan_state_.wake) {
          look = ask_look();
        }
      }
      // The putters and flush() are woken after the lock is let go: woken under it, each
      // would only block on it (two more context switches each).
      lock.unlock();
      space_cv_.notify_all();
      done_cv_.notify_all();
      notify(look);
      lock.lock();
    }
  }

  // What a call's answer resolved: records and their bytes.
  struct Answered {
    std::size_t records = 0;
    std::size_t bytes = 0;
  };

  // Without mu_ (takes it to settle the call with the planner): sends `call`, settles its
  // answer and answers its records; their items end in `answered`, scrubbed.
  Answered send_and_answer(Call& call, Done& done, std::vector<std::unique_ptr<Item>>& answered) {
    aws::CallOptions options;
    options.max_attempts = 1;
    const auto sent_at = clock_.now();
    auto result = client_->put_records(request_of(call), options);
    report_call(result, clock_.now() - sent_at);
    CallCounts counts;
    {
      std::lock_guard<std::mutex> lock(mu_);
      counts = planner_.on_result(call, result, clock_.now(), done);
      if (counts.refresh_needed) plan_state_.refresh_needed = true;
      aggregates_resent_ += counts.aggregates_resent;
      --in_flight_calls_;
    }
    report_counts(counts);
    // Answered outside the lock: the records the service took, then those that failed for
    // good; the items go back for new records, the rest is freed here, not under the lock.
    Answered a;
    resolve_succeeded(call, result, answered, a.bytes);
    for (auto& [item, r] : done) {
      a.bytes += item->bytes;
      resolve(*item, std::move(r));
      answered.push_back(std::move(item));
    }
    a.records = answered.size();
    done.clear();
    scrub(answered);
    return a;
  }

  // Without mu_: the call's metric points, and the log line of a series of calls failing
  // as a whole when one is due.
  void report_call(const Result<kinesis::PutRecordsResult>& result,
                   Clock::MonoTime::duration took) {
    const bool partial =
        result.ok() && std::any_of(result->records.begin(), result->records.end(),
                                   [](const kinesis::PutRecordsEntryResult& r) { return !r.ok; });
    const MetricTag tag{"outcome", !result.ok() ? "failed" : partial ? "partial" : "ok"};
    if (metrics_) {
      metrics_->count("producer.put_records_calls", 1, MetricTags(&tag, 1));
      metrics_->timing("producer.put_records_time",
                       std::chrono::duration_cast<std::chrono::nanoseconds>(took),
                       MetricTags(&tag, 1));
    }
    const auto now = clock_.now();
    if (!result.ok()) {
      if (auto line = call_failures_.failed(result.status(), now))
        logger_->log(LogLevel::kWarn, "producer", *line);
    } else if (auto line = call_failures_.succeeded(now)) {
      logger_->log(LogLevel::kInfo, "producer", *line);
    }
  }

  // Without mu_: what a finished call did to its records.
  void report_counts(const CallCounts& c) {
    if (!metrics_) return;
    if (c.succeeded) metrics_->count("producer.records_succeeded", double(c.succeeded), {});
    if (c.retried) metrics_->count("producer.records_retried", double(c.retried), {});
    if (c.failed) metrics_->count("producer.records_failed", double(c.failed), {});
    if (c.throttled) metrics_->count("producer.throttled", double(c.throttled), {});
    if (c.aggregates_resent) {
      metrics_->count("producer.aggregates_resent", double(c.aggregates_resent), {});
    }
  }

  // Without mu_ (the call's records are its own until answered): answers the records of the
  // entries the service took, the last of each entry with the answer's strings and the others
  // with copies, and moves their items to `answered`, adding their bytes to `bytes`.
  void resolve_succeeded(Call& call, Result<kinesis::PutRecordsResult>& result,
                         std::vector<std::unique_ptr<Item>>& answered, std::size_t& bytes) {
    if (!result.ok()) return;
    for (std::size_t i = 0; i < call.entries.size(); ++i) {
      kinesis::PutRecordsEntryResult& r = result->records[i];
      const Entry& e = call.entries[i];
      if (!r.ok || e.resent) continue;  // resent: its records went back to be sent again
      for (std::uint32_t k = 0; k < e.count; ++k) {
        prefetch_item(call.items, e.first + k + kPrefetchAhead);
        std::unique_ptr<Item>& item = call.items[e.first + k];
        const bool last = k + 1 == e.count;
        PutResult pr;
        pr.shard_id = last ? std::move(r.shard_id) : r.shard_id;
        pr.sequence_number = last ? std::move(r.sequence_number) : r.sequence_number;
        pr.sub_sequence_number = e.aggregated() ? k : 0;
        pr.aggregated = e.aggregated();
        pr.attempts = item->attempts;
        bytes += item->bytes;
        resolve(*item, std::move(pr));
        answered.push_back(std::move(item));
      }
    }
  }

  const ProducerConfig config_;
  std::shared_ptr<kinesis::KinesisClient> client_;
  const Clock& clock_;
  const std::shared_ptr<MetricsSink> metrics_;  // may be null: no metrics
  const std::shared_ptr<Logger> logger_;
  std::unique_ptr<aws::RetryPolicy> own_policy_;
  aws::RetryPolicy& policy_;
  base::FailureSeries call_failures_;  // PutRecords calls failing as a whole
  // Shard map reads after a surprise (request threads, one at a time: the planning one).
  base::FailureSeries refresh_failures_{"reading the shard map again (ListShards)"};

  // How the producer ends: one shutdown() at a time, its result, and the thread that runs it
  // for begin_shutdown().
  struct Ending {
    std::mutex mu;
    std::optional<Status> result;
    base::BackgroundOnce stopper;
  } ending_;

  mutable std::mutex mu_;
  std::condition_variable cv_;          // the planning request thread
  std::condition_variable request_cv_;  // idle request threads while another plans
  std::condition_variable space_cv_;    // put() waiting for room
  std::condition_variable done_cv_;     // flush()
  // What the planning is asked to do (guarded by mu_).
  struct PlanState {
    bool stop = false;
    bool closing = false;  // shutdown() began: put() refuses records
    bool wake = false;     // a look at the plan was asked for
    bool refresh_needed = false;
    bool planning = false;  // a request thread plans (or waits for its next look on cv_)
    int flushing = 0;
    // The planning thread's next look: min while it plans, max when nobody plans.
    Clock::MonoTime next_wake = Clock::MonoTime::max();
  } plan_state_;
  int idle_threads_ = 0;  // request threads waiting on request_cv_ (guarded by mu_)
  // The records put() has buffered, and the put() calls waiting for room (guarded by mu_).
  struct Buffered {
    std::size_t records = 0;
    std::size_t bytes = 0;
    int waiting_putters = 0;
  } buffered_;
  std::size_t in_flight_calls_ = 0;
  std::uint64_t refreshes_ = 0;
  // Aggregates sent again since the map was last read, for the refresh's log line (mu_).
  std::uint64_t aggregates_resent_ = 0;
  producer::PutPlanner planner_;                    // the queued records and what to send next
  std::vector<std::unique_ptr<Item>> spare_items_;  // items of answered records, for new ones
  ProducerStats stats_;
  std::vector<std::thread> requesters_;
};

Result<std::unique_ptr<Producer>> Producer::create(ProducerConfig config, Dependencies deps) {
  KCL_RETURN_IF_ERROR(check_config(config));
  auto raw = aws::make_aws_json_client(aws::kinesis_service(), config.aws);
  if (!raw.ok()) {
    return Status(raw.status().code(), "kcl::Producer: " + raw.status().message());
  }
  auto client = std::make_shared<kinesis::KinesisClient>(
      std::shared_ptr<aws::AwsJsonClient>(std::move(*raw)));
  std::string why;
  client->set_wire(kinesis::decide_wire(*client, config.aws.kinesis_wire, why));
  const std::shared_ptr<Logger> logger = deps.logger ? deps.logger : make_default_logger();
  logger->log(LogLevel::kInfo, "producer",
              std::string("Kinesis data calls in ") +
                  (client->wire() == kinesis::Wire::kCbor ? "CBOR" : "JSON") + " (" + why + ")");
  return producer::ProducerAccess::make(std::move(config), std::move(client), std::move(deps));
}

Producer::Producer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Producer::~Producer() = default;

std::future<Result<PutResult>> Producer::put(std::string partition_key, std::string data,
                                             std::string explicit_hash_key) {
  std::promise<Result<PutResult>> promise;
  auto future = promise.get_future();
  impl_->put(std::move(partition_key), std::move(data), std::move(explicit_hash_key), {}, {},
             &promise);
  return future;
}

void Producer::put(std::string partition_key, std::string data, std::string explicit_hash_key,
                   PutCallback callback) {
  impl_->put(std::move(partition_key), std::move(data), std::move(explicit_hash_key),
             std::move(callback), {}, nullptr);
}

void Producer::put(std::string partition_key, std::string data, std::string explicit_hash_key,
                   PutRecordCallback callback) {
  impl_->put(std::move(partition_key), std::move(data), std::move(explicit_hash_key), {},
             std::move(callback), nullptr);
}

Status Producer::flush(std::chrono::milliseconds timeout) { return impl_->flush(timeout); }
Status Producer::shutdown() { return impl_->shutdown(); }
std::shared_future<Status> Producer::begin_shutdown() { return impl_->begin_shutdown(); }
ProducerStats Producer::stats() const { return impl_->stats(); }

namespace producer {
Result<std::unique_ptr<Producer>> ProducerAccess::make(
    ProducerConfig config, std::shared_ptr<kinesis::KinesisClient> client, Dependencies deps) {
  auto impl = std::make_unique<Producer::Impl>(std::move(config), std::move(client), deps);
  KCL_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<Producer>(new Producer(std::move(impl)));
}
}  // namespace producer

}  // namespace kcl
