#include "kcl/producer.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <variant>

#include "aws/json_text.h"
#include "aws/retry.h"
#include "base/background_once.h"
#include "base/cache_prefetch.h"
#include "base/failure_series.h"
#include "base/status_macros.h"
#include "base/thread_name.h"
#include "kinesis/put_records_request.h"
#include "producer/key_set.h"
#include "producer/kpl_aggregator.h"
#include "producer/producer_access.h"
#include "producer/shard_rate.h"

namespace kcl {

namespace {
// The producer whose sender or request thread this is (put() callbacks run on the latter).
thread_local const void* current_producer = nullptr;
constexpr std::size_t kMaxCallRecords = 500;
constexpr std::size_t kMaxCallBytes = 5u << 20;
constexpr std::size_t kMaxRecordBytes = 1u << 20;
// The most digits of an explicit hash key (below 2^128): an aggregate's own Kinesis record
// carries its first record's hash key as one.
constexpr std::size_t kHashKeyDigits = 39;
// The most items of answered records kept for new records.
constexpr std::size_t kMaxSpareItems = 10000;
// How many records ahead a loop over a call's or a queue's records asks for their cache
// lines (base/cache_prefetch.h): the records were last written on another thread.
constexpr std::size_t kPrefetchAhead = 8;
// The most bytes of a record's data asked for ahead.
constexpr std::size_t kPrefetchDataBytes = 512;

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

using producer::HashKey;
using producer::KeySet;
using producer::ShardRate;

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
        call_failures_("PutRecords to stream '" + config_.stream_name + "'") {}

  ~Impl() {
    (void)shutdown();
    stopper_.join();
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
    sender_ = base::named_thread("kcl-put-send", [this] { send_loop(); });
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
    std::lock_guard<std::mutex> once(shutdown_mu_);
    if (shutdown_result_) return *shutdown_result_;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    space_cv_.notify_all();  // put() calls waiting for room give up
    const Status flushed = sender_.joinable() ? flush(config_.close_timeout) : Status::Ok();
    stop_threads();
    const std::size_t cancelled = cancel_left(flushed);
    shutdown_result_ = cancelled == 0
                           ? Status::Ok()
                           : Status(StatusCode::kDeadlineExceeded,
                                    "kcl::Producer shutdown: " + std::to_string(cancelled) +
                                        " records were not sent within close_timeout (" +
                                        std::to_string(config_.close_timeout.count()) +
                                        " ms) and failed with kCancelled");
    return *shutdown_result_;
  }

  std::shared_future<Status> begin_shutdown() {
    return stopper_.run([this] { return shutdown(); });
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
    ++flushing_;
    wake_ = true;
    cv_.notify_all();
    const bool done =
        clock_.wait_for(lock, done_cv_, timeout, [&] { return buffered_records_ == 0 || stop_; });
    --flushing_;
    if (done && buffered_records_ == 0) return Status::Ok();
    return Status(StatusCode::kDeadlineExceeded,
                  "kcl::Producer flush: " + std::to_string(buffered_records_) +
                      " records still buffered after " + std::to_string(timeout.count()) + " ms");
  }

  ProducerStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    ProducerStats s = stats_;
    s.buffered_records = buffered_records_;
    s.buffered_bytes = buffered_bytes_;
    s.in_flight_calls = in_flight_calls_;
    s.shard_map_refreshes = refreshes_;
    return s;
  }

 private:
  // How a record is answered: nothing (a spare item), a callback, a callback that takes the
  // record back, or a future's promise. One of them, so an item is three cache lines, not
  // four.
  using Answer =
      std::variant<std::monostate, PutCallback, PutRecordCallback, std::promise<Result<PutResult>>>;
  struct Item {
    // What the sender reads of a queued record first, together on one line.
    HashKey hash = 0;
    std::uint64_t key_id = 0;  // the partition key's hash, for the ordered check (KeySet)
    std::size_t bytes = 0;
    Clock::MonoTime enqueued{};
    int attempts = 0;
    std::string pk, data, ehk;
    Answer answer;
  };
  struct ShardQueue {
    ShardQueue(std::string shard_id, ShardRate r) : id(std::move(shard_id)), rate(r) {}
    std::string id;  // "" for records of no known shard
    std::deque<std::unique_ptr<Item>> items;
    std::size_t queued_bytes = 0;  // of `items`
    int in_flight = 0;
    Clock::MonoTime not_before{};
    int retry_round = 0;
    int quota_taken = 0;
    ShardRate rate;
    // Since when the shard may send (sendable, with the tokens for a worthwhile send).
    std::optional<Clock::MonoTime> ready_since;
  };
  // One Kinesis record of a call: `count` records of Call::items from `first` (count >= 2:
  // packed into `aggregate`), predicted to go to shard Call::shards[shard].
  struct Entry {
    std::uint32_t shard = 0;
    std::uint32_t first = 0;
    std::uint32_t count = 1;
    std::uint32_t bytes = 0;  // what the shard's limit counts: data and partition key
    std::string aggregate;
    bool aggregated() const { return count >= 2; }
  };
  struct Call {
    std::vector<std::string> shards;  // the shards it takes records from ("": unknown)
    std::vector<Entry> entries;
    std::vector<std::unique_ptr<Item>> items;
    std::size_t bytes = 0;    // its Kinesis records' data and keys
    Clock::MonoTime built{};  // when its records were taken from their shards
  };
  struct Range {
    HashKey start, end;
    ShardQueue* queue;  // the open shard's queue
  };
  // The next Kinesis record of a shard: how many of its records, and the bytes it takes.
  struct Plan {
    std::size_t records = 1;
    std::size_t bytes = 0;
  };
  // Records whose outcome is known, to resolve outside mu_.
  using Done = std::vector<std::pair<std::unique_ptr<Item>, Result<PutResult>>>;
  // One shard's failed records of a call, in call order, with the failure to back off for.
  using FailedSlot = std::pair<std::vector<std::unique_ptr<Item>>, Status>;
  using Failed = std::map<std::string, FailedSlot>;
  // What one finished call did to its records (for the metrics).
  struct CallCounts {
    std::uint64_t succeeded = 0, failed = 0, retried = 0, throttled = 0;
  };
  // Per shard of a call (as Call::shards): whether some record succeeded, failed, was
  // throttled; the Kinesis records and bytes it sent, and those that count as written (a
  // call that failed as a whole may have been written).
  struct ShardOutcome {
    bool succeeded = false, failed = false, throttled = false;
    double sent_records = 0, sent_bytes = 0, written_records = 0, written_bytes = 0;
  };
  using ShardOutcomes = std::vector<ShardOutcome>;

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

  // The cache lines of items[i] (none past the end): a call's or a shard queue's.
  template <class Items>
  static void prefetch_item(const Items& items, std::size_t i) {
    if (i < items.size()) base::prefetch_object(items[i].get());
  }
  // The first bytes of items[i]'s data (its item's lines asked for earlier); a large
  // record's rest comes as the hardware sees it read in order.
  template <class Items>
  static void prefetch_data(const Items& items, std::size_t i) {
    if (i < items.size()) {
      base::prefetch_bytes(items[i]->data.data(),
                           std::min(items[i]->data.size(), kPrefetchDataBytes));
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
    if (item.pk.empty() || item.pk.size() > 256) {
      return Status(
          StatusCode::kInvalidArgument,
          "partition key must be 1 to 256 characters, got " + std::to_string(item.pk.size()));
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
      item.key_id = std::hash<std::string_view>{}(item.pk);
    } else {
      item.hash = producer::partition_key_hash(item.pk);
      item.key_id = static_cast<std::uint64_t>(item.hash);
    }
    return Status::Ok();
  }

  // Queues a checked record on its shard's queue and wakes the sender when it is due sooner
  // than the sender's wake-up or completes a call. A full buffer waits for room
  // (block_when_full) or resolves the record kUnavailable; closing resolves it kCancelled.
  void enqueue(Item& staged) {
    std::unique_lock<std::mutex> lock(mu_);
    if (closing_) {
      lock.unlock();
      return resolve(staged, Status(StatusCode::kCancelled,
                                    "kcl::Producer was shut down; the record was not sent"));
    }
    auto full = [&] {
      return buffered_records_ + 1 > config_.max_buffered_records ||
             buffered_bytes_ + staged.bytes > config_.max_buffered_bytes;
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
      // Nothing more can join the buffered records until some are answered: the sender need
      // not wait for a linger to fill its calls.
      ++waiting_putters_;
      if (waiting_putters_ == 1 && !wake_) {
        wake_ = true;
        cv_.notify_all();
      }
      space_cv_.wait(lock, [&] { return stop_ || closing_ || !full(); });
      --waiting_putters_;
      if (stop_ || closing_) {
        lock.unlock();
        return resolve(staged, Status(StatusCode::kCancelled, "kcl::Producer is closing"));
      }
    }
    std::unique_ptr<Item> item = spare_item();
    *item = std::move(staged);
    ++stats_.records_put;
    ++buffered_records_;
    buffered_bytes_ += item->bytes;
    queued_bytes_ += item->bytes;
    ++queued_records_;
    item->enqueued = clock_.now();
    const auto deadline = item->enqueued + config_.linger;
    const std::size_t bytes = item->bytes;
    ShardQueue& q = queue_for(item->hash);
    const bool first_of_shard = q.items.empty();
    q.queued_bytes += bytes;
    q.items.push_back(std::move(item));
    // The sender plans its wake-up from each shard's first record and the queued totals: it
    // needs waking only for a record that is its shard's first and due sooner, or one that
    // fills a call. (Behind a shard's first record, or once a call's worth waits for its
    // tokens, more records change nothing it plans; a finished call wakes it anyway.)
    const bool fills_call =
        (!config_.aggregate && queued_records_ == kMaxCallRecords) ||
        (queued_bytes_ >= kMaxCallBytes && queued_bytes_ - bytes < kMaxCallBytes);
    const bool wake_sender = !wake_ && ((first_of_shard && deadline < next_wake_) || fills_call);
    if (wake_sender) wake_ = true;
    // The item the next record will fill, last written by a request thread: its lines come
    // while the next put() checks and hashes its record.
    if (!spare_items_.empty()) base::prefetch_object(spare_items_.back().get(), /*for_write=*/true);
    lock.unlock();
    if (wake_sender) cv_.notify_all();  // after the lock: woken under it, it would wait for it
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
      stop_ = true;
    }
    cv_.notify_all();
    space_cv_.notify_all();
    request_cv_.notify_all();
    if (sender_.joinable()) sender_.join();
    for (auto& t : requesters_) t.join();
    requesters_.clear();
  }

  // After the threads stopped: fails every record still queued with kCancelled; returns how
  // many there were.
  std::size_t cancel_left(const Status& flushed) {
    std::vector<std::unique_ptr<Item>> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, q] : shards_) {
        for (auto& item : q.items) left.push_back(std::move(item));
        q.items.clear();
      }
      for (auto& call : requests_) {
        for (auto& item : call.items) left.push_back(std::move(item));
      }
      requests_.clear();
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
    buffered_records_ -= std::min(buffered_records_, left.size());
    buffered_bytes_ -= std::min(buffered_bytes_, bytes);
    stats_.records_failed += left.size();
    return left.size();
  }

  // Requires mu_. The queue of the open shard whose range holds `hash`, or of the records
  // of no known shard when none does.
  ShardQueue& queue_for(HashKey hash) {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), hash,
                               [](HashKey h, const Range& r) { return h < r.start; });
    if (it != ranges_.begin() && hash <= std::prev(it)->end) return *std::prev(it)->queue;
    return queue_named("");
  }

  // Requires mu_. The queue of shard `id` ("": no known shard), made when there is none.
  ShardQueue& queue_named(const std::string& id) {
    auto it = shards_.find(id);
    if (it == shards_.end()) {
      const double records = id.empty() ? 0 : config_.shard_records_per_second;
      const double bytes = id.empty() ? 0 : config_.shard_bytes_per_second;
      // A new shard's bucket starts with a linger's worth of tokens, not a second's: no
      // burst at the start.
      const double start = std::chrono::duration<double>(config_.linger).count();
      it = shards_
               .emplace(id, ShardQueue(id, ShardRate(records, bytes, clock_.now(), start,
                                                     config_.arrival_jitter)))
               .first;
    }
    return it->second;
  }

  // Without mu_ held: calls ListShards, then installs the map and moves queued records of
  // shards no longer open.
  Status refresh_shard_map() {
    auto shards = client_->list_shards(config_.stream_name);
    if (!shards.ok()) return shards.status();
    std::vector<std::pair<Range, std::string>> open;
    for (const auto& s : *shards) {
      if (s.closed()) continue;
      auto start = producer::parse_hash_key(s.hash_key_range.starting_hash_key);
      auto end = producer::parse_hash_key(s.hash_key_range.ending_hash_key);
      if (!start || !end) {
        return Status(StatusCode::kInternal,
                      "ListShards: shard " + s.shard_id + " has an unreadable hash key range");
      }
      open.emplace_back(Range{*start, *end, nullptr}, s.shard_id);
    }
    std::sort(open.begin(), open.end(),
              [](const auto& a, const auto& b) { return a.first.start < b.first.start; });
    std::lock_guard<std::mutex> lock(mu_);
    ranges_.clear();
    for (auto& [range, id] : open) {
      range.queue = &queue_named(id);
      ranges_.push_back(range);
    }
    ++refreshes_;
    std::vector<std::string> gone;
    for (auto& [id, q] : shards_) {
      const bool is_open = std::any_of(ranges_.begin(), ranges_.end(),
                                       [&](const Range& r) { return r.queue == &q; });
      if (!is_open) gone.push_back(id);
    }
    for (const auto& id : gone) {
      auto node = shards_.extract(id);
      auto& q = node.mapped();
      for (auto& item : q.items) {
        const HashKey h = item->hash;
        ShardQueue& target = queue_for(h);
        target.queued_bytes += item->bytes;
        target.items.push_back(std::move(item));
      }
      q.items.clear();
      if (q.in_flight > 0) {
        // Keep its in-flight count until the calls return.
        if (auto again = shards_.find(id); again != shards_.end()) {
          again->second.in_flight += q.in_flight;
        } else {
          shards_.insert(std::move(node));
        }
      }
    }
    return Status::Ok();
  }

  // Requires mu_. Whether shard `q` may contribute to a call now.
  bool sendable(const ShardQueue& q, Clock::MonoTime now) const {
    return !q.items.empty() && q.in_flight < config_.max_in_flight_per_shard && now >= q.not_before;
  }

  // Requires mu_. When shard `q`'s tokens allow a worthwhile send: a linger's worth of its
  // rate, or all it holds when that is less. So a rate-limited shard sends a batch every
  // linger instead of a record whenever one token trickles in.
  Clock::MonoTime rate_ready_at(ShardQueue& q, Clock::MonoTime now) {
    const double linger_s = std::chrono::duration<double>(config_.linger).count();
    const bool aggregating = config_.aggregate && !q.items.empty();
    const double records = aggregating ? 1.0
                                       : std::max(1.0, std::min(static_cast<double>(q.items.size()),
                                                                q.rate.records_rate() * linger_s));
    const double bytes =
        std::max(static_cast<double>(q.items.front()->bytes),
                 std::min(static_cast<double>(q.queued_bytes), q.rate.bytes_rate() * linger_s));
    return q.rate.ready_at(records, bytes, now);
  }

  // How long a shard that waited for its tokens (or its window's room) waits for others
  // before it sends: shards that wait for tokens fill a call together rather than each
  // sending alone the moment it may, but not for long, since the room a shard does not use
  // while it waits is lost to it (a shard at its limit gets its room back a second after it
  // used it; each millisecond of waiting costs it a thousandth of its rate).
  std::chrono::milliseconds coalesce() const {
    return std::min(config_.linger, std::chrono::milliseconds(5));
  }

  // Requires mu_. Whether a call is due now: flushing, closing, a shard that may send all it
  // holds while put() waits for room (no more records can come to fill a call), a full
  // call's worth that the shards may send now, or the linger of a shard that may send now
  // ended. A record's linger counts from its put(); a shard that waited for its tokens also
  // waits coalesce() from when they came. Lowers `wake` to when a shard may become sendable
  // or its linger ends.
  bool call_due(Clock::MonoTime now, Clock::MonoTime& wake) {
    bool due = flushing_ > 0 || stop_;
    double ready_records = 0;
    double ready_bytes = 0;
    for (auto& [id, q] : shards_) {
      if (q.items.empty()) continue;
      if (!sendable(q, now)) {
        if (q.in_flight < config_.max_in_flight_per_shard) wake = std::min(wake, q.not_before);
        q.ready_since.reset();
        continue;
      }
      const auto ready = rate_ready_at(q, now);
      if (ready > now) {
        wake = std::min(wake, ready);
        q.ready_since.reset();
        continue;
      }
      if (!q.ready_since) q.ready_since = now;
      const double records = q.rate.records_available(now);
      const double bytes = q.rate.bytes_available(now);
      ready_records += std::min(static_cast<double>(q.items.size()), records);
      ready_bytes += std::min(static_cast<double>(q.queued_bytes), bytes);
      // With put() waiting for room no record can join this shard's: one whose whole queue
      // may go now gains nothing by lingering (one that waits for tokens still lets the
      // others' tokens come, to fill a call together).
      const double records_needed = config_.aggregate ? 1.0 : static_cast<double>(q.items.size());
      if (waiting_putters_ > 0 && records >= records_needed &&
          bytes >= static_cast<double>(q.queued_bytes)) {
        due = true;
      }
      const auto linger_end =
          std::max(q.items.front()->enqueued + config_.linger, *q.ready_since + coalesce());
      if (linger_end <= now) due = true;
      wake = std::min(wake, linger_end);
    }
    // Aggregated, a call's records are aggregates: it is full by its bytes.
    if (ready_bytes >= static_cast<double>(kMaxCallBytes)) due = true;
    if (!config_.aggregate && ready_records >= static_cast<double>(kMaxCallRecords)) due = true;
    return due;
  }

  // Requires mu_. Builds one call from the sendable shards; empty when there is nothing to
  // send yet. Sets `wake` to when something may become sendable.
  Call build_call(Clock::MonoTime now, Clock::MonoTime& wake) {
    Call call;
    if (!call_due(now, wake)) return call;
    call.built = now;
    // Room for what it may take, at once (not grown a record at a time).
    call.entries.reserve(std::min(queued_records_, kMaxCallRecords));
    const std::size_t most_items = config_.aggregate ? kMaxSpareItems : kMaxCallRecords;
    call.items.reserve(std::min(queued_records_, most_items));
    for (auto& [id, q] : shards_) {
      if (!sendable(q, now) || rate_ready_at(q, now) > now) continue;
      if (take_from_shard(q, now, call, wake)) ++q.in_flight;
      if (call.entries.size() >= kMaxCallRecords) break;
    }
    return call;
  }

  // Requires mu_. Moves the leading records of shard `q` into `call`, a Kinesis record at a
  // time, while the call's limits and the shard's tokens allow. True when it took any.
  bool take_from_shard(ShardQueue& q, Clock::MonoTime now, Call& call, Clock::MonoTime& wake) {
    // Ordered mode: a partition key appears in at most one Kinesis record of a call, so a
    // record that fails is never overtaken by a later record of its key that succeeded.
    const bool ordered = config_.max_in_flight_per_shard == 1;
    call_keys_.clear();
    KeySet* ordered_keys = ordered ? &call_keys_ : nullptr;
    const auto shard = static_cast<std::uint32_t>(call.shards.size());
    while (!q.items.empty() && call.entries.size() < kMaxCallRecords) {
      if (q.items.size() > kPrefetchAhead) base::prefetch_object(q.items[kPrefetchAhead].get());
      if (ordered && call_keys_.contains(q.items.front()->key_id)) break;
      const Plan plan = plan_record(q, ordered_keys);
      if (call.bytes + plan.bytes > kMaxCallBytes) break;
      if (!q.rate.take(1, static_cast<double>(plan.bytes), now)) {
        wake = std::min(wake, q.rate.ready_at(1, static_cast<double>(plan.bytes), now));
        break;
      }
      Entry e;
      e.shard = shard;
      e.first = static_cast<std::uint32_t>(call.items.size());
      e.count = static_cast<std::uint32_t>(plan.records);
      e.bytes = static_cast<std::uint32_t>(plan.bytes);
      if (e.aggregated()) e.aggregate = agg_.finish();
      take_items(q, plan.records, call, ordered_keys);
      call.entries.push_back(std::move(e));
      call.bytes += plan.bytes;
    }
    if (call.entries.empty() || call.entries.back().shard != shard) return false;
    call.shards.push_back(q.id);
    return true;
  }

  // Requires mu_. Plans the next Kinesis record of shard `q` (non-empty): an aggregate of its
  // leading small records, built in agg_ (records >= 2), or its first record alone. With
  // `ordered_keys` an aggregate stops before a key the call already holds.
  Plan plan_record(const ShardQueue& q, const KeySet* ordered_keys) {
    const Item& first = *q.items.front();
    if (!config_.aggregate || q.id.empty()) return Plan{1, first.bytes};
    agg_.clear();
    // The aggregate's own Kinesis record carries the first record's partition key and its
    // hash key as an explicit one.
    const std::size_t own_keys = first.pk.size() + kHashKeyDigits;
    const std::size_t limit =
        config_.aggregation_max_bytes - std::min(own_keys, config_.aggregation_max_bytes);
    // The records were written on the putting thread: their items' lines and their bytes
    // are asked for ahead of the copy into the aggregate.
    for (std::size_t i = 0; i < q.items.size(); ++i) {
      prefetch_item(q.items, i + 2 * kPrefetchAhead);
      prefetch_data(q.items, i + kPrefetchAhead);
      const Item& it = *q.items[i];
      if (ordered_keys != nullptr && ordered_keys->contains(it.key_id)) break;
      if (!agg_.add_within(it.pk, it.ehk, it.data, limit)) break;
    }
    if (agg_.count() < 2) return Plan{1, first.bytes};
    return Plan{agg_.count(), agg_.size() + own_keys};
  }

  // Requires mu_. Takes the first `records` records off shard `q` into `call`, counting their
  // attempt (and, with `ordered_keys`, their keys).
  void take_items(ShardQueue& q, std::size_t records, Call& call, KeySet* ordered_keys) {
    for (std::size_t i = 0; i < records; ++i) {
      auto item = std::move(q.items.front());
      q.items.pop_front();
      queued_bytes_ -= item->bytes;
      q.queued_bytes -= item->bytes;
      --queued_records_;
      ++item->attempts;
      if (item->attempts > 1) ++stats_.records_retried;
      if (ordered_keys != nullptr) ordered_keys->insert(item->key_id);
      call.items.push_back(std::move(item));
    }
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

  void send_loop() {
    current_producer = this;
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (refresh_needed_) {
        refresh_needed_ = false;
        lock.unlock();
        (void)refresh_shard_map();  // on failure: keep the old map; the next surprise retries
        lock.lock();
        continue;
      }
      const auto now = clock_.now();
      auto wake = now + std::chrono::hours(1);
      if (in_flight_calls_ < static_cast<std::size_t>(config_.max_concurrent_requests)) {
        Call call = build_call(now, wake);
        if (!call.entries.empty()) {
          ++in_flight_calls_;
          ++stats_.put_records_calls;
          stats_.kinesis_records_sent += call.entries.size();
          requests_.push_back(std::move(call));
          // Woken after the lock is let go, the request thread does not wait for it at once.
          lock.unlock();
          request_cv_.notify_one();
          lock.lock();
          continue;
        }
      }
      next_wake_ = wake;
      clock_.wait_until(lock, cv_, wake, [&] { return stop_ || wake_; });
      wake_ = false;
      next_wake_ = Clock::MonoTime::min();
    }
  }

  void request_loop() {
    current_producer = this;
    Done done;  // these two are kept from call to call (their capacity)
    std::vector<std::unique_ptr<Item>> answered;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      request_cv_.wait(lock,
                       [&] { return !requests_.empty() || (stop_ && in_flight_calls_ == 0); });
      if (requests_.empty()) return;
      Call call = std::move(requests_.front());
      requests_.pop_front();
      lock.unlock();
      answered.clear();  // the items the last call left beyond the spares kept
      aws::CallOptions options;
      options.max_attempts = 1;
      const auto sent_at = clock_.now();
      auto result = client_->put_records(request_of(call), options);
      report_call(result, clock_.now() - sent_at);
      CallCounts counts;
      lock.lock();
      complete(call, result, done, counts);
      --in_flight_calls_;
      if (stop_ && in_flight_calls_ == 0) request_cv_.notify_all();
      lock.unlock();
      report_counts(counts);
      // Answered outside the lock: the records the service took, then those that failed for
      // good; the items go back for new records, the rest is freed here, not under the lock.
      std::size_t bytes = 0;
      resolve_succeeded(call, result, answered, bytes);
      for (auto& [item, r] : done) {
        bytes += item->bytes;
        resolve(*item, std::move(r));
        answered.push_back(std::move(item));
      }
      const std::size_t resolved = answered.size();
      done.clear();
      scrub(answered);
      call = Call{};
      lock.lock();
      keep_spares(answered);
      buffered_records_ -= resolved;
      buffered_bytes_ -= bytes;
      wake_ = true;
      // The putters, flush() and the sender are woken after the lock is let go: woken under
      // it, each would only block on it (two more context switches each).
      lock.unlock();
      space_cv_.notify_all();
      done_cv_.notify_all();
      cv_.notify_all();
      lock.lock();
    }
  }

  static Status entry_failure(const kinesis::PutRecordsEntryResult& r) {
    StatusCode code = aws::classify_aws_error(400, r.error_code);
    if (code == StatusCode::kInternal || code == StatusCode::kInvalidArgument) {
      if (r.error_code == "InternalFailure") code = StatusCode::kUnavailable;
    }
    AwsErrorDetails details;
    details.operation = "Kinesis.PutRecords";
    details.http_status = 200;
    details.error_type = r.error_code;
    return Status(code, "PutRecords record failed: " + r.error_code + ": " + r.error_message,
                  details);
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
  }

  // Requires mu_. Resolves or requeues the records of a finished call; counts what it did.
  void complete(Call& call, Result<kinesis::PutRecordsResult>& result, Done& done,
                CallCounts& counts) {
    const auto before = stats_;
    const auto now = clock_.now();
    Failed failed;
    ShardOutcomes outcomes(call.shards.size());
    for (std::size_t i = 0; i < call.entries.size(); ++i) {
      Entry& e = call.entries[i];
      ShardOutcome& outcome = outcomes[e.shard];
      outcome.sent_records += 1;
      outcome.sent_bytes += e.bytes;
      Status failure;
      if (!result.ok()) {
        failure = result.status();
        outcome.written_records += 1;  // the service may have written it
        outcome.written_bytes += e.bytes;
      } else if (const auto& r = result->records[i]; r.ok) {
        succeeded(call, e, result->shard_ids[r.shard]);
        outcome.succeeded = true;
        outcome.written_records += 1;
        outcome.written_bytes += e.bytes;
        continue;
      } else {
        failure = entry_failure(r);
      }
      outcome.failed = true;
      if (entry_failed(call, e, failure, failed[call.shards[e.shard]], done))
        outcome.throttled = true;
    }
    settle_shards(call, outcomes, now);
    retry_failed(failed, now, done);
    counts.succeeded = stats_.records_succeeded - before.records_succeeded;
    counts.failed = stats_.records_failed - before.records_failed;
    counts.throttled = stats_.throttled - before.throttled;
    for (const auto& [id, slot] : failed) counts.retried += slot.first.size();
  }

  // Requires mu_. Counts the records of an entry the service took (they are answered by
  // resolve_succeeded() after the lock), and asks for a new shard map when the service put
  // them on another shard (`written_to`) than the map said.
  void succeeded(const Call& call, const Entry& e, const std::string& written_to) {
    const std::string& predicted = call.shards[e.shard];
    if (!predicted.empty() && written_to != predicted) refresh_needed_ = true;
    stats_.records_succeeded += e.count;
  }

  // Without mu_ (the call's records are its own until answered): answers the records of the
  // entries the service took, the last of each entry with the answer's strings and the others
  // with copies, and moves their items to `answered`, adding their bytes to `bytes`.
  void resolve_succeeded(Call& call, Result<kinesis::PutRecordsResult>& result,
                         std::vector<std::unique_ptr<Item>>& answered, std::size_t& bytes) {
    if (!result.ok()) return;
    for (std::size_t i = 0; i < call.entries.size(); ++i) {
      kinesis::PutRecordsEntryResult& r = result->records[i];
      if (!r.ok) continue;
      const Entry& e = call.entries[i];
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

  // Requires mu_. An entry that failed: its records fail for good (not retryable, or out of
  // attempts) or go to `slot`, their shard's records to retry, with the failure to back off
  // for. True when the service throttled it (the shard's rate is cut once per call, by
  // settle_shards()).
  bool entry_failed(Call& call, const Entry& e, const Status& failure, FailedSlot& slot,
                    Done& done) {
    const bool throttled = failure.aws() && aws::is_throttling_error(failure.aws()->error_type);
    if (throttled) ++stats_.throttled;
    // The retry policy (aws/retry.h): a record is sent again after kUnavailable only.
    const bool retryable = aws::is_retryable(failure.code());
    if (retryable) slot.second = failure;  // what the shard's backoff is for
    for (std::uint32_t k = 0; k < e.count; ++k) {
      auto& item = call.items[e.first + k];
      if (!retryable || item->attempts >= config_.max_attempts) {
        ++stats_.records_failed;
        Status final_status(failure.code(), failure.message() + " (after " +
                                                std::to_string(item->attempts) + " attempts)");
        if (failure.aws())
          final_status = Status(failure.code(), final_status.message(), *failure.aws());
        done.emplace_back(std::move(item), final_status);
      } else {
        slot.first.push_back(std::move(item));
      }
    }
    return throttled;
  }

  // Requires mu_. Ends the call on each of its shards: one call fewer in flight; its records
  // leave the shard's flight and those written count in its window (ShardRate); a throttle
  // cuts the shard's rate once for the call; records taken give their retries' quota back,
  // and a call without failures resets the backoff.
  void settle_shards(const Call& call, const ShardOutcomes& outcomes, Clock::MonoTime now) {
    for (std::size_t i = 0; i < call.shards.size(); ++i) {
      const ShardOutcome& outcome = outcomes[i];
      auto it = shards_.find(call.shards[i]);
      if (it == shards_.end()) continue;
      ShardQueue& q = it->second;
      --q.in_flight;
      q.rate.on_answered(outcome.sent_records, outcome.sent_bytes, outcome.written_records,
                         outcome.written_bytes, call.built, now);
      if (outcome.throttled) {
        (void)q.rate.on_throttled(call.built, outcome.sent_records - outcome.written_records,
                                  outcome.sent_bytes - outcome.written_bytes, now);
      }
      // The service took records of this shard: what its retries took goes back to the
      // quota; a call with no failure for the shard also resets its backoff.
      if (outcome.succeeded && q.quota_taken > 0) {
        policy_.on_success(q.quota_taken);
        q.quota_taken = 0;
      }
      if (outcome.succeeded && !outcome.failed) q.retry_round = 0;
    }
  }

  // Requires mu_. Requeues each shard's failed records after the retry policy's delay, or
  // fails them when its quota is spent.
  void retry_failed(Failed& failed, Clock::MonoTime now, Done& done) {
    for (auto& [id, slot] : failed) {
      auto& items = slot.first;
      if (items.empty()) continue;
      auto it = shards_.find(id);
      std::optional<std::chrono::milliseconds> delay;
      if (it != shards_.end()) {
        delay = policy_.next_delay(slot.second, it->second.retry_round, &it->second.quota_taken);
      }
      if (!delay) {
        for (auto& item : items) {
          ++stats_.records_failed;
          done.emplace_back(
              std::move(item),
              Status(slot.second.code(), slot.second.message() + " (retry quota exhausted after " +
                                             std::to_string(item->attempts) + " attempts)"));
        }
        continue;
      }
      ++it->second.retry_round;
      requeue_front(items, now + *delay);
    }
  }

  // Requires mu_. Puts `items` back at the front of their shards' queues (per the current
  // map), oldest first, not to be sent before `not_before`.
  void requeue_front(std::vector<std::unique_ptr<Item>>& items, Clock::MonoTime not_before) {
    for (auto r = items.rbegin(); r != items.rend(); ++r) {
      const HashKey h = (*r)->hash;
      ShardQueue& q = queue_for(h);
      queued_bytes_ += (*r)->bytes;
      q.queued_bytes += (*r)->bytes;
      ++queued_records_;
      q.not_before = std::max(q.not_before, not_before);
      q.items.push_front(std::move(*r));
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

  std::mutex shutdown_mu_;  // one shutdown() at a time
  std::optional<Status> shutdown_result_;
  base::BackgroundOnce stopper_;  // runs shutdown() for begin_shutdown()

  mutable std::mutex mu_;
  std::condition_variable cv_;          // sender
  std::condition_variable request_cv_;  // request threads
  std::condition_variable space_cv_;    // put() waiting for room
  std::condition_variable done_cv_;     // flush()
  bool stop_ = false;
  bool closing_ = false;  // shutdown() began: put() refuses records
  bool wake_ = false;
  bool refresh_needed_ = false;
  int flushing_ = 0;
  int waiting_putters_ = 0;  // put() calls waiting for room in the buffer
  Clock::MonoTime next_wake_ = Clock::MonoTime::min();
  std::size_t buffered_records_ = 0;
  std::size_t buffered_bytes_ = 0;
  std::size_t queued_records_ = 0;
  std::size_t queued_bytes_ = 0;
  std::size_t in_flight_calls_ = 0;
  std::uint64_t refreshes_ = 0;
  std::vector<Range> ranges_;
  std::map<std::string, ShardQueue> shards_;
  std::deque<Call> requests_;
  producer::KplAggregator agg_;
  KeySet call_keys_;  // the keys of the call being built (ordered mode)
  std::vector<std::unique_ptr<Item>> spare_items_;  // items of answered records, for new ones
  ProducerStats stats_;
  std::thread sender_;
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
