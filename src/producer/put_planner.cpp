#include "producer/put_planner.h"

#include <algorithm>
#include <chrono>

#include "aws/aws_json_client.h"

namespace kcl::producer {

namespace {
// The most digits of an explicit hash key (below 2^128): an aggregate's own Kinesis record
// carries its first record's hash key as one.
constexpr std::size_t kHashKeyDigits = 39;
// The most items a call of aggregates reserves room for at once.
constexpr std::size_t kMaxReservedItems = 10000;
}  // namespace

PutPlanner::PutPlanner(const ProducerConfig& config, aws::RetryPolicy& policy)
    : config_(config), policy_(policy) {}

void PutPlanner::set_map(ShardMap map, Clock::MonoTime now) {
  map_ = std::move(map);
  range_queues_.clear();
  for (const ShardMap::Range& r : map_.ranges())
    range_queues_.push_back(&queue_named(r.shard_id, now));
  std::vector<std::string> gone;
  for (auto& [id, q] : shards_) {
    const bool is_open =
        std::find(range_queues_.begin(), range_queues_.end(), &q) != range_queues_.end();
    if (!is_open) gone.push_back(id);
  }
  for (const auto& id : gone) {
    auto node = shards_.extract(id);
    auto& q = node.mapped();
    // What its retries took from the quota goes back with it when nothing of it is in flight:
    // its records go on through the shards that replaced it, where their success cannot
    // give it back (each split or merge during failures cost the quota for good).
    if (q.in_flight == 0 && q.quota_taken > 0) {
      policy_.on_success(q.quota_taken);
      q.quota_taken = 0;
    }
    for (auto& item : q.items) {
      const HashKey h = item->hash;
      ShardQueue& target = queue_for(h, now);
      target.queued_bytes += item->bytes;
      target.items.push_back(std::move(item));
    }
    q.items.clear();
    if (q.in_flight > 0) {
      // Keep its in-flight count until the calls return; meanwhile no shard sends (below).
      closed_in_flight_.insert(id);
      if (auto again = shards_.find(id); again != shards_.end()) {
        again->second.in_flight += q.in_flight;
      } else {
        shards_.insert(std::move(node));
      }
    }
  }
}

PutPlanner::Added PutPlanner::add(std::unique_ptr<PutItem> item, Clock::MonoTime now) {
  Added added;
  queued_bytes_ += item->bytes;
  ++queued_records_;
  item->enqueued = now;
  added.deadline = now + config_.linger;
  const std::size_t bytes = item->bytes;
  ShardQueue& q = queue_for(item->hash, now);
  added.first_of_shard = q.items.empty();
  q.queued_bytes += bytes;
  q.items.push_back(std::move(item));
  added.fills_call = (!config_.aggregate && queued_records_ == kMaxCallRecords) ||
                     (queued_bytes_ >= kMaxCallBytes && queued_bytes_ - bytes < kMaxCallBytes);
  return added;
}

std::vector<std::unique_ptr<PutItem>> PutPlanner::drain() {
  std::vector<std::unique_ptr<PutItem>> left;
  for (auto& [id, q] : shards_) {
    for (auto& item : q.items) left.push_back(std::move(item));
    q.items.clear();
    q.queued_bytes = 0;
  }
  queued_records_ = 0;
  queued_bytes_ = 0;
  return left;
}

const ShardRate* PutPlanner::rate_of(const std::string& id) const {
  auto it = shards_.find(id);
  return it == shards_.end() ? nullptr : &it->second.rate;
}

// The queue of the open shard whose range holds `hash`, or of the records of no known shard
// when none does.
PutPlanner::ShardQueue& PutPlanner::queue_for(HashKey hash, Clock::MonoTime now) {
  const std::size_t at = map_.find(hash);
  if (at != ShardMap::kNone) return *range_queues_[at];
  return queue_named("", now);
}

// The queue of shard `id` ("": no known shard), made when there is none.
PutPlanner::ShardQueue& PutPlanner::queue_named(const std::string& id, Clock::MonoTime now) {
  auto it = shards_.find(id);
  if (it == shards_.end()) {
    const double records = id.empty() ? 0 : config_.shard_records_per_second;
    const double bytes = id.empty() ? 0 : config_.shard_bytes_per_second;
    // A new shard's bucket starts with a linger's worth of tokens, not a second's: no burst
    // at the start.
    const double start = std::chrono::duration<double>(config_.linger).count();
    it = shards_
             .emplace(id,
                      ShardQueue(id, ShardRate(records, bytes, now, start, config_.arrival_jitter)))
             .first;
  }
  return it->second;
}

// Whether shard `q` may contribute to a call now. Not while a call to a shard the map no
// longer has open is unanswered: its records' keys now go to the shards that replaced it,
// and a record of it that failed comes back ahead of theirs (ordering across a split or a
// merge); a call's answer ends the wait.
bool PutPlanner::sendable(const ShardQueue& q, Clock::MonoTime now) const {
  return closed_in_flight_.empty() && !q.items.empty() &&
         q.in_flight < config_.max_in_flight_per_shard && now >= q.not_before;
}

// When shard `q`'s tokens allow a worthwhile send: a linger's worth of its rate, or all it
// holds when that is less. So a rate-limited shard sends a batch every linger instead of a
// record whenever one token trickles in.
Clock::MonoTime PutPlanner::rate_ready_at(ShardQueue& q, Clock::MonoTime now) {
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

// How long a shard that waited for its tokens (or its window's room) waits for others before
// it sends: shards that wait for tokens fill a call together rather than each sending alone
// the moment it may, but not for long, since the room a shard does not use while it waits is
// lost to it (a shard at its limit gets its room back a second after it used it; each
// millisecond of waiting costs it a thousandth of its rate).
std::chrono::milliseconds PutPlanner::coalesce() const {
  return std::min(config_.linger, std::chrono::milliseconds(5));
}

// Whether a call is due now: flushing, closing, a shard that may send all it holds while
// put() waits for room (no more records can come to fill a call), a full call's worth that
// the shards may send now, or the linger of a shard that may send now ended. A record's
// linger counts from its put(); a shard that waited for its tokens also waits coalesce() from
// when they came. Lowers `wake` to when a shard may become sendable or its linger ends.
bool PutPlanner::call_due(Clock::MonoTime now, Urgency urgency, Clock::MonoTime& wake) {
  bool due = urgency.flush;
  double ready_records = 0;
  double ready_bytes = 0;
  for (auto& [id, q] : shards_) {
    if (q.items.empty()) continue;
    if (!sendable(q, now)) {
      if (q.in_flight < config_.max_in_flight_per_shard && closed_in_flight_.empty()) {
        wake = std::min(wake, q.not_before);
      }
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
    // With put() waiting for room no record can join this shard's: one whose whole queue may
    // go now gains nothing by lingering (one that waits for tokens still lets the others'
    // tokens come, to fill a call together).
    const double records_needed = config_.aggregate ? 1.0 : static_cast<double>(q.items.size());
    if (urgency.waiting_putters && records >= records_needed &&
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

PutPlanner::Next PutPlanner::next_call(Clock::MonoTime now, Urgency urgency) {
  Next next;
  next.wake = now + std::chrono::hours(1);
  PlannedCall& call = next.call;
  if (!call_due(now, urgency, next.wake)) return next;
  call.built = now;
  // Room for what it may take, at once (not grown a record at a time).
  call.entries.reserve(std::min(queued_records_, kMaxCallRecords));
  const std::size_t most_items = config_.aggregate ? kMaxReservedItems : kMaxCallRecords;
  call.items.reserve(std::min(queued_records_, most_items));
  // A call due takes from every shard that may send: those not yet ready for a linger's
  // worth give what their tokens allow now, so that the shards spend their tokens together
  // and come ready together again (one call for all of them, not one each as they drift
  // apart: a call's fixed cost is most of what a small record costs).
  for (auto& [id, q] : shards_) {
    if (!sendable(q, now)) continue;
    if (rate_ready_at(q, now) > now &&
        q.rate.ready_at(1, static_cast<double>(q.items.front()->bytes), now) > now) {
      continue;
    }
    if (take_from_shard(q, now, call, next.wake)) ++q.in_flight;
    if (call.entries.size() >= kMaxCallRecords) break;
  }
  if (!call.empty()) {
    // The next look, with the call's shards in flight (what was planned before it took them
    // is now, or a token away): when another call is due at once, now.
    next.wake = now + std::chrono::hours(1);
    if (call_due(now, urgency, next.wake)) next.wake = now;
  }
  return next;
}

// Moves the leading records of shard `q` into `call`, a Kinesis record at a time, while the
// call's limits and the shard's tokens allow. True when it took any.
bool PutPlanner::take_from_shard(ShardQueue& q, Clock::MonoTime now, PlannedCall& call,
                                 Clock::MonoTime& wake) {
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
    PlannedEntry e;
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

// Plans the next Kinesis record of shard `q` (non-empty): an aggregate of its leading small
// records, built in agg_ (records >= 2), or its first record alone. With `ordered_keys` an
// aggregate stops before a key the call already holds.
PutPlanner::Plan PutPlanner::plan_record(const ShardQueue& q, const KeySet* ordered_keys) {
  const PutItem& first = *q.items.front();
  if (!config_.aggregate || q.id.empty()) return Plan{1, first.bytes};
  agg_.clear();
  // The aggregate's own Kinesis record carries the first record's partition key and its hash
  // key as an explicit one.
  const std::size_t own_keys = first.pk.size() + kHashKeyDigits;
  const std::size_t limit =
      config_.aggregation_max_bytes - std::min(own_keys, config_.aggregation_max_bytes);
  // The records were written on the putting thread: their items' lines and their bytes are
  // asked for ahead of the copy into the aggregate.
  for (std::size_t i = 0; i < q.items.size(); ++i) {
    prefetch_item(q.items, i + 2 * kPrefetchAhead);
    prefetch_data(q.items, i + kPrefetchAhead);
    const PutItem& it = *q.items[i];
    if (ordered_keys != nullptr && ordered_keys->contains(it.key_id)) break;
    if (!agg_.add_within(it.pk, it.ehk, it.data, limit)) break;
  }
  if (agg_.count() < 2) return Plan{1, first.bytes};
  return Plan{agg_.count(), agg_.size() + own_keys};
}

// Takes the first `records` records off shard `q` into `call`, counting their attempt (and,
// with `ordered_keys`, their keys).
void PutPlanner::take_items(ShardQueue& q, std::size_t records, PlannedCall& call,
                            KeySet* ordered_keys) {
  for (std::size_t i = 0; i < records; ++i) {
    auto item = std::move(q.items.front());
    q.items.pop_front();
    queued_bytes_ -= item->bytes;
    q.queued_bytes -= item->bytes;
    --queued_records_;
    ++item->attempts;
    if (item->attempts > 1) ++counts_.records_retried;
    if (ordered_keys != nullptr) ordered_keys->insert(item->key_id);
    call.items.push_back(std::move(item));
  }
}

Status PutPlanner::entry_failure(const kinesis::PutRecordsEntryResult& r) {
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

PutPlanner::Settled PutPlanner::on_result(PlannedCall& call,
                                          const Result<kinesis::PutRecordsResult>& result,
                                          Clock::MonoTime now, Done& done) {
  const Counts before = counts_;
  Settled settled;
  Failed failed;
  std::vector<ShardOutcome> outcomes(call.shards.size());
  std::vector<std::unique_ptr<PutItem>> resend;
  for (std::size_t i = 0; i < call.entries.size(); ++i) {
    PlannedEntry& e = call.entries[i];
    ShardOutcome& outcome = outcomes[e.shard];
    outcome.sent_records += 1;
    outcome.sent_bytes += e.bytes;
    Status failure;
    if (!result.ok()) {
      failure = result.status();
      outcome.written_records += 1;  // the service may have written it
      outcome.written_bytes += e.bytes;
    } else if (const auto& r = result->records[i]; r.ok) {
      // Taken: the caller answers its records. Another shard than the map said: a split or
      // a merge, the map is to be read again (and an aggregate sent again, see the header).
      const std::string& predicted = call.shards[e.shard];
      const bool elsewhere = !predicted.empty() && result->shard_ids[r.shard] != predicted;
      if (elsewhere) settled.refresh_needed = true;
      outcome.succeeded = true;
      outcome.written_records += 1;
      outcome.written_bytes += e.bytes;
      if (elsewhere && e.aggregated()) {
        resend_misrouted(call, e, result->shard_ids[r.shard], resend, done);
        ++settled.aggregates_resent;
        continue;
      }
      counts_.records_succeeded += e.count;
      continue;
    } else {
      failure = entry_failure(r);
    }
    outcome.failed = true;
    if (entry_failed(call, e, failure, failed[call.shards[e.shard]], done)) {
      outcome.throttled = true;
    }
  }
  settle_shards(call, outcomes, now);
  retry_failed(failed, now, done);
  settled.retried += resend.size();
  // Held until the map is read again (set_map() moves them to the shards that replaced theirs,
  // free to go at once), or for kMisroutedHold when that read is slow or fails: sent again
  // meanwhile, by the old map, they would go astray once more.
  requeue_front(resend, now + kMisroutedHold, now);
  settled.succeeded = counts_.records_succeeded - before.records_succeeded;
  settled.failed = counts_.records_failed - before.records_failed;
  settled.throttled = counts_.throttled - before.throttled;
  for (const auto& [id, slot] : failed) settled.retried += slot.first.size();
  return settled;
}

// The records of aggregate `e`, which the service wrote to shard `written_to` instead of the
// shard the map predicted: to `resend`, or to `done` with a failure once out of attempts.
void PutPlanner::resend_misrouted(PlannedCall& call, PlannedEntry& e, const std::string& written_to,
                                  std::vector<std::unique_ptr<PutItem>>& resend, Done& done) {
  e.resent = true;
  for (std::uint32_t k = 0; k < e.count; ++k) {
    std::unique_ptr<PutItem>& item = call.items[e.first + k];
    if (item->attempts < config_.max_attempts) {
      resend.push_back(std::move(item));
      continue;
    }
    ++counts_.records_failed;
    Status failure(StatusCode::kUnavailable,
                   "its KPL aggregate was written to shard " + written_to + ", not to " +
                       call.shards[e.shard] +
                       " as the shard map said (a split or a merge), and was not sent again "
                       "after " +
                       std::to_string(item->attempts) +
                       " attempts: a consumer that drops aggregates holding records outside "
                       "the shard's hash key range (the Java KCL does) will not deliver it");
    done.emplace_back(std::move(item), std::move(failure));
  }
}

// An entry that failed: its records fail for good (not retryable, or out of attempts) or go
// to `slot`, their shard's records to retry, with the failure to back off for. True when the
// service throttled it (the shard's rate is cut once per call, by settle_shards()).
bool PutPlanner::entry_failed(PlannedCall& call, const PlannedEntry& e, const Status& failure,
                              FailedSlot& slot, Done& done) {
  const bool throttled = failure.aws() && aws::is_throttling_error(failure.aws()->error_type);
  if (throttled) ++counts_.throttled;
  // The retry policy (aws/retry.h): a record is sent again after kUnavailable only.
  const bool retryable = aws::is_retryable(failure.code());
  if (retryable) slot.second = failure;  // what the shard's backoff is for
  for (std::uint32_t k = 0; k < e.count; ++k) {
    auto& item = call.items[e.first + k];
    if (!retryable || item->attempts >= config_.max_attempts) {
      ++counts_.records_failed;
      Status final_status(failure.code(), failure.message() + " (after " +
                                              std::to_string(item->attempts) + " attempts)");
      if (failure.aws()) {
        final_status = Status(failure.code(), final_status.message(), *failure.aws());
      }
      done.emplace_back(std::move(item), final_status);
    } else {
      slot.first.push_back(std::move(item));
    }
  }
  return throttled;
}

// Ends the call on each of its shards: one call fewer in flight; its records leave the
// shard's flight and those written count in its window (ShardRate); a throttle cuts the
// shard's rate once for the call; records taken give their retries' quota back, and a call
// without failures resets the backoff.
void PutPlanner::settle_shards(const PlannedCall& call, const std::vector<ShardOutcome>& outcomes,
                               Clock::MonoTime now) {
  for (std::size_t i = 0; i < call.shards.size(); ++i) {
    const ShardOutcome& outcome = outcomes[i];
    auto it = shards_.find(call.shards[i]);
    if (it == shards_.end()) continue;
    ShardQueue& q = it->second;
    --q.in_flight;
    if (q.in_flight == 0 && !closed_in_flight_.empty()) closed_in_flight_.erase(q.id);
    q.rate.on_answered(outcome.sent_records, outcome.sent_bytes, outcome.written_records,
                       outcome.written_bytes, call.built, now);
    if (outcome.throttled) {
      (void)q.rate.on_throttled(call.built, outcome.sent_records - outcome.written_records,
                                outcome.sent_bytes - outcome.written_bytes, now);
    }
    // The service took records of this shard: what its retries took goes back to the quota;
    // a call with no failure for the shard also resets its backoff.
    if (outcome.succeeded && q.quota_taken > 0) {
      policy_.on_success(q.quota_taken);
      q.quota_taken = 0;
    }
    if (outcome.succeeded && !outcome.failed) q.retry_round = 0;
  }
}

// Requeues each shard's failed records after the retry policy's delay, or fails them when
// its quota is spent.
void PutPlanner::retry_failed(Failed& failed, Clock::MonoTime now, Done& done) {
  // The call's retry pays the quota once, whatever the number of its shards (a call of 120
  // shards failing as a whole emptied a quota of 500 at 5 a shard, and records failed after
  // one attempt): the first shard retried pays, the others follow on that payment.
  bool paid = false;
  for (auto& [id, slot] : failed) {
    auto& items = slot.first;
    if (items.empty()) continue;
    auto it = shards_.find(id);
    std::optional<std::chrono::milliseconds> delay;
    if (it != shards_.end()) {
      delay =
          paid ? policy_.next_delay_paid(slot.second, it->second.retry_round)
               : policy_.next_delay(slot.second, it->second.retry_round, &it->second.quota_taken);
      paid = paid || delay.has_value();
    }
    if (!delay) {
      for (auto& item : items) {
        ++counts_.records_failed;
        done.emplace_back(
            std::move(item),
            Status(slot.second.code(), slot.second.message() + " (retry quota exhausted after " +
                                           std::to_string(item->attempts) + " attempts)"));
      }
      continue;
    }
    ++it->second.retry_round;
    requeue_front(items, now + *delay, now);
  }
}

// Puts `items` back at the front of their shards' queues (per the current map), oldest
// first, not to be sent before `not_before`.
void PutPlanner::requeue_front(std::vector<std::unique_ptr<PutItem>>& items,
                               Clock::MonoTime not_before, Clock::MonoTime now) {
  for (auto r = items.rbegin(); r != items.rend(); ++r) {
    ShardQueue& q = queue_for((*r)->hash, now);
    queued_bytes_ += (*r)->bytes;
    q.queued_bytes += (*r)->bytes;
    ++queued_records_;
    q.not_before = std::max(q.not_before, not_before);
    q.items.push_front(std::move(*r));
  }
}

}  // namespace kcl::producer
