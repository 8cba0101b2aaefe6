// kcl/initial_position.h: where reading starts in a shard whose lease has never been
// checkpointed.
//
// The initial position applies to the oldest shards that still need reading when an
// application starts on an empty lease table (see src/shardsync/lineage.h for the exact
// rules); shards created later by a split or merge always start at TRIM_HORIZON, so nothing
// written to a child is skipped. It is stored in a new lease as its checkpoint sentinel
// (TRIM_HORIZON / LATEST / AT_TIMESTAMP), as the Java KCL does; the timestamp itself is not
// stored: the shard consumer takes it from this configuration.
//
// Default: LATEST, as the Java KCL (a new application sees only records written after it
// starts). Choose TRIM_HORIZON to process everything still retained in the stream.
//
// Thread safety: a plain value; copy freely.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/lease.h"

namespace kcl {

struct InitialPosition {
  enum class Kind {
    kTrimHorizon,  // the oldest record still retained
    kLatest,       // just after the newest record (only records written from now on)
    kAtTimestamp,  // the first record at or after `timestamp`
  };

  // Default kLatest (as the Java KCL).
  Kind kind = Kind::kLatest;
  // Used with kAtTimestamp only: approximate arrival time (wall clock) of the first record
  // to read. Must not be in the future (Kinesis rejects that) nor before the epoch.
  std::chrono::system_clock::time_point timestamp{};

  static InitialPosition trim_horizon() { return InitialPosition{Kind::kTrimHorizon, {}}; }
  static InitialPosition latest() { return InitialPosition{Kind::kLatest, {}}; }
  static InitialPosition at_timestamp(std::chrono::system_clock::time_point t) {
    return InitialPosition{Kind::kAtTimestamp, t};
  }

  // The checkpoint a new lease starting here holds: TRIM_HORIZON, LATEST or AT_TIMESTAMP.
  ExtendedSequenceNumber sentinel() const {
    switch (kind) {
      case Kind::kTrimHorizon:
        return ExtendedSequenceNumber::trim_horizon();
      case Kind::kAtTimestamp:
        return ExtendedSequenceNumber::at_timestamp();
      case Kind::kLatest:
        break;
    }
    return ExtendedSequenceNumber::latest();
  }

  // "TRIM_HORIZON", "LATEST" or "AT_TIMESTAMP".
  std::string_view name() const {
    switch (kind) {
      case Kind::kTrimHorizon:
        return ExtendedSequenceNumber::kTrimHorizonText;
      case Kind::kAtTimestamp:
        return ExtendedSequenceNumber::kAtTimestampText;
      case Kind::kLatest:
        break;
    }
    return ExtendedSequenceNumber::kLatestText;
  }

  // Every problem, in plain words; empty when valid. (A timestamp in the future cannot be
  // judged here without a clock; Kinesis reports it as kInvalidArgument when reading.)
  std::vector<std::string> validate() const {
    std::vector<std::string> problems;
    if (kind == Kind::kAtTimestamp && timestamp <= std::chrono::system_clock::time_point{}) {
      problems.emplace_back(
          "initial_position: AT_TIMESTAMP needs a timestamp after the epoch (set "
          "InitialPosition::timestamp, e.g. with InitialPosition::at_timestamp(t))");
    }
    return problems;
  }

  bool operator==(const InitialPosition&) const = default;
};

}  // namespace kcl
