#include "coordination/in_memory_coordination_store.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/status_macros.h"
#include "coordination/lease_load_text.h"

namespace kcl::coordination {

Status InMemoryCoordinationStore::fault_locked(std::string_view worker_id) {
  if (fail_calls_ > 0) {
    --fail_calls_;
    return Status(fail_code_, "injected coordination store fault");
  }
  if (!worker_id.empty()) {
    auto it = partitioned_.find(worker_id);
    if (it != partitioned_.end() && it->second) {
      return Status(StatusCode::kUnavailable, "worker " + std::string(worker_id) + " is cut off");
    }
  }
  return Status::Ok();
}

Status InMemoryCoordinationStore::condition_failed(std::string_view what) {
  ++stats_.failed_conditions;
  return Status(StatusCode::kConditionFailed, std::string(what));
}

namespace {

std::size_t number_bytes(std::int64_t v) { return 1 + (std::to_string(v).size() + 1) / 2; }

// An entry's size as DynamoDB counts it: attribute names and values, as the DynamoDB store
// writes them ("key" and "kcl-cpp/worker/<id>" or "kcl-cpp/leader" included).
std::size_t entry_bytes(const WorkerEntry& w) {
  std::size_t n = 3 + 15 + w.worker_id.size() + 8 + w.worker_id.size() + 11 + w.incarnation.size();
  n += 9 + number_bytes(w.heartbeat) + 10 + number_bytes(w.lease_count);
  n += 8 + 1;
  if (!w.lease_kbps.empty()) n += 9 + encode_lease_load(w.lease_kbps).size();
  if (!w.status_url.empty()) n += 9 + w.status_url.size();
  return n;
}

std::size_t lock_bytes(const std::optional<LeaderEntry>& l) {
  if (!l) return 0;
  return 3 + 14 + 9 + l->owner.value_or("").size() + 16 + l->owner_incarnation.size() + 13 +
         number_bytes(l->counter) + 13 + number_bytes(l->leases_version) +
         (l->attention ? 9 + number_bytes(l->attention) : 0);
}

double units_of(std::size_t bytes, double unit_bytes) {
  return std::max(1.0, std::ceil(static_cast<double>(bytes) / unit_bytes));
}

double read_factor(Consistency c) { return c == Consistency::kEventual ? 0.5 : 1.0; }

}  // namespace

void InMemoryCoordinationStore::count_read_locked(Consistency consistency, std::int64_t items,
                                                  double units) {
  ++stats_.reads;
  if (consistency == Consistency::kEventual) ++stats_.eventual_reads;
  stats_.items_read += items;
  stats_.read_units += units * read_factor(consistency);
}

void InMemoryCoordinationStore::count_write_locked(double units) {
  ++stats_.writes;
  stats_.write_units += units;
}

Result<CoordinationView> InMemoryCoordinationStore::read_all(Consistency consistency) {
  std::lock_guard<std::mutex> lock(mu_);
  KCL_RETURN_IF_ERROR(fault_locked(""));
  CoordinationView v;
  v.leader = leader_;
  std::size_t bytes = lock_bytes(leader_);
  for (const auto& [id, w] : workers_) {
    v.workers.push_back(w);
    bytes += entry_bytes(w);
  }
  count_read_locked(consistency, static_cast<std::int64_t>(v.workers.size()) + (leader_ ? 1 : 0),
                    units_of(bytes, 4096));
  return v;
}

Result<std::optional<LeaderEntry>> InMemoryCoordinationStore::read_leader(Consistency consistency) {
  std::lock_guard<std::mutex> lock(mu_);
  KCL_RETURN_IF_ERROR(fault_locked(""));
  count_read_locked(consistency, leader_ ? 1 : 0, units_of(lock_bytes(leader_), 4096));
  return leader_;
}

Result<WorkerEntry> InMemoryCoordinationStore::register_worker(const WorkerEntry& entry) {
  std::lock_guard<std::mutex> lock(mu_);
  KCL_RETURN_IF_ERROR(fault_locked(entry.worker_id));
  count_write_locked(1);
  if (auto it = workers_.find(entry.worker_id);
      it != workers_.end() && it->second.incarnation == entry.incarnation) {
    return condition_failed("register: the entry already is this incarnation's");
  }
  WorkerEntry fresh;
  fresh.worker_id = entry.worker_id;
  fresh.incarnation = entry.incarnation;
  fresh.lease_count = entry.lease_count;
  fresh.status_url = entry.status_url;
  fresh.draining = entry.draining;
  workers_[entry.worker_id] = fresh;
  return fresh;
}

Result<WorkerEntry> InMemoryCoordinationStore::heartbeat(const WorkerEntry& held,
                                                         const WorkerEntry& report) {
  std::lock_guard<std::mutex> lock(mu_);
  KCL_RETURN_IF_ERROR(fault_locked(held.worker_id));
  ++stats_.heartbeats;
  auto it = workers_.find(held.worker_id);
  if (it == workers_.end() || it->second.incarnation != held.incarnation) {
    count_write_locked(1);
    return condition_failed(it == workers_.end()
                                ? "heartbeat: the entry is gone (fenced)"
                                : "heartbeat: the entry is another incarnation's (fenced)");
  }
  WorkerEntry& w = it->second;
  w.heartbeat += 1;
  w.lease_count = report.lease_count;
  w.draining = report.draining;
  w.lease_kbps = report.lease_kbps;
  count_write_locked(units_of(entry_bytes(w), 1024));
  return w;
}

Status InMemoryCoordinationStore::fence_worker(const WorkerEntry& seen) {
  std::lock_guard<std::mutex> lock(mu_);
  KCL_RETURN_IF_ERROR(fault_locked(""));
  count_write_locked(1);
  ++stats_.fences;
  auto it = workers_.find(seen.worker_id);
  if (it == workers_.end()) return condition_failed("fence: the entry is gone");
  if (it->second.incarnation != seen.incarnation || it->second.heartbeat != seen.heartbeat) {
    return condition_failed("fence: the worker renewed its membership");
  }
  workers_.erase(it);
  return Status::Ok();
}

// The stored entry of `entry`'s worker when it is still that incarnation; else end().
std::map<std::string, WorkerEntry, std::less<>>::iterator
InMemoryCoordinationStore::find_incarnation_locked(const WorkerEntry& entry) {
  auto it = workers_.find(entry.worker_id);
  if (it != workers_.end() && it->second.incarnation != entry.incarnation) return workers_.end();
  return it;
}

Status InMemoryCoordinationStore::deregister_worker(const WorkerEntry& held) {
  std::lock_guard<std::mutex> lock(mu_);
  KCL_RETURN_IF_ERROR(fault_locked(held.worker_id));
  count_write_locked(1);
  auto it = find_incarnation_locked(held);
  if (it == workers_.end()) return condition_failed("deregister: not this incarnation's entry");
  workers_.erase(it);
  return Status::Ok();
}

Result<LeaderEntry> InMemoryCoordinationStore::acquire_leadership(
    const std::optional<LeaderEntry>& seen, std::string_view worker_id,
    std::string_view incarnation) {
  std::lock_guard<std::mutex> lock(mu_);
  KCL_RETURN_IF_ERROR(fault_locked(worker_id));
  count_write_locked(1);
  ++stats_.leader_writes;
  if (!seen) {
    if (leader_) return condition_failed("leader: the entry exists");
    leader_ = LeaderEntry{};
  } else if (!leader_ || leader_->counter != seen->counter || leader_->owner != seen->owner) {
    return condition_failed("leader: the entry changed");
  }
  leader_->owner = std::string(worker_id);
  leader_->owner_incarnation = std::string(incarnation);
  leader_->counter += 1;
  return *leader_;
}

Result<LeaderEntry> InMemoryCoordinationStore::renew_leadership(const LeaderEntry& held) {
  return renew_lock(held, false);
}

Result<LeaderEntry> InMemoryCoordinationStore::call_attention(const LeaderEntry& held) {
  return renew_lock(held, true);
}

Result<LeaderEntry> InMemoryCoordinationStore::renew_lock(const LeaderEntry& held, bool attention) {
  std::lock_guard<std::mutex> lock(mu_);
  KCL_RETURN_IF_ERROR(fault_locked(held.owner.value_or("")));
  count_write_locked(1);
  ++stats_.leader_writes;
  if (!leader_ || leader_->owner != held.owner ||
      leader_->owner_incarnation != held.owner_incarnation) {
    return condition_failed("leader: the lock changed hands");
  }
  leader_->counter += 1;
  if (attention) leader_->attention += 1;
  return *leader_;
}

Status InMemoryCoordinationStore::release_leadership(const LeaderEntry& held) {
  std::lock_guard<std::mutex> lock(mu_);
  KCL_RETURN_IF_ERROR(fault_locked(held.owner.value_or("")));
  count_write_locked(1);
  ++stats_.leader_writes;
  if (!leader_ || leader_->owner != held.owner ||
      leader_->owner_incarnation != held.owner_incarnation) {
    return condition_failed("leader: the lock changed hands");
  }
  leader_->owner.reset();
  leader_->owner_incarnation.clear();
  leader_->counter += 1;
  return Status::Ok();
}

Status InMemoryCoordinationStore::note_leases_changed() {
  std::lock_guard<std::mutex> lock(mu_);
  KCL_RETURN_IF_ERROR(fault_locked(""));
  count_write_locked(1);
  if (!leader_) leader_ = LeaderEntry{};
  leader_->leases_version += 1;
  return Status::Ok();
}

CoordinationStoreStats InMemoryCoordinationStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void InMemoryCoordinationStore::reset_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = CoordinationStoreStats{};
}

void InMemoryCoordinationStore::fail_next(int calls, StatusCode code) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_calls_ = calls;
  fail_code_ = code;
}

void InMemoryCoordinationStore::set_partitioned(std::string_view worker_id, bool partitioned) {
  std::lock_guard<std::mutex> lock(mu_);
  partitioned_[std::string(worker_id)] = partitioned;
}

std::optional<WorkerEntry> InMemoryCoordinationStore::peek_worker(
    std::string_view worker_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return std::nullopt;
  return it->second;
}

std::optional<LeaderEntry> InMemoryCoordinationStore::peek_leader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leader_;
}

}  // namespace kcl::coordination
