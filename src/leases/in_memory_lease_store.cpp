#include "leases/in_memory_lease_store.h"

#include <algorithm>
#include <cmath>

namespace kcl::leases {
namespace {

constexpr std::size_t kScanPageBytes = 1024 * 1024;

std::size_t number_size(std::int64_t v) {
  // DynamoDB: about one byte per two significant digits, plus one.
  std::string digits = std::to_string(v < 0 ? -v : v);
  return (digits.size() + 1) / 2 + 1;
}

std::size_t attr(std::string_view name, std::size_t value_size) { return name.size() + value_size; }

double units(std::size_t bytes, std::size_t unit) {
  return static_cast<double>(std::max<std::size_t>(1, (bytes + unit - 1) / unit));
}

Lease bumped(const Lease& l) {
  Lease out = l;
  out.lease_counter += 1;
  return out;
}

}  // namespace

std::size_t estimated_item_size(const Lease& l) {
  std::size_t size = attr("leaseKey", l.lease_key.size());
  if (l.lease_owner) size += attr("leaseOwner", l.lease_owner->size());
  size += attr("leaseCounter", number_size(l.lease_counter));
  size += attr("ownerSwitchesSinceCheckpoint", number_size(l.owner_switches_since_checkpoint));
  size += attr("checkpoint", l.checkpoint.sequence_number().size());
  size += attr("checkpointSubSequenceNumber", number_size(l.checkpoint.sub_sequence_number()));
  if (l.pending_checkpoint) {
    size += attr("pendingCheckpoint", l.pending_checkpoint->sequence_number().size());
    size += attr("pendingCheckpointSubSequenceNumber",
                 number_size(l.pending_checkpoint->sub_sequence_number()));
  }
  if (l.pending_checkpoint_state) {
    size += attr("pendingCheckpointState", l.pending_checkpoint_state->size());
  }
  auto set_size = [](const std::vector<std::string>& v) {
    std::size_t s = 0;
    for (const auto& e : v) s += e.size();
    return s;
  };
  if (!l.parent_shard_ids.empty()) size += attr("parentShardId", set_size(l.parent_shard_ids));
  if (!l.child_shard_ids.empty()) size += attr("childShardIds", set_size(l.child_shard_ids));
  if (l.hash_key_range) {
    size += attr("startingHashKey", l.hash_key_range->starting_hash_key.size());
    size += attr("endingHashKey", l.hash_key_range->ending_hash_key.size());
  }
  return size;
}

InMemoryLeaseStore::FaultPoint InMemoryLeaseStore::take_fault_locked(bool is_write) {
  if (fault_.remaining <= 0) return FaultPoint::kNone;
  --fault_.remaining;
  ++stats_.injected_faults;
  return (fault_.after_apply && is_write) ? FaultPoint::kAfter : FaultPoint::kBefore;
}

Status InMemoryLeaseStore::fault_status_locked(std::string_view operation) const {
  return Status(fault_.code, "injected fault in " + std::string(operation));
}

Status InMemoryLeaseStore::condition_failed(std::string_view operation, std::string_view key,
                                            std::string_view why) {
  ++stats_.failed_conditions;
  return Status(StatusCode::kConditionFailed,
                std::string(operation) + " of lease " + std::string(key) + ": " + std::string(why));
}

void InMemoryLeaseStore::count_write_locked(const Lease* item) {
  ++stats_.writes;
  stats_.write_units += units(item ? estimated_item_size(*item) : 100, 1024);
}

void InMemoryLeaseStore::count_index_write_locked(const std::optional<std::string>& before,
                                                  const std::optional<std::string>& after) {
  if (before == after) return;
  const int writes = (before ? 1 : 0) + (after ? 1 : 0);
  stats_.index_writes += writes;
  stats_.write_units += writes;
}

Status InMemoryLeaseStore::create_table_if_not_exists() { return Status::Ok(); }

Result<std::vector<std::string>> InMemoryLeaseStore::owned_lease_keys(std::string_view owner) {
  std::lock_guard<std::mutex> lock(mu_);
  if (take_fault_locked(false) != FaultPoint::kNone) return fault_status_locked("Query");
  std::vector<std::string> keys;
  std::size_t bytes = 0;
  for (const auto& [key, lease] : items_) {
    if (!lease.lease_owner || *lease.lease_owner != owner) continue;
    keys.push_back(key);
    // An index item holds the table's key and the index's: names and values.
    bytes += std::string_view("leaseKey").size() + key.size() +
             std::string_view("leaseOwner").size() + owner.size();
  }
  ++stats_.queries;
  stats_.read_units += 0.5 * std::max(1.0, std::ceil(static_cast<double>(bytes) / 4096.0));
  return keys;
}

Result<std::vector<Lease>> InMemoryLeaseStore::list_leases() {
  std::lock_guard<std::mutex> lock(mu_);
  if (take_fault_locked(false) != FaultPoint::kNone) return fault_status_locked("Scan");
  std::vector<Lease> out;
  out.reserve(items_.size());
  std::size_t bytes = 0;
  for (const auto& [key, lease] : items_) {
    out.push_back(lease);
    bytes += estimated_item_size(lease);
  }
  ++stats_.scans;
  stats_.scan_pages += std::max<std::int64_t>(
      1, static_cast<std::int64_t>((bytes + kScanPageBytes - 1) / kScanPageBytes));
  stats_.items_scanned += static_cast<std::int64_t>(out.size());
  stats_.bytes_scanned += static_cast<std::int64_t>(bytes);
  stats_.read_units += 0.5 * std::ceil(static_cast<double>(bytes) / 4096.0);
  return out;
}

Result<std::optional<Lease>> InMemoryLeaseStore::get_lease(std::string_view lease_key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (take_fault_locked(false) != FaultPoint::kNone) return fault_status_locked("GetItem");
  ++stats_.gets;
  auto it = items_.find(lease_key);
  if (it == items_.end()) {
    stats_.read_units += 1;
    return std::optional<Lease>();
  }
  stats_.read_units += units(estimated_item_size(it->second), 4096);
  return std::optional<Lease>(it->second);
}

Status InMemoryLeaseStore::create_lease_if_not_exists(const Lease& lease) {
  std::lock_guard<std::mutex> lock(mu_);
  FaultPoint fault = take_fault_locked(true);
  if (fault == FaultPoint::kBefore) return fault_status_locked("PutItem");
  count_write_locked(&lease);
  auto [it, inserted] = items_.try_emplace(lease.lease_key, lease);
  if (!inserted) {
    ++stats_.failed_conditions;
    return Status(StatusCode::kAlreadyExists, "lease " + lease.lease_key + " already exists");
  }
  count_index_write_locked(std::nullopt, lease.lease_owner);
  Lease& stored = it->second;
  std::sort(stored.parent_shard_ids.begin(), stored.parent_shard_ids.end());
  std::sort(stored.child_shard_ids.begin(), stored.child_shard_ids.end());
  if (fault == FaultPoint::kAfter) return fault_status_locked("PutItem");
  return Status::Ok();
}

template <typename Mutate>
Result<Lease> InMemoryLeaseStore::conditional_update(std::string_view operation,
                                                     const Lease& expected,
                                                     bool require_owner_match, Mutate mutate) {
  std::lock_guard<std::mutex> lock(mu_);
  FaultPoint fault = take_fault_locked(true);
  if (fault == FaultPoint::kBefore) return fault_status_locked(operation);
  auto it = items_.find(expected.lease_key);
  count_write_locked(it == items_.end() ? nullptr : &it->second);
  if (it == items_.end()) {
    return condition_failed(operation, expected.lease_key, "the lease does not exist");
  }
  Lease& item = it->second;
  if (item.lease_counter != expected.lease_counter) {
    return condition_failed(operation, expected.lease_key,
                            "leaseCounter is " + std::to_string(item.lease_counter) +
                                ", expected " + std::to_string(expected.lease_counter));
  }
  if (require_owner_match) {
    auto text = [](const std::optional<std::string>& o) {
      return o ? "\"" + *o + "\"" : std::string("absent");
    };
    if (item.lease_owner != expected.lease_owner) {
      return condition_failed(
          operation, expected.lease_key,
          "leaseOwner is " + text(item.lease_owner) + ", expected " + text(expected.lease_owner));
    }
    if (item.checkpoint_owner != expected.checkpoint_owner) {
      return condition_failed(operation, expected.lease_key,
                              "checkpointOwner is " + text(item.checkpoint_owner) + ", expected " +
                                  text(expected.checkpoint_owner));
    }
  }
  Lease updated = bumped(item);
  mutate(updated);
  count_index_write_locked(item.lease_owner, updated.lease_owner);
  item = updated;
  if (fault == FaultPoint::kAfter) return fault_status_locked(operation);
  return updated;
}

Result<Lease> InMemoryLeaseStore::take_lease(const Lease& seen, std::string_view new_owner) {
  if (new_owner.empty()) {
    return Status(StatusCode::kInvalidArgument, "take_lease: the new owner is empty");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.takes;
  }
  std::string owner(new_owner);
  bool changed = false;
  auto result = conditional_update("take", seen, /*require_owner_match=*/true, [&](Lease& l) {
    // As the Java KCL: a switch is counted only from one owner to a different one (not
    // when a free lease is taken, nor when an owner re-takes its own lease).
    if (l.lease_owner && *l.lease_owner != owner) l.owner_switches_since_checkpoint += 1;
    changed = !l.lease_owner || *l.lease_owner != owner;
    l.lease_owner = owner;
    l.checkpoint_owner.reset();
  });
  if (result.ok() && changed) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.owner_changes;
  }
  return result;
}

Result<Lease> InMemoryLeaseStore::renew_lease(const Lease& held) {
  if (!held.lease_owner) {
    return Status(StatusCode::kInvalidArgument,
                  "renew_lease: lease " + held.lease_key + " has no owner to renew for");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.renews;
  }
  return conditional_update("renew", held, true, [](Lease&) {});
}

Result<Lease> InMemoryLeaseStore::evict_lease(const Lease& held) {
  if (!held.lease_owner) {
    return Status(StatusCode::kInvalidArgument,
                  "evict_lease: lease " + held.lease_key + " has no owner to evict");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.evicts;
  }
  return conditional_update("evict", held, true, [](Lease& l) {
    // With a handoff pending only checkpointOwner goes: the handoff completes.
    if (l.checkpoint_owner) {
      l.checkpoint_owner.reset();
    } else {
      l.lease_owner.reset();
    }
  });
}

Result<Lease> InMemoryLeaseStore::initiate_handoff(const Lease& seen, std::string_view new_owner) {
  if (!seen.lease_owner || new_owner.empty() || *seen.lease_owner == new_owner) {
    return Status(StatusCode::kInvalidArgument, "initiate_handoff: lease " + seen.lease_key +
                                                    " needs an owner and a different new owner");
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.handoffs;
  FaultPoint fault = take_fault_locked(true);
  if (fault == FaultPoint::kBefore) return fault_status_locked("handoff start");
  auto it = items_.find(seen.lease_key);
  count_write_locked(it == items_.end() ? nullptr : &it->second);
  if (it == items_.end()) {
    return condition_failed("handoff start", seen.lease_key, "the lease does not exist");
  }
  Lease& item = it->second;
  if (item.lease_owner != seen.lease_owner || item.checkpoint_owner) {
    return condition_failed("handoff start", seen.lease_key,
                            "the owner changed or a handoff is already pending");
  }
  item.checkpoint_owner = item.lease_owner;
  count_index_write_locked(item.lease_owner, std::string(new_owner));
  item.lease_owner = std::string(new_owner);
  ++stats_.owner_changes;
  Lease written = item;
  if (fault == FaultPoint::kAfter) return fault_status_locked("handoff start");
  return written;
}

Result<Lease> InMemoryLeaseStore::update_checkpoint(const Lease& held,
                                                    const CheckpointFields& fields) {
  if (!held.lease_owner) {
    return Status(StatusCode::kInvalidArgument,
                  "update_checkpoint: lease " + held.lease_key + " has no owner to write for");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.checkpoints;
  }
  return conditional_update("checkpoint", held, true, [&](Lease& l) {
    l.checkpoint = fields.checkpoint;
    l.pending_checkpoint = fields.pending_checkpoint;
    l.pending_checkpoint_state = fields.pending_checkpoint_state;
    l.owner_switches_since_checkpoint = fields.owner_switches_since_checkpoint;
  });
}

Status InMemoryLeaseStore::update_child_shard_ids(std::string_view lease_key,
                                                  const std::vector<std::string>& child_ids) {
  std::lock_guard<std::mutex> lock(mu_);
  FaultPoint fault = take_fault_locked(true);
  if (fault == FaultPoint::kBefore) return fault_status_locked("UpdateItem");
  auto it = items_.find(lease_key);
  count_write_locked(it == items_.end() ? nullptr : &it->second);
  if (it == items_.end()) {
    ++stats_.failed_conditions;
    return Status(StatusCode::kNotFound, "lease " + std::string(lease_key) + " does not exist");
  }
  auto& ids = it->second.child_shard_ids;
  ids = child_ids;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (fault == FaultPoint::kAfter) return fault_status_locked("UpdateItem");
  return Status::Ok();
}

Status InMemoryLeaseStore::delete_lease(std::string_view lease_key) {
  std::lock_guard<std::mutex> lock(mu_);
  FaultPoint fault = take_fault_locked(true);
  if (fault == FaultPoint::kBefore) return fault_status_locked("DeleteItem");
  auto it = items_.find(lease_key);
  count_write_locked(it == items_.end() ? nullptr : &it->second);
  if (it != items_.end()) {
    count_index_write_locked(it->second.lease_owner, std::nullopt);
    items_.erase(it);
  }
  if (fault == FaultPoint::kAfter) return fault_status_locked("DeleteItem");
  return Status::Ok();
}

LeaseStoreStats InMemoryLeaseStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void InMemoryLeaseStore::reset_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = LeaseStoreStats{};
}

void InMemoryLeaseStore::fail_next(int calls, StatusCode code, bool after_apply) {
  std::lock_guard<std::mutex> lock(mu_);
  fault_ = Fault{calls, code, after_apply};
}

void InMemoryLeaseStore::put(const Lease& lease) {
  std::lock_guard<std::mutex> lock(mu_);
  Lease copy = lease;
  std::sort(copy.parent_shard_ids.begin(), copy.parent_shard_ids.end());
  std::sort(copy.child_shard_ids.begin(), copy.child_shard_ids.end());
  items_[lease.lease_key] = std::move(copy);
}

std::optional<Lease> InMemoryLeaseStore::peek(std::string_view lease_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = items_.find(lease_key);
  if (it == items_.end()) return std::nullopt;
  return it->second;
}

std::vector<Lease> InMemoryLeaseStore::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Lease> out;
  out.reserve(items_.size());
  for (const auto& [key, lease] : items_) out.push_back(lease);
  return out;
}

std::size_t InMemoryLeaseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return items_.size();
}

}  // namespace kcl::leases
