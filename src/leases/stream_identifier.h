// Stream identifiers and lease keys of multi-stream applications, in the Java KCL's format
// (common/StreamIdentifier.java, leases/MultiStreamLease.java):
//
//   stream identifier  "<account id>:<stream name>:<creation epoch seconds>"
//   lease key          "<stream identifier>:<shard id>"
//
// A one-stream application's lease key is the shard id itself. Stream names and shard ids
// never hold a ':', so a key splits unambiguously.
//
// Thread safety: pure functions and values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kcl/lease.h"

namespace kcl::leases {

struct StreamIdentifier {
  std::string account_id;
  std::string stream_name;
  std::int64_t creation_epoch = 0;  // seconds

  std::string serialize() const;
  // "<digits>:<name without ':'>:<digits, > 0>"; empty when `text` is not one.
  static std::optional<StreamIdentifier> parse(std::string_view text);
  bool operator==(const StreamIdentifier&) const = default;
};

// The lease key of `shard_id` of the stream `stream_identifier` in a multi-stream table.
std::string multi_stream_lease_key(std::string_view stream_identifier, std::string_view shard_id);

// The shard a lease stands for: its shardId attribute, else what follows the stream
// identifier in a multi-stream key, else the key itself.
std::string_view lease_shard_id(const Lease& lease);

// The stream identifier of a multi-stream lease (its streamName attribute, else read from
// its key); empty for a one-stream lease.
std::string_view lease_stream_identifier(const Lease& lease);

// The stream name of a multi-stream lease ("orders" of "123456789012:orders:1700000000");
// empty for a one-stream lease.
std::string lease_stream_name(const Lease& lease);

}  // namespace kcl::leases
