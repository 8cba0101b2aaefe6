#include "tail_reader.h"

#include <algorithm>
#include <thread>

#include "base/status_macros.h"
#include "retrieval/shard_fetcher.h"

namespace kcl::cli {

TailReader::TailReader(kinesis::KinesisClient& client, TailOptions options, Emit emit)
    : client_(client), o_(std::move(options)), emit_(std::move(emit)) {
  retrieval_.idle_time_between_calls = o_.idle_pause;
  retrieval_.max_read_bytes_per_second = o_.read_rate;
  retrieval_.max_prefetch_records = 1;  // take each response before asking for the next
}

long long TailReader::corrupt_aggregates() const {
  long long n = corrupt_done_;
  for (const auto& [id, r] : active_) n += static_cast<long long>(r.source->corrupt_aggregates());
  return n;
}

Status TailReader::refresh_shards() {
  KCL_ASSIGN_OR_RETURN(auto listed, client_.list_shards(o_.stream));
  for (auto& s : listed) shards_[s.shard_id] = std::move(s);
  return Status::Ok();
}

// Shards whose parents (those still in the listing) have all been read to their end.
void TailReader::start_ready_shards() {
  const bool first = started_.empty();
  for (const auto& [id, shard] : shards_) {
    if (started_.count(id) || finished_.count(id)) continue;
    bool ready = true;
    for (const std::string* parent : {&shard.parent_shard_id, &shard.adjacent_parent_shard_id}) {
      if (!parent->empty() && shards_.count(*parent) && !finished_.count(*parent)) ready = false;
    }
    if (ready) start_shard(shard, first);
  }
}

void TailReader::start_shard(const kinesis::Shard& shard, bool first_generation) {
  started_.insert(shard.shard_id);
  StartPosition from = o_.from;
  if (from.kind == StartPosition::Kind::kLatest) {
    // From "now": closed shards of the first listing hold nothing new; children that
    // appear later are read from their start so nothing written to them is missed.
    if (first_generation && shard.closed()) {
      finished_.insert(shard.shard_id);
      return;
    }
    if (!first_generation) from = StartPosition::trim_horizon();
  }
  Reading r;
  if (o_.source_factory) {
    r.source = o_.source_factory(o_.stream, shard.shard_id, from);
  } else {
    r.source = std::make_shared<retrieval::ShardFetcher>(client_, o_.stream, shard.shard_id, from,
                                                         retrieval_, SystemClock::instance());
  }
  active_[shard.shard_id] = std::move(r);
}

bool TailReader::emit_queued(Reading& r) {
  while (auto batch = r.source->take_batch()) {
    for (const Record& rec : batch->records) {
      if (o_.max_records > 0 && emitted_ >= o_.max_records) return false;
      ++emitted_;
      if (!emit_(rec)) return false;
    }
  }
  return true;
}

Status TailReader::run() {
  KCL_RETURN_IF_ERROR(refresh_shards());
  start_ready_shards();
  const Clock& clock = SystemClock::instance();
  while (!stop_ && !stop_requested()) {
    if (o_.max_records > 0 && emitted_ >= o_.max_records) break;
    bool any_ended = false;
    bool all_caught_up = true;
    auto earliest = clock.now() + o_.idle_pause;
    for (auto it = active_.begin(); it != active_.end() && !stop_;) {
      Reading& r = it->second;
      if (r.next_step <= clock.now()) {
        const retrieval::FetchStep step = r.source->fetch_step();
        if (step.outcome == retrieval::FetchOutcome::kRecords) r.caught_up = false;
        if (step.outcome == retrieval::FetchOutcome::kNoRecords) {
          r.caught_up = r.source->millis_behind_latest() == 0;
        }
        r.next_step = step.next_step_at;
        if (!emit_queued(r)) stop_ = true;
      }
      if (r.source->finished() && r.source->drained()) {
        Status failed = r.source->terminal_error();
        if (!failed.ok()) return failed;
        corrupt_done_ += static_cast<long long>(r.source->corrupt_aggregates());
        finished_.insert(it->first);
        it = active_.erase(it);
        any_ended = true;
        continue;
      }
      all_caught_up = all_caught_up && r.caught_up;
      earliest = std::min(earliest, r.next_step);
      ++it;
    }
    if (stop_) break;
    if (any_ended) {
      // Children are found by listing (ChildShards is not always returned).
      KCL_RETURN_IF_ERROR(refresh_shards());
      start_ready_shards();
      continue;
    }
    if (all_caught_up && o_.stop_at_end) break;
    if (earliest > clock.now()) {
      if (o_.before_wait && !o_.before_wait()) break;
      std::this_thread::sleep_until(earliest);
    }
  }
  return Status::Ok();
}

}  // namespace kcl::cli
