#include "worker/stream_set.h"

#include <algorithm>
#include <exception>
#include <iterator>
#include <random>
#include <set>
#include <utility>

#include "base/jitter.h"
#include "base/status_macros.h"
#include "leases/stream_identifier.h"

namespace kcl::worker {
namespace {

using std::chrono::milliseconds;

// How soon a stream's first sync is tried again after it failed.
constexpr milliseconds kFirstSyncRetry{5000};

// The account of "arn:aws:kinesis:<region>:<account>:stream/<name>"; empty when it has none.
std::string account_of(const std::string& arn) {
  std::vector<std::string> fields = arn_fields(arn);
  return fields.size() >= 6 ? std::move(fields[4]) : std::string();
}

Clock::MonoTime::duration jittered(milliseconds interval) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return base::jittered(interval, 0.2, rng);
}

}  // namespace

std::optional<std::string> stream_name_problem(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.size() > 128) return "is longer than 128 characters";
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) {
      return "\"" + name + "\" holds '" + std::string(1, c) + "' (allowed: a-z A-Z 0-9 _ . -)";
    }
  }
  return std::nullopt;
}

std::vector<std::string> arn_fields(std::string_view arn) {
  std::vector<std::string> fields;
  for (std::size_t at = 0;;) {
    const std::size_t colon = arn.find(':', at);
    fields.emplace_back(arn.substr(at, colon == std::string_view::npos ? colon : colon - at));
    if (colon == std::string_view::npos) return fields;
    at = colon + 1;
  }
}

std::optional<std::string> initial_position_problem(const InitialPosition& position) {
  if (position.kind == StartPosition::Kind::kAfterCheckpoint) {
    return "is AFTER_CHECKPOINT, a resume point; it must be TRIM_HORIZON, LATEST or "
           "AT_TIMESTAMP";
  }
  const std::vector<std::string> problems = position.validate();
  if (problems.empty()) return std::nullopt;
  std::string out = "is invalid: ";
  for (std::size_t i = 0; i < problems.size(); ++i) out += (i == 0 ? "" : "; ") + problems[i];
  return out;
}

StreamSet::StreamSet(const WorkerConfig& config, kinesis::KinesisClient& kinesis,
                     leases::LeaseStore& store, MetricsSink& metrics, const Clock& clock, Log log)
    : config_(config),
      multi_(config.multi_stream()),
      kinesis_(kinesis),
      store_(store),
      metrics_(metrics),
      clock_(clock),
      log_(std::move(log)) {}

std::vector<StreamConfig> StreamSet::configured_streams() {
  if (!multi_) return {StreamConfig{config_.stream_name, std::nullopt}};
  if (!config_.stream_tracker) return config_.streams;
  try {
    return config_.stream_tracker();
  } catch (const std::exception& e) {
    log_(LogLevel::kWarn, std::string("the stream tracker threw: ") + e.what() +
                              "; keeping the streams it listed before");
  } catch (...) {
    log_(LogLevel::kWarn, "the stream tracker threw; keeping the streams it listed before");
  }
  std::vector<StreamConfig> last;
  for (const auto& [name, e] : entries_) {
    if (!e.missing_since) last.push_back(e.config);
  }
  return last;
}

void StreamSet::refresh_list(Clock::MonoTime now) {
  std::set<std::string> listed;
  for (StreamConfig& s : configured_streams()) {
    if (auto problem = stream_name_problem(s.name)) {
      if (reported_bad_names_.insert(s.name).second) {  // once per name
        log_(LogLevel::kWarn,
             "the stream tracker listed a stream whose name " + *problem + "; it is left out");
      }
      continue;
    }
    listed.insert(s.name);
    if (s.initial_position) {
      if (auto problem = initial_position_problem(*s.initial_position)) {
        if (reported_bad_positions_.insert(s.name).second) {  // once per stream
          log_(LogLevel::kWarn, "the stream tracker gave stream " + s.name +
                                    " an initial position that " + *problem +
                                    "; the worker's initial position is used");
        }
        s.initial_position.reset();
      }
    }
    // A former stream listed again before its leases could be deleted keeps them.
    std::erase_if(deletions_, [&](const auto& d) {
      if (!d.second.former || d.second.stream != s.name) return false;
      log_(LogLevel::kInfo, "stream " + s.name + " is listed again; its leases are kept");
      return true;
    });
    auto [it, added] = entries_.try_emplace(s.name, s.name);
    Entry& e = it->second;
    if (added) {
      if (multi_ && next_list_ != Clock::MonoTime{}) {
        log_(LogLevel::kInfo, "stream " + s.name + " added");
      }
      e.next_sync = now;
    } else if (e.missing_since) {
      log_(LogLevel::kInfo, "stream " + s.name + " is listed again; its leases are kept");
      e.missing_since.reset();
      e.next_sync = now;
    }
    e.config = std::move(s);
  }
  for (auto& [name, e] : entries_) {
    if (listed.count(name) || e.missing_since) continue;
    e.missing_since = now;
    const milliseconds delay = config_.former_stream_deletion_delay;
    log_(LogLevel::kInfo, "stream " + name + " is no longer listed; " +
                              (delay.count() == 0 ? std::string("its leases are kept")
                                                  : "its leases are deleted in " +
                                                        std::to_string(delay.count() / 1000) +
                                                        " s unless it is listed again"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  positions_.clear();
  names_.clear();
  for (const auto& [name, e] : entries_) {
    positions_[name] = e.config.initial_position.value_or(config_.initial_position);
    if (e.missing_since) continue;
    names_ += (names_.empty() ? "" : ",") + name;
  }
}

Status StreamSet::resolve(Entry& e) {
  if (e.syncer) return Status::Ok();
  const InitialPosition position = e.config.initial_position.value_or(config_.initial_position);
  auto lister = shardsync::kinesis_shard_lister(kinesis_, e.config.name);
  if (!multi_) {
    e.syncer =
        std::make_unique<shardsync::ShardSyncer>(std::move(lister), store_, position, metrics_);
    return Status::Ok();
  }
  next_resolve_ = std::max(next_resolve_, clock_.now()) +
                  std::chrono::duration_cast<Clock::MonoTime::duration>(std::chrono::seconds(1)) /
                      kResolvesPerSecond;
  auto summary = kinesis_.describe_stream_summary(e.config.name);
  if (!summary.ok()) {
    if (summary.status().code() == StatusCode::kNotFound) {
      return Status(StatusCode::kNotFound, "stream \"" + e.config.name + "\" does not exist");
    }
    return summary.status().with_context("describing stream " + e.config.name + ": ");
  }
  leases::StreamIdentifier id;
  id.account_id = account_of(summary->stream_arn);
  id.stream_name = e.config.name;
  id.creation_epoch = std::chrono::duration_cast<std::chrono::seconds>(
                          summary->creation_timestamp.time_since_epoch())
                          .count();
  if (!leases::StreamIdentifier::parse(id.serialize())) {
    return Status(StatusCode::kInternal, "stream " + e.config.name + ": no account in its ARN \"" +
                                             summary->stream_arn + "\" or no creation time");
  }
  e.identifier = id.serialize();
  // The same stream (same creation time) is there after all: its leases stay.
  deletions_.erase(e.identifier);
  {
    std::lock_guard<std::mutex> lock(mu_);
    arns_[e.config.name] = summary->stream_arn;
  }
  e.syncer = std::make_unique<shardsync::ShardSyncer>(std::move(lister), store_, position, metrics_,
                                                      e.identifier);
  return Status::Ok();
}

Status StreamSet::delete_leases_of(const std::string& identifier, Turn& turn) {
  KCL_ASSIGN_OR_RETURN(std::vector<Lease> all, store_.list_leases());
  for (const Lease& l : all) {
    if (leases::lease_stream_identifier(l) != identifier) continue;
    KCL_RETURN_IF_ERROR(store_.delete_lease(l.lease_key));
    ++turn.leases_deleted;
  }
  return Status::Ok();
}

void StreamSet::delete_later(const std::string& stream, const std::string& identifier, bool former,
                             Turn& turn) {
  if (identifier.empty()) return;  // never resolved: it has no leases of its own here
  auto it = deletions_.try_emplace(identifier, stream, former).first;
  if (!try_deletion(identifier, it->second, turn)) return;
  deletions_.erase(it);
}

bool StreamSet::try_deletion(const std::string& identifier, Deletion& d, Turn& turn) {
  const auto now = clock_.now();
  Status s = delete_leases_of(identifier, turn);
  if (s.ok()) {
    if (auto line = d.failures.succeeded(now)) log_(LogLevel::kInfo, *line);
    return true;
  }
  // A throttle or an unavailable table must not stop the worker: the identifier is kept and
  // the deletion tried again at the next interval (what was deleted stays deleted).
  const milliseconds retry = config_.processing.shard_sync_interval;
  const Clock::MonoTime again = now + jittered(retry);
  if (next_deletion_ <= now || again < next_deletion_) next_deletion_ = again;
  if (auto line = d.failures.failed(s, now)) {
    log_(LogLevel::kWarn, *line + "; tried again in about " + std::to_string(retry.count() / 1000) +
                              " s until they are gone");
  }
  return false;
}

void StreamSet::retry_deletions(Clock::MonoTime now, Turn& turn) {
  if (deletions_.empty() || now < next_deletion_) return;
  next_deletion_ = Clock::MonoTime{};
  for (auto it = deletions_.begin(); it != deletions_.end();) {
    it = try_deletion(it->first, it->second, turn) ? deletions_.erase(it) : std::next(it);
  }
}

Status StreamSet::sync(Entry& e, Turn& turn) {
  KCL_RETURN_IF_ERROR(resolve(e));
  // Several streams: one scan of the lease table serves every stream's sync for half the
  // sync interval (each reads its own stream's leases out of it) while there is nothing to
  // create; a sync that finds something to create reads the table afresh first
  // (shard_syncer.h).
  const auto now = clock_.now();
  if (multi_ && (!listing_ || now - listing_at_ >= config_.processing.shard_sync_interval / 2)) {
    auto listed = store_.list_leases();
    if (!listed.ok()) return listed.status().with_context("shard sync: listing leases: ");
    listing_ = std::move(listed).value();
    listing_at_ = now;
  }
  auto r = e.syncer->sync_once(multi_ ? &*listing_ : nullptr);
  if (r.ok()) {
    turn.leases_created += r->leases_created;
    turn.leases_deleted += r->leases_deleted;
    return Status::Ok();
  }
  if (multi_ && r.status().code() == StatusCode::kNotFound && !e.identifier.empty()) {
    // Deleted: its leases go now (the identifier goes with the deletion, kept until it
    // succeeds); listed still, it is resolved again later (a stream made again under the
    // name is another stream).
    log_(LogLevel::kWarn, "stream " + e.config.name + " no longer exists; deleting its leases");
    const std::string gone = std::exchange(e.identifier, std::string());
    e.syncer.reset();
    delete_later(e.config.name, gone, /*former=*/false, turn);
    return Status::Ok();
  }
  return r.status();
}

void StreamSet::schedule_spread(Clock::MonoTime now) {
  const milliseconds interval = config_.processing.shard_sync_interval;
  const auto n = static_cast<long long>(entries_.size());
  long long i = 0;
  for (auto& [name, e] : entries_) {
    ++i;
    if (multi_) {
      e.next_sync = now + std::chrono::duration_cast<Clock::MonoTime::duration>(interval * i / n);
    } else {
      e.next_sync = now + jittered(interval);
    }
  }
}

Status StreamSet::check_table_kind() {
  auto listed = store_.list_leases();
  if (!listed.ok()) return listed.status().with_context("listing leases: ");
  KCL_RETURN_IF_ERROR(shardsync::check_lease_table_kind(*listed, true));
  listing_ = std::move(listed).value();
  listing_at_ = clock_.now();
  return Status::Ok();
}

Result<StreamSet::Turn> StreamSet::start() {
  const auto now = clock_.now();
  listing_.reset();
  if (next_list_ == Clock::MonoTime{}) {
    refresh_list(now);
    next_list_ = now + config_.stream_poll_interval;
  }
  Turn turn;
  if (multi_ && periodic_gate_ && !periodic_gate_()) {
    // Another worker syncs (or this one, once it runs the periodic sync): every stream is
    // due, and waits for the gate.
    KCL_RETURN_IF_ERROR(check_table_kind());
    for (auto& [name, e] : entries_) e.next_sync = now;
    return turn;
  }
  // A multi-stream worker goes on without a stream that does not exist (yet), and without one
  // whose sync fails otherwise (an access error, a throttle past the retries) while another
  // stream's succeeds: that one is tried again soon. When none succeeds (the lease table or
  // the credentials, say), the start fails with the first failure.
  std::vector<Entry*> retry_soon;
  std::vector<std::string> lines;  // their failures, logged once the start goes on
  std::optional<Status> first_failure;
  bool any_synced = false;
  for (auto& [name, e] : entries_) {
    Status s = sync(e, turn);
    if (s.ok()) {
      any_synced = true;
      if (auto line = e.sync_failures.succeeded(now)) log_(LogLevel::kInfo, *line);
      continue;
    }
    if (!multi_) return s.with_context("syncing the shards of stream " + name + ": ");
    if (s.code() == StatusCode::kNotFound) {
      if (auto line = e.sync_failures.failed(s, now)) {
        log_(LogLevel::kWarn, *line + "; it is looked for again at each shard sync");
      }
      continue;
    }
    if (!first_failure) {
      first_failure = s.with_context("syncing the shards of stream " + name + ": ");
    }
    if (auto line = e.sync_failures.failed(s, now)) lines.push_back(*line);
    retry_soon.push_back(&e);
  }
  if (first_failure && !any_synced) return *first_failure;
  for (const std::string& line : lines) {
    log_(LogLevel::kWarn, line + "; the other streams start without it; tried again in " +
                              std::to_string(kFirstSyncRetry.count() / 1000) + " s");
  }
  schedule_spread(now);
  for (Entry* e : retry_soon) e->next_sync = std::min(e->next_sync, now + kFirstSyncRetry);
  return turn;
}

void StreamSet::sync_unsynced_soon() {
  const auto now = clock_.now();
  for (auto& [name, e] : entries_) {
    if (!e.missing_since && !e.syncer) e.next_sync = std::min(e.next_sync, now);
  }
}

Result<StreamSet::Turn> StreamSet::tick(const std::set<std::string>& sync_now) {
  const auto now = clock_.now();
  if (multi_ && config_.stream_tracker && now >= next_list_) {
    refresh_list(now);
    next_list_ = now + config_.stream_poll_interval;
  }
  Turn turn;
  retry_deletions(now, turn);
  const milliseconds delay = config_.former_stream_deletion_delay;
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& e = it->second;
    if (e.missing_since) {
      if (delay.count() > 0 && now - *e.missing_since >= delay) {
        log_(LogLevel::kInfo, "stream " + it->first + " has not been listed for " +
                                  std::to_string(delay.count() / 1000) + " s: deleting its leases");
        delete_later(it->first, e.identifier, /*former=*/true, turn);
        it = entries_.erase(it);
        continue;
      }
    } else if (const bool sync_all = sync_now.count(it->first) || sync_now.count("");
               sync_all || now >= e.next_sync) {
      if (!sync_all && multi_ && !e.syncer && now < next_resolve_) {
        e.next_sync = next_resolve_;  // DescribeStreamSummary paced: this one's turn comes
        ++it;
        continue;
      }
      e.next_sync = now + jittered(config_.processing.shard_sync_interval);
      if (!sync_all && periodic_gate_ && !periodic_gate_()) {
        ++it;  // another worker syncs periodically; this one looks again next interval
        continue;
      }
      Status s = sync(e, turn);
      if (s.ok()) {
        if (auto line = e.sync_failures.succeeded(now)) log_(LogLevel::kInfo, *line);
      } else {
        if (!multi_ && s.code() == StatusCode::kNotFound) return s;
        // A stream never synced here (its leases may not exist yet) is tried again soon after
        // a transient failure; one that does not exist (yet) at the next interval.
        if (!e.syncer && s.code() != StatusCode::kNotFound) {
          e.next_sync = std::min(e.next_sync, now + kFirstSyncRetry);
        }
        // Every interval for ever for a listed stream that does not exist: the 1st, 3rd,
        // 10th... failure in a row is logged, with the count.
        if (auto line = e.sync_failures.failed(s, now)) log_(LogLevel::kWarn, *line);
      }
    }
    ++it;
  }
  return turn;
}

Clock::MonoTime StreamSet::next_due() const {
  Clock::MonoTime due = Clock::MonoTime::max();
  if (multi_ && config_.stream_tracker) due = next_list_;
  if (!deletions_.empty()) due = std::min(due, next_deletion_);
  const milliseconds delay = config_.former_stream_deletion_delay;
  for (const auto& [name, e] : entries_) {
    if (!e.missing_since) {
      due = std::min(due, e.next_sync);
    } else if (delay.count() > 0) {
      due = std::min(due, *e.missing_since + delay);
    }
  }
  return due;
}

InitialPosition StreamSet::initial_position_of(const std::string& stream) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = positions_.find(stream);
  return it == positions_.end() ? config_.initial_position : it->second;
}

std::string StreamSet::names() const {
  std::lock_guard<std::mutex> lock(mu_);
  return names_;
}

std::vector<std::string> StreamSet::stream_names() const {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(mu_);
  std::string_view rest = names_;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    out.emplace_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return out;
}

std::optional<std::string> StreamSet::stream_arn_of(const std::string& stream) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = arns_.find(stream);
  if (it == arns_.end()) return std::nullopt;
  return it->second;
}

}  // namespace kcl::worker
