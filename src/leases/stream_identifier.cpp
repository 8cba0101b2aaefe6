#include "leases/stream_identifier.h"

#include <charconv>

namespace kcl::leases {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// The stream identifier part of a multi-stream key: up to the third ':'; empty when the key
// has fewer than three.
std::string_view identifier_in_key(std::string_view key) {
  std::size_t at = 0;
  for (int colons = 0; colons < 3; ++colons) {
    at = key.find(':', at);
    if (at == std::string_view::npos) return {};
    if (colons < 2) ++at;
  }
  return key.substr(0, at);
}

}  // namespace

std::string StreamIdentifier::serialize() const {
  return account_id + ":" + stream_name + ":" + std::to_string(creation_epoch);
}

std::optional<StreamIdentifier> StreamIdentifier::parse(std::string_view text) {
  const std::size_t first = text.find(':');
  if (first == std::string_view::npos) return std::nullopt;
  const std::size_t second = text.find(':', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  StreamIdentifier id;
  const std::string_view account = text.substr(0, first);
  const std::string_view name = text.substr(first + 1, second - first - 1);
  const std::string_view epoch = text.substr(second + 1);
  if (!all_digits(account) || name.empty() || !all_digits(epoch)) return std::nullopt;
  auto [ptr, ec] = std::from_chars(epoch.data(), epoch.data() + epoch.size(), id.creation_epoch);
  if (ec != std::errc() || id.creation_epoch <= 0) return std::nullopt;
  id.account_id = std::string(account);
  id.stream_name = std::string(name);
  return id;
}

std::string multi_stream_lease_key(std::string_view stream_identifier, std::string_view shard_id) {
  std::string key;
  key.reserve(stream_identifier.size() + 1 + shard_id.size());
  key.append(stream_identifier).append(":").append(shard_id);
  return key;
}

std::string_view lease_shard_id(const Lease& lease) {
  if (lease.shard_id) return *lease.shard_id;
  const std::string_view id = identifier_in_key(lease.lease_key);
  if (id.empty()) return lease.lease_key;
  return std::string_view(lease.lease_key).substr(id.size() + 1);
}

std::string_view lease_stream_identifier(const Lease& lease) {
  if (lease.stream_identifier) return *lease.stream_identifier;
  return identifier_in_key(lease.lease_key);
}

std::string lease_stream_name(const Lease& lease) {
  auto id = StreamIdentifier::parse(lease_stream_identifier(lease));
  return id ? id->stream_name : std::string();
}

}  // namespace kcl::leases
