#include "leases/lease_serializer.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "base/status_macros.h"

namespace kcl::leases {
namespace {

using dynamodb::AttributeValue;
using dynamodb::Item;
using Type = AttributeValue::Type;

std::string key_text(const Item& item) {
  auto it = item.find(std::string(attr::kLeaseKey));
  if (it != item.end() && it->second.type() == Type::kS) return it->second.s();
  return "(no leaseKey)";
}

Status bad(const Item& item, std::string_view attribute, const std::string& what) {
  return Status(StatusCode::kInternal, "lease table item " + key_text(item) + ": attribute " +
                                           std::string(attribute) + " " + what);
}

const AttributeValue* find(const Item& item, std::string_view name) {
  auto it = item.find(std::string(name));
  return it == item.end() ? nullptr : &it->second;
}

Result<std::optional<std::string>> get_s(const Item& item, std::string_view name) {
  const AttributeValue* v = find(item, name);
  if (!v) return std::optional<std::string>();
  if (v->type() != Type::kS) {
    return bad(item, name,
               "has type " + std::string(dynamodb::to_string(v->type())) + ", expected S");
  }
  return std::optional<std::string>(v->s());
}

Result<std::optional<std::int64_t>> get_n(const Item& item, std::string_view name) {
  const AttributeValue* v = find(item, name);
  if (!v) return std::optional<std::int64_t>();
  if (v->type() != Type::kN) {
    return bad(item, name,
               "has type " + std::string(dynamodb::to_string(v->type())) + ", expected N");
  }
  const std::string& text = v->s();
  std::int64_t out = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return bad(item, name, "is \"" + text + "\", not a 64-bit integer");
  }
  return std::optional<std::int64_t>(out);
}

Result<std::vector<std::string>> get_ss(const Item& item, std::string_view name) {
  const AttributeValue* v = find(item, name);
  if (!v) return std::vector<std::string>();
  if (v->type() != Type::kSS) {
    return bad(item, name,
               "has type " + std::string(dynamodb::to_string(v->type())) + ", expected SS");
  }
  std::vector<std::string> out = v->set();
  std::sort(out.begin(), out.end());
  return out;
}

void put(Item& item, std::string_view name, AttributeValue v) {
  item.insert_or_assign(std::string(name), std::move(v));
}

}  // namespace

Item lease_key_item(std::string_view lease_key) {
  Item key;
  put(key, attr::kLeaseKey, AttributeValue::S(std::string(lease_key)));
  return key;
}

std::optional<std::string> other_entity(const Item& item) {
  if (const AttributeValue* type = find(item, attr::kEntityType)) {
    if (type->type() == Type::kS && type->s() == kLeaseEntityType) return std::nullopt;
    return type->type() == Type::kS ? type->s() : std::string("(entityType not a string)");
  }
  const AttributeValue* key = find(item, attr::kLeaseKey);
  if (key && key->type() == Type::kS &&
      (key->s() == "Leader" || key->s() == "Migration3.0" || key->s() == "TableMigration3.5")) {
    return std::string("coordinator state");
  }
  return std::nullopt;
}

bool has_entity_type(const Item& item) { return find(item, attr::kEntityType) != nullptr; }

Item lease_to_item(const Lease& lease, bool tag_entity_type) {
  Item item = lease_key_item(lease.lease_key);
  if (tag_entity_type)
    put(item, attr::kEntityType, AttributeValue::S(std::string(kLeaseEntityType)));
  put(item, attr::kLeaseCounter, AttributeValue::N(static_cast<long long>(lease.lease_counter)));
  if (lease.lease_owner) put(item, attr::kLeaseOwner, AttributeValue::S(*lease.lease_owner));
  if (lease.checkpoint_owner) {
    put(item, attr::kCheckpointOwner, AttributeValue::S(*lease.checkpoint_owner));
  }
  put(item, attr::kOwnerSwitches,
      AttributeValue::N(static_cast<long long>(lease.owner_switches_since_checkpoint)));
  put(item, attr::kCheckpoint, AttributeValue::S(lease.checkpoint.sequence_number()));
  put(item, attr::kCheckpointSubSequence,
      AttributeValue::N(static_cast<long long>(lease.checkpoint.sub_sequence_number())));
  if (lease.pending_checkpoint) {
    put(item, attr::kPendingCheckpoint,
        AttributeValue::S(lease.pending_checkpoint->sequence_number()));
    put(item, attr::kPendingCheckpointSubSequence,
        AttributeValue::N(static_cast<long long>(lease.pending_checkpoint->sub_sequence_number())));
  }
  if (lease.pending_checkpoint_state) {
    put(item, attr::kPendingCheckpointState, AttributeValue::B(*lease.pending_checkpoint_state));
  }
  if (!lease.parent_shard_ids.empty()) {
    put(item, attr::kParentShardId, AttributeValue::SS(lease.parent_shard_ids));
  }
  if (!lease.child_shard_ids.empty()) {
    put(item, attr::kChildShardIds, AttributeValue::SS(lease.child_shard_ids));
  }
  if (lease.hash_key_range) {
    put(item, attr::kStartingHashKey, AttributeValue::S(lease.hash_key_range->starting_hash_key));
    put(item, attr::kEndingHashKey, AttributeValue::S(lease.hash_key_range->ending_hash_key));
  }
  if (lease.stream_identifier)
    put(item, attr::kStreamName, AttributeValue::S(*lease.stream_identifier));
  if (lease.shard_id) put(item, attr::kShardId, AttributeValue::S(*lease.shard_id));
  return item;
}

Result<Lease> lease_from_item(const Item& item) {
  Lease lease;
  KCL_ASSIGN_OR_RETURN(auto key, get_s(item, attr::kLeaseKey));
  if (!key || key->empty()) return bad(item, attr::kLeaseKey, "is missing");
  lease.lease_key = std::move(*key);

  KCL_ASSIGN_OR_RETURN(lease.lease_owner, get_s(item, attr::kLeaseOwner));
  KCL_ASSIGN_OR_RETURN(lease.checkpoint_owner, get_s(item, attr::kCheckpointOwner));

  KCL_ASSIGN_OR_RETURN(auto counter, get_n(item, attr::kLeaseCounter));
  if (!counter) return bad(item, attr::kLeaseCounter, "is missing");
  lease.lease_counter = *counter;

  KCL_ASSIGN_OR_RETURN(auto switches, get_n(item, attr::kOwnerSwitches));
  lease.owner_switches_since_checkpoint = switches.value_or(0);

  KCL_ASSIGN_OR_RETURN(auto checkpoint, get_s(item, attr::kCheckpoint));
  if (!checkpoint) return bad(item, attr::kCheckpoint, "is missing");
  KCL_ASSIGN_OR_RETURN(auto checkpoint_sub, get_n(item, attr::kCheckpointSubSequence));
  if (checkpoint_sub.value_or(0) < 0) return bad(item, attr::kCheckpointSubSequence, "is negative");
  lease.checkpoint = ExtendedSequenceNumber(
      std::move(*checkpoint), static_cast<SubSequenceNumber>(checkpoint_sub.value_or(0)));
  if (!lease.checkpoint.valid()) {
    return bad(item, attr::kCheckpoint,
               "is \"" + lease.checkpoint.to_string() +
                   "\", neither a sequence number nor a "
                   "sentinel");
  }

  KCL_ASSIGN_OR_RETURN(auto pending, get_s(item, attr::kPendingCheckpoint));
  if (pending && !pending->empty()) {
    KCL_ASSIGN_OR_RETURN(auto pending_sub, get_n(item, attr::kPendingCheckpointSubSequence));
    if (pending_sub.value_or(0) < 0) {
      return bad(item, attr::kPendingCheckpointSubSequence, "is negative");
    }
    lease.pending_checkpoint = ExtendedSequenceNumber(
        std::move(*pending), static_cast<SubSequenceNumber>(pending_sub.value_or(0)));
    if (!lease.pending_checkpoint->valid()) {
      return bad(item, attr::kPendingCheckpoint,
                 "is \"" + lease.pending_checkpoint->to_string() +
                     "\", neither a sequence number nor a sentinel");
    }
  }
  if (const AttributeValue* state = find(item, attr::kPendingCheckpointState);
      state && state->type() == Type::kB) {
    lease.pending_checkpoint_state = state->s();
  }

  KCL_ASSIGN_OR_RETURN(lease.parent_shard_ids, get_ss(item, attr::kParentShardId));
  KCL_ASSIGN_OR_RETURN(lease.child_shard_ids, get_ss(item, attr::kChildShardIds));

  KCL_ASSIGN_OR_RETURN(auto start, get_s(item, attr::kStartingHashKey));
  KCL_ASSIGN_OR_RETURN(auto end, get_s(item, attr::kEndingHashKey));
  if (start && end && !start->empty() && !end->empty()) {
    lease.hash_key_range = HashKeyRange{std::move(*start), std::move(*end)};
  }
  KCL_ASSIGN_OR_RETURN(lease.stream_identifier, get_s(item, attr::kStreamName));
  KCL_ASSIGN_OR_RETURN(lease.shard_id, get_s(item, attr::kShardId));
  return lease;
}

}  // namespace kcl::leases
