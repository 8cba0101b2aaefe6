#include "tail_reader.h"

#include <thread>

#include "retrieval/kpl_deaggregator.h"

namespace kcl::cli {

TailReader::TailReader(kinesis::KinesisClient& client, TailOptions options, Emit emit)
    : client_(client), o_(std::move(options)), emit_(std::move(emit)) {}

Status TailReader::refresh_shards() {
  KCL_ASSIGN_OR_RETURN(auto listed, client_.list_shards(o_.stream));
  for (auto& s : listed) shards_[s.shard_id] = std::move(s);
  return Status::Ok();
}

// Shards whose parents (those still in the listing) have all been read to their end.
Status TailReader::start_ready_shards() {
  const bool first = started_.empty();
  for (const auto& [id, shard] : shards_) {
    if (started_.count(id) || finished_.count(id)) continue;
    bool ready = true;
    for (const std::string* parent : {&shard.parent_shard_id, &shard.adjacent_parent_shard_id}) {
      if (!parent->empty() && shards_.count(*parent) && !finished_.count(*parent)) ready = false;
    }
    if (ready) KCL_RETURN_IF_ERROR(start_shard(shard, first));
  }
  return Status::Ok();
}

Status TailReader::start_shard(const kinesis::Shard& shard, bool first_generation) {
  started_.insert(shard.shard_id);
  kinesis::IteratorPosition pos;
  switch (o_.from.kind) {
    case StartPosition::Kind::kTrimHorizon:
      pos.type = kinesis::IteratorType::kTrimHorizon;
      break;
    case StartPosition::Kind::kLatest:
      // From "now": closed shards of the first listing hold nothing new; children that
      // appear later are read from their start so nothing written to them is missed.
      if (first_generation && shard.closed()) {
        finished_.insert(shard.shard_id);
        return Status::Ok();
      }
      pos.type =
          first_generation ? kinesis::IteratorType::kLatest : kinesis::IteratorType::kTrimHorizon;
      break;
    case StartPosition::Kind::kAtTimestamp:
      pos.type = kinesis::IteratorType::kAtTimestamp;
      pos.timestamp = o_.from.timestamp;
      break;
  }
  KCL_ASSIGN_OR_RETURN(auto it, client_.get_shard_iterator(o_.stream, shard.shard_id, pos));
  active_[shard.shard_id] = Reading{std::move(it), "", false, {}};
  return Status::Ok();
}

Result<bool> TailReader::poll(const std::string& shard_id, Reading& r) {
  auto got = client_.get_records(r.iterator, 10000);
  if (!got.ok() && got.status().code() == StatusCode::kExpiredIterator) {
    kinesis::IteratorPosition pos;
    if (r.last_sequence.empty()) {
      pos.type = kinesis::IteratorType::kTrimHorizon;
    } else {
      pos.type = kinesis::IteratorType::kAfterSequenceNumber;
      pos.sequence_number = r.last_sequence;
    }
    KCL_ASSIGN_OR_RETURN(r.iterator, client_.get_shard_iterator(o_.stream, shard_id, pos));
    return true;
  }
  if (!got.ok()) return got.status();
  std::vector<Record> records;
  for (auto& kr : got->records) {
    r.last_sequence = kr.sequence_number;
    auto d = retrieval::deaggregate(std::move(kr), shard_id, records);
    if (d.corrupt()) ++corrupt_;
  }
  for (const auto& rec : records) {
    if (o_.max_records > 0 && emitted_ >= o_.max_records) break;
    ++emitted_;
    if (!emit_(rec)) {
      stop_ = true;
      break;
    }
  }
  r.caught_up = records.empty() && got->millis_behind_latest == 0;
  if (got->shard_ended()) return false;
  r.iterator = std::move(*got->next_shard_iterator);
  return true;
}

Status TailReader::run() {
  KCL_RETURN_IF_ERROR(refresh_shards());
  KCL_RETURN_IF_ERROR(start_ready_shards());
  // At most 5 GetRecords calls per second per shard (the service limit).
  const auto min_gap = std::chrono::milliseconds(200);
  while (!stop_ && !stop_requested()) {
    if (o_.max_records > 0 && emitted_ >= o_.max_records) break;
    bool any_ended = false;
    bool all_caught_up = true;
    auto now = std::chrono::steady_clock::now();
    auto earliest = now + o_.idle_pause;
    for (auto it = active_.begin(); it != active_.end() && !stop_;) {
      Reading& r = it->second;
      if (r.next_call > now) {
        all_caught_up = all_caught_up && r.caught_up;
        earliest = std::min(earliest, r.next_call);
        ++it;
        continue;
      }
      r.next_call = now + min_gap;  // at most 5 GetRecords per second per shard (its limit)
      KCL_ASSIGN_OR_RETURN(bool more, poll(it->first, r));
      if (!more) {
        finished_.insert(it->first);
        it = active_.erase(it);
        any_ended = true;
        continue;
      }
      all_caught_up = all_caught_up && r.caught_up;
      ++it;
    }
    if (any_ended) {
      // Children are found by listing (ChildShards is not always returned).
      KCL_RETURN_IF_ERROR(refresh_shards());
      KCL_RETURN_IF_ERROR(start_ready_shards());
      continue;
    }
    if (all_caught_up) {
      if (o_.stop_at_end) break;
      std::this_thread::sleep_until(earliest);
    }
  }
  return Status::Ok();
}

}  // namespace kcl::cli
