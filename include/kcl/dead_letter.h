// kcl/dead_letter.h: where poison records go. A record a processor keeps failing on is
// handed to a DeadLetterSink with the error and its position, and the shard goes on; nothing
// is dropped.
//
//   kcl::WorkerConfig config;
//   config.processing.on_processor_error = kcl::ProcessorErrorPolicy::kDeadLetter;
//   config.processing.max_attempts_before_dead_letter = 3;
//   config.processing.dead_letter_sink = kcl::make_callback_dead_letter_sink(
//       [](const kcl::DeadLetter& letter) { return my_store.save(letter); });
//   // or: *kcl::make_file_dead_letter_sink("/var/lib/app/poison.jsonl")
//   // or: kcl::make_stream_dead_letter_sink(producer)   (kcl/producer.h)
//
// Which records reach a sink (ProcessorErrorPolicy::kDeadLetter, kcl/processing_config.h):
// a batch whose process_records threw max_attempts_before_dead_letter times is bisected:
// its first half is delivered alone, then its second half; a part that fails again is split
// again, until a part of one record fails max_attempts_before_dead_letter times on its own.
// That record is a poison record only if a neighbour of it succeeds: the records after it,
// delivered right after its last failure (while no checkpoint may pass it), or, when none
// follows it in its batch, the record before it, processed just before its own attempts.
// A poison record is handed to the sink and the shard goes on with the next part. When its
// neighbours fail too, every record tried fails: that is an outage of what the processor
// depends on (its database down), not a poison record. Nothing is dead-lettered then: the
// rest of the batch is delivered again as a whole after the failure backoff (which grows
// with every failure in a row), and searched again if it keeps failing, until it succeeds
// or dead_letter_outage_limit (default 30 min, 0 = never) has passed since the shard's last
// successful call; from then on, until a call succeeds, a record that fails alone max times
// goes to the sink although its neighbours fail too. Records that fail side by side (a run
// of bad records) look like an outage and are held the same way until that limit.
// A record can be dead-lettered wrongly only when the outage begins, or ends, right next to
// it: when it ends its batch (a batch of one record, say) and the outage begins with it, or
// when the outage ends in the instant between its last failure and its neighbour's call.
//
// Redelivery this implies for a poison record with good neighbours (and no more): the
// processor sees every record of the failing batch on each of its attempts, then each record
// of every failing part once more per level of the bisection (good records of a failing
// half included), and each good record exactly once in a call that succeeds. For a batch of
// B records with one bad record and max attempts N, the good records are handed over
// N*(B-1) + sum over the failing halves of (half size - 1) times in calls that throw, plus
// once each in the call that succeeds.
//
// Checkpoints: the shard goes on past a dead-lettered record only once its sink accepted it
// (accept() returned OK), so no checkpoint can pass a record that is neither processed nor
// in the sink. While the records after a failing record are delivered to vouch for it, a
// checkpoint may name only records before it (checkpoint() with no argument does so; a
// checkpoint at one of them is refused). A sink that fails is asked again after the
// processing failure backoff, for ever: the shard waits (logged once per series with the
// count, not each time).
//
// Thread safety: a sink's accept() is called from the worker's threads, for different shards
// at the same time; implementations must be thread-safe. The factories' sinks are.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "kcl/record.h"
#include "kcl/status.h"

namespace kcl {

class Producer;

// A record set aside, with why and where.
struct DeadLetter {
  std::string stream;    // the stream the record was read from
  std::string shard_id;  // its shard
  Record record;         // the record as delivered (sequence and sub-sequence number,
                         // partition key, arrival time, data)
  std::string error;     // the last failure, e.g. "process_records threw: bad json"
  int attempts = 0;      // deliveries of this record that failed (whole batch, halves,
                         // alone, outage retries) before it was set aside; 1 for a pull nack
  std::chrono::system_clock::time_point dead_lettered_at{};  // when it was set aside
};

class DeadLetterSink {
 public:
  virtual ~DeadLetterSink() = default;
  // Keeps `letter` durably, or returns why not (then it is asked again later). OK means the
  // shard may pass the record.
  [[nodiscard]] virtual Status accept(const DeadLetter& letter) = 0;
  // A short name for metrics and logs: "callback", "file", "stream" or the application's.
  virtual std::string name() const = 0;
};

// A sink that calls `accept` (from the worker's threads, possibly at the same time for
// different shards: `accept` must be thread-safe).
std::shared_ptr<DeadLetterSink> make_callback_dead_letter_sink(
    std::function<Status(const DeadLetter&)> accept, std::string name = "callback");

// A sink that appends one JSON object per line to the file at `path` (created if missing,
// its directory then flushed once; appended to otherwise) and flushes it to disk
// (fdatasync) before accepting. The line is
// dead_letter_json(letter). A file moved away (rotated by logrotate without copytruncate,
// say) or deleted is followed: the next letter goes to a new file at `path`, those before stay
// in the old one. Fails with kInvalidArgument naming the path when it cannot be opened for
// appending.
Result<std::shared_ptr<DeadLetterSink>> make_file_dead_letter_sink(const std::string& path);

// A sink that writes each letter as one record to the producer's stream and accepts once the
// producer resolved it with a sequence number: the record's partition key is the original
// partition key and its data is dead_letter_json(letter) (the original bytes are in "data",
// base64, exactly as read). A letter too large for one record (a record of about 780 KB or
// more) is written as several in order, each the same object with "part" (1, 2, ...),
// "parts" and a slice of "data" (the slices joined in part order are the base64 of the
// bytes; a long "error" is cut to 4 KiB, saying so: a letter too large only for its error
// is one such part); it is accepted once every part is written, and
// asked again writes them all again. `producer` must outlive the sink.
std::shared_ptr<DeadLetterSink> make_stream_dead_letter_sink(Producer& producer);

// The JSON object a file or stream sink writes for `letter` (one line, no newline):
//   {"stream":"orders","shard_id":"shardId-000000000001",
//    "sequence_number":"4959...","sub_sequence_number":0,"partition_key":"k-42",
//    "approximate_arrival_timestamp":1764216000123,            (epoch ms)
//    "attempts":7,"error":"process_records threw: bad json",
//    "dead_lettered_at":1764216012345,"data":"<base64 of the record's bytes>"}
std::string dead_letter_json(const DeadLetter& letter);

}  // namespace kcl
