#include "shardsync/lineage.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "leases/stream_identifier.h"

namespace kcl::shardsync {
namespace {

const std::vector<std::string>& empty_ids() {
  static const std::vector<std::string> kEmpty;
  return kEmpty;
}

void sort_unique(std::vector<std::string>& ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

template <typename Map>
const std::vector<std::string>& ids_or_empty(const Map& map, std::string_view id) {
  auto it = map.find(id);
  return it == map.end() ? empty_ids() : it->second;
}

// Leases by key, for lookups.
std::unordered_map<std::string_view, const Lease*> index_leases(const std::vector<Lease>& leases) {
  std::unordered_map<std::string_view, const Lease*> by_key;
  by_key.reserve(leases.size());
  for (const Lease& l : leases) by_key.emplace(l.lease_key, &l);
  return by_key;
}

// Memoized "some descendant of this shard has a lease".
class LeasedDescendants {
 public:
  LeasedDescendants(const ShardGraph& graph,
                    const std::unordered_map<std::string_view, const Lease*>& leases)
      : graph_(graph), leases_(leases) {}

  bool any(const std::string& id) {
    auto it = memo_.find(id);
    if (it != memo_.end()) return it->second;
    memo_[id] = false;  // guards against (impossible) cycles
    bool found = false;
    for (const std::string& child : graph_.children(id)) {
      if (leases_.count(child) != 0 || any(child)) {
        found = true;
        break;
      }
    }
    memo_[id] = found;
    return found;
  }

 private:
  const ShardGraph& graph_;
  const std::unordered_map<std::string_view, const Lease*>& leases_;
  std::unordered_map<std::string, bool> memo_;
};

// Shard ids are "shardId-" and a zero-padded number assigned in increasing order; compare
// by length first so that the order stays numeric should the padding ever be outgrown.
bool shard_id_less(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

}  // namespace

std::vector<std::string> parent_ids(const kinesis::Shard& shard) {
  std::vector<std::string> ids;
  if (!shard.parent_shard_id.empty()) ids.push_back(shard.parent_shard_id);
  if (!shard.adjacent_parent_shard_id.empty()) ids.push_back(shard.adjacent_parent_shard_id);
  sort_unique(ids);
  return ids;
}

ShardGraph::ShardGraph(const std::vector<kinesis::Shard>& listing,
                       const std::vector<Lease>& leases) {
  for (const kinesis::Shard& s : listing) shards_.insert_or_assign(s.shard_id, s);

  for (const auto& [id, s] : shards_) {
    Ids parents = parent_ids(s);
    for (const std::string& p : parents) {
      children_[p].push_back(id);
      listed_children_[p].push_back(id);
    }
    parents_[id] = std::move(parents);
  }
  for (const Lease& l : leases) {
    for (const std::string& p : l.parent_shard_ids) {
      if (!p.empty()) children_[p].push_back(l.lease_key);
    }
    for (const std::string& c : l.child_shard_ids) {
      if (!c.empty()) children_[l.lease_key].push_back(c);
    }
    if (shards_.find(l.lease_key) == shards_.end()) {
      Ids parents;
      for (const std::string& p : l.parent_shard_ids) {
        if (!p.empty()) parents.push_back(p);
      }
      sort_unique(parents);
      parents_[l.lease_key] = std::move(parents);
    }
  }
  for (auto& [id, ids] : children_) sort_unique(ids);
  for (auto& [id, ids] : listed_children_) sort_unique(ids);

  // Kahn's algorithm over the listing; the ready set is ordered, so ties go by shard id.
  std::map<std::string_view, int> pending_parents;
  std::set<std::string_view> ready;
  for (const auto& [id, s] : shards_) {
    int n = 0;
    for (const std::string& p : parents_[id]) {
      if (shards_.count(p) != 0) ++n;
    }
    pending_parents[id] = n;
    if (n == 0) ready.insert(id);
  }
  topo_.reserve(shards_.size());
  while (!ready.empty()) {
    std::string_view id = *ready.begin();
    ready.erase(ready.begin());
    topo_.emplace_back(id);
    for (const std::string& c : ids_or_empty(listed_children_, id)) {
      auto it = pending_parents.find(c);
      if (it != pending_parents.end() && --it->second == 0) ready.insert(it->first);
    }
  }
  if (topo_.size() < shards_.size()) {
    // A cycle cannot come from Kinesis; keep every shard anyway, in id order.
    std::unordered_set<std::string_view> placed(topo_.begin(), topo_.end());
    for (const auto& [id, s] : shards_) {
      if (placed.count(id) == 0) topo_.push_back(id);
    }
  }
}

const kinesis::Shard* ShardGraph::shard(std::string_view id) const {
  auto it = shards_.find(id);
  return it == shards_.end() ? nullptr : &it->second;
}

const std::vector<std::string>& ShardGraph::parents(std::string_view id) const {
  return ids_or_empty(parents_, id);
}

const std::vector<std::string>& ShardGraph::children(std::string_view id) const {
  return ids_or_empty(children_, id);
}

const std::vector<std::string>& ShardGraph::listed_children(std::string_view id) const {
  return ids_or_empty(listed_children_, id);
}

std::vector<std::string> ShardGraph::descendants(std::string_view id) const {
  std::set<std::string> seen;
  std::vector<std::string> stack(children(id).begin(), children(id).end());
  while (!stack.empty()) {
    std::string c = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert(c).second) continue;
    for (const std::string& g : children(c)) stack.push_back(g);
  }
  seen.erase(std::string(id));
  return {seen.begin(), seen.end()};
}

std::vector<std::string> ShardGraph::roots() const {
  std::vector<std::string> out;
  for (const auto& [id, s] : shards_) {
    const Ids& parents = ids_or_empty(parents_, id);
    if (std::none_of(parents.begin(), parents.end(),
                     [&](const std::string& p) { return shards_.count(p) != 0; })) {
      out.push_back(id);
    }
  }
  return out;
}

bool has_started(const Lease& lease) {
  return lease.checkpoint.is_sequence_number() || lease.checkpoint.is_shard_end();
}

bool parents_finished(const Lease& lease, const LeaseLookup& lookup) {
  for (const std::string& parent : lease.parent_shard_ids) {
    if (parent.empty()) continue;
    const Lease* p = lookup(parent);
    if (p != nullptr && !p->checkpoint.is_shard_end()) return false;
  }
  return true;
}

bool parents_finished(const Lease& lease, const std::vector<Lease>& leases) {
  auto by_key = index_leases(leases);
  return parents_finished(lease, [&](std::string_view key) -> const Lease* {
    auto it = by_key.find(key);
    return it == by_key.end() ? nullptr : it->second;
  });
}

Result<bool> parents_finished(leases::LeaseStore& store, const Lease& lease) {
  auto unfinished = unfinished_parent(store, lease);
  if (!unfinished.ok()) return unfinished.status();
  return !unfinished->has_value();
}

Result<std::optional<Lease>> unfinished_parent(leases::LeaseStore& store, const Lease& lease) {
  const std::string_view stream = leases::lease_stream_identifier(lease);
  for (const std::string& id : lease.parent_shard_ids) {
    if (id.empty()) continue;
    // Parent ids are shard ids of the lease's own stream.
    const std::string parent = stream.empty() ? id : leases::multi_stream_lease_key(stream, id);
    auto got = store.get_lease(parent);
    if (!got.ok()) {
      return got.status().with_context("reading parent lease " + parent + " of " + lease.lease_key +
                                       ": ");
    }
    if (got->has_value() && !(*got)->checkpoint.is_shard_end()) return std::move(*got);
  }
  return std::optional<Lease>();
}

std::vector<Lease> leases_to_create(const std::vector<kinesis::Shard>& listing,
                                    const std::vector<Lease>& existing,
                                    const InitialPosition& initial_position) {
  const ShardGraph graph(listing, existing);
  const auto leased = index_leases(existing);
  LeasedDescendants leased_descendants(graph, leased);

  // The shards this pass creates a lease for.
  std::unordered_set<std::string_view> creating;

  std::vector<Lease> out;
  for (const std::string& id : graph.topological_order()) {
    if (leased.count(id) != 0) continue;
    const kinesis::Shard& shard = *graph.shard(id);

    // Rule 1: a descendant has a lease, so this shard was finished and cleaned up (or, on
    // LATEST, held nothing to read).
    if (leased_descendants.any(id)) continue;

    // Rule 2: a parent is being read (it has a lease, or gets one now): start at
    // TRIM_HORIZON after it. A parent without a lease does not count, even when rule 1
    // skipped it: the cleanup rules remove a parent's lease only once every child has a
    // started lease, so a parent without one that has a child without one was never read
    // (LATEST skipped it), and its children are decided like roots.
    const std::vector<std::string>& parents = graph.parents(id);
    const bool parent_in_play = std::any_of(
        parents.begin(), parents.end(),
        [&](const std::string& p) { return leased.count(p) != 0 || creating.count(p) != 0; });

    ExtendedSequenceNumber checkpoint;
    if (parent_in_play) {
      // After its parents: from its start, or, when the application starts at a time, from
      // that time (as the Java KCL: a child older than the time holds records before it).
      checkpoint = initial_position.kind == InitialPosition::Kind::kAtTimestamp
                       ? initial_position.sentinel()
                       : ExtendedSequenceNumber::trim_horizon();
    } else if (initial_position.kind == InitialPosition::Kind::kLatest && shard.closed()) {
      // Rule 3, LATEST: a closed shard will never hold anything new.
      continue;
    } else {
      checkpoint = initial_position.sentinel();
    }

    Lease lease;
    lease.lease_key = id;
    lease.lease_counter = 0;
    lease.checkpoint = std::move(checkpoint);
    lease.owner_switches_since_checkpoint = 0;
    lease.parent_shard_ids = parents;
    if (shard.closed()) lease.child_shard_ids = graph.listed_children(id);
    lease.hash_key_range =
        HashKeyRange{shard.hash_key_range.starting_hash_key, shard.hash_key_range.ending_hash_key};
    out.push_back(std::move(lease));
    creating.insert(id);
  }
  return out;
}

std::vector<std::string> leases_to_delete(const std::vector<kinesis::Shard>& listing,
                                          const std::vector<Lease>& leases, bool listing_complete) {
  if (listing.empty()) listing_complete = false;
  const ShardGraph graph(listing, leases);
  // The newest shard of the listing. A lease for a shard created after the listing was
  // taken (by a worker with a newer listing) has a greater id; only older ones can have
  // been trimmed.
  std::string_view newest_listed;
  for (const kinesis::Shard& s : listing) {
    if (newest_listed.empty() || shard_id_less(newest_listed, s.shard_id))
      newest_listed = s.shard_id;
  }
  const auto by_key = index_leases(leases);
  LeasedDescendants leased_descendants(graph, by_key);

  auto no_longer_needed_by = [&](const std::string& child) {
    auto it = by_key.find(child);
    if (it != by_key.end()) return has_started(*it->second);
    // No lease: either it was finished and cleaned up (then a descendant has a lease), or
    // its lease is still to be created, and then it needs this parent's lease.
    return leased_descendants.any(child);
  };

  std::vector<std::string> out;
  for (const Lease& lease : leases) {
    const std::vector<std::string>& children = graph.children(lease.lease_key);
    const bool children_done = std::all_of(children.begin(), children.end(), no_longer_needed_by);
    if (!children_done) continue;
    const bool finished = lease.checkpoint.is_shard_end() && !children.empty();
    const bool vanished = listing_complete && !graph.in_listing(lease.lease_key) &&
                          shard_id_less(lease.lease_key, newest_listed);
    if (finished || vanished) out.push_back(lease.lease_key);
  }
  sort_unique(out);
  return out;
}

std::vector<std::string> child_shard_ids(const std::vector<kinesis::Shard>& listing,
                                         std::string_view shard_id) {
  std::vector<std::string> out;
  for (const kinesis::Shard& s : listing) {
    if (s.parent_shard_id == shard_id || s.adjacent_parent_shard_id == shard_id) {
      out.push_back(s.shard_id);
    }
  }
  sort_unique(out);
  return out;
}

std::vector<ChildIdsUpdate> child_shard_id_updates(const std::vector<kinesis::Shard>& listing,
                                                   const std::vector<Lease>& leases) {
  const ShardGraph graph(listing);
  std::vector<ChildIdsUpdate> out;
  for (const Lease& lease : leases) {
    const std::vector<std::string>& listed = graph.listed_children(lease.lease_key);
    if (listed.empty()) continue;
    std::vector<std::string> merged = lease.child_shard_ids;
    merged.insert(merged.end(), listed.begin(), listed.end());
    sort_unique(merged);
    std::vector<std::string> current = lease.child_shard_ids;
    sort_unique(current);
    if (merged != current) out.push_back(ChildIdsUpdate{lease.lease_key, std::move(merged)});
  }
  std::sort(out.begin(), out.end(), [](const ChildIdsUpdate& a, const ChildIdsUpdate& b) {
    return a.lease_key < b.lease_key;
  });
  return out;
}

}  // namespace kcl::shardsync
