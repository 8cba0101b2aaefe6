// kcl/start_position.h: where reading a shard starts. One type from the public API down to
// the records sources; only the wire encoding (the GetShardIterator / SubscribeToShard
// position types) is made at the edge, by the Kinesis client's callers.
//
//   TRIM_HORIZON      the oldest record still retained
//   LATEST            just after the newest record (only records written from now on)
//   AT_TIMESTAMP      the first record that arrived at or after `timestamp`
//   AFTER_CHECKPOINT  the records after (sequence_number, sub_sequence_number): where a
//                     lease's checkpoint resumes (read AT the sequence number, dropping
//                     what is at or below the checkpoint, so the rest of a KPL aggregate
//                     checkpointed inside is not lost)
//
// As a worker's initial position (kcl::InitialPosition, kcl/initial_position.h) only the
// first three apply.
//
// Thread safety: a plain value; copy freely.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/lease.h"
#include "kcl/record.h"

namespace kcl {

struct StartPosition {
  enum class Kind { kTrimHorizon, kLatest, kAtTimestamp, kAfterCheckpoint };

  // Default kLatest (as the Java KCL's initial position).
  Kind kind = Kind::kLatest;
  // kAtTimestamp: approximate arrival time (wall clock) of the first record to read. Must
  // not be in the future (Kinesis rejects that) nor before the epoch.
  std::chrono::system_clock::time_point timestamp{};
  // kAfterCheckpoint: the checkpoint (decimal digits) and its sub-sequence number.
  std::string sequence_number;
  SubSequenceNumber sub_sequence_number = 0;

  static StartPosition trim_horizon() { return of(Kind::kTrimHorizon); }
  static StartPosition latest() { return of(Kind::kLatest); }
  static StartPosition at_timestamp(std::chrono::system_clock::time_point t) {
    StartPosition p = of(Kind::kAtTimestamp);
    p.timestamp = t;
    return p;
  }
  static StartPosition after_checkpoint(std::string sequence_number,
                                        SubSequenceNumber sub_sequence_number = 0) {
    StartPosition p = of(Kind::kAfterCheckpoint);
    p.sequence_number = std::move(sequence_number);
    p.sub_sequence_number = sub_sequence_number;
    return p;
  }

  // The checkpoint a new lease starting here holds: TRIM_HORIZON, LATEST or AT_TIMESTAMP
  // (AFTER_CHECKPOINT gives the checkpoint itself).
  ExtendedSequenceNumber sentinel() const {
    switch (kind) {
      case Kind::kTrimHorizon:
        return ExtendedSequenceNumber::trim_horizon();
      case Kind::kAtTimestamp:
        return ExtendedSequenceNumber::at_timestamp();
      case Kind::kAfterCheckpoint:
        return ExtendedSequenceNumber(sequence_number, sub_sequence_number);
      case Kind::kLatest:
        break;
    }
    return ExtendedSequenceNumber::latest();
  }

  // "TRIM_HORIZON", "LATEST", "AT_TIMESTAMP" or "AFTER_CHECKPOINT".
  std::string_view name() const {
    switch (kind) {
      case Kind::kTrimHorizon:
        return ExtendedSequenceNumber::kTrimHorizonText;
      case Kind::kAtTimestamp:
        return ExtendedSequenceNumber::kAtTimestampText;
      case Kind::kAfterCheckpoint:
        return "AFTER_CHECKPOINT";
      case Kind::kLatest:
        break;
    }
    return ExtendedSequenceNumber::kLatestText;
  }

  // For messages: "TRIM_HORIZON", "LATEST", "AT_TIMESTAMP <ms since epoch>",
  // "AFTER <seq>/<sub>".
  std::string to_string() const {
    switch (kind) {
      case Kind::kAtTimestamp:
        return "AT_TIMESTAMP " +
               std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  timestamp.time_since_epoch())
                                  .count());
      case Kind::kAfterCheckpoint:
        return "AFTER " + sequence_number + "/" + std::to_string(sub_sequence_number);
      default:
        return std::string(name());
    }
  }

  // Every problem, in plain words; empty when valid. (A timestamp in the future cannot be
  // judged here without a clock; Kinesis reports it as kInvalidArgument when reading.)
  std::vector<std::string> validate() const {
    std::vector<std::string> problems;
    if (kind == Kind::kAtTimestamp && timestamp <= std::chrono::system_clock::time_point{}) {
      problems.emplace_back(
          "AT_TIMESTAMP needs a timestamp after the epoch (e.g. "
          "StartPosition::at_timestamp(t))");
    }
    if (kind == Kind::kAfterCheckpoint && ExtendedSequenceNumber(sequence_number).kind() !=
                                              ExtendedSequenceNumber::Kind::kSequenceNumber) {
      problems.push_back("the checkpoint to resume from, \"" + sequence_number +
                         "\", is not a sequence number (decimal digits)");
    }
    return problems;
  }

  bool operator==(const StartPosition&) const = default;

 private:
  static StartPosition of(Kind k) {
    StartPosition p;
    p.kind = k;
    return p;
  }
};

}  // namespace kcl
