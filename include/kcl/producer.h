// kcl/producer.h: writes records to a stream in PutRecords batches, optionally packed into
// KPL aggregates, at a rate each shard accepts, retrying only the records that failed.
//
//   kcl::ProducerConfig config;
//   config.stream_name = "orders";
//   auto made = kcl::Producer::create(config);        // Result<std::unique_ptr<Producer>>
//   if (!made.ok()) { ... made.status() ... }          // bad configuration, stream not found
//   kcl::Producer& producer = **made;
//   auto f = producer.put("customer-42", payload);   // std::future<kcl::Result<PutResult>>
//   producer.flush();                                // waits until every record is resolved
//   kcl::Result<kcl::PutResult> r = f.get();         // shard, sequence number, sub-sequence
//   producer.shutdown();                             // sends what is left, stops the threads
//
// How it works: put() maps the record to its shard (MD5 of the partition key, or the explicit
// hash key, against the shard map from ListShards) and appends it to that shard's queue.
// `max_concurrent_requests` background request threads build PutRecords calls (at most 500
// records and 5 MiB, each record at most 1 MiB) from the shards' queues, one idle thread at a
// time planning, once a record waited `linger` (counted from when its shard's tokens allow it
// to go, so shards that wait for tokens fill a call together), a full call's worth may go, or
// put() waits for room; a call takes from every shard that may send what its tokens allow. The
// planning packs consecutive small records of one shard into KPL aggregates (at most
// `aggregation_max_bytes` each) and takes each shard's tokens (records/s and bytes/s); the
// thread that took the call sends it, writing its request body straight from the records (no
// copy of a record before it). No thread per shard.
//
// Failures: records that a PutRecords answer marks failed are the only ones sent again, after
// the backoff of the shared retry policy (aws::RetryPolicy of the Kinesis client: capped
// exponential with full jitter and a retry quota); a whole call that fails (5xx, throttling,
// connection) sends all its records again the same way. A record whose budget is spent
// (`max_attempts` sends, or an error that is not retryable) resolves with the service's
// error code and message. Every record's future (or callback) is resolved exactly once. A
// PutRecords call that failed as a whole may still have been written by the service: such a
// record can then appear twice in the stream, as with every Kinesis producer. An aggregate
// the service wrote to another shard than the map predicted (a split or a merge the map has
// not seen) is sent again too, as the KPL does: a consumer following the Java KCL drops such
// an aggregate where it was read (RetrievalConfig::drop_aggregates_outside_shard), so the
// copy may never be delivered; one that delivers every aggregate sees its records twice.
//
// Ordering: with max_in_flight_per_shard = 1 (the default) a shard has at most one call in
// flight and failed records go back to the front of their shard's queue, so the records of
// one partition key are written in the order put() was called, across a split or a merge
// too (no shard sends while a call to a shard that closed is unanswered). A larger value sends more
// calls per shard at once (more throughput on a hot shard) but a record that is retried can
// then land after records put later with the same key.
//
// Throttling: each shard's writes are kept within the service's per-shard limits (1 MiB/s
// and 1,000 records/s by default; an aggregate counts as one record) as the service counts
// them, per second: a shard's records count from when they are sent until a second after
// they may have arrived (the call's answer, or `arrival_jitter` after the send when the
// answer is slower), and a shard sends only what keeps that count within the limits; a
// token bucket at the limits (starting with a linger's worth, not a second's) spreads its
// sends. So the producer alone does not throttle itself, and a shard at its limit sustains
// about limit / (1 s + arrival_jitter). Throttling that does happen (another writer on the
// shard) halves the shard's pace once per call (down to a tenth); each second without
// throttling gives back a quarter of the configured rate.
//
// Metrics (to Dependencies::metrics; each PutRecords call reports once, not each record):
//   producer.put_records_calls   count  tag outcome = ok | partial | failed
//   producer.put_records_time    timing of a call, tag outcome
//   producer.records_succeeded / producer.records_retried / producer.records_failed  count
//   producer.throttled           count  records (or calls) answered with throttling
//   producer.aggregates_resent   count  aggregates written to another shard than predicted
// Logs (to Dependencies::logger): PutRecords calls failing as a whole, once per series with
// the count (the 1st, 3rd, each power of ten, and the recovery), never once per retry.
//
// Thread safety: put(), flush(), stats(), shutdown() and begin_shutdown() may be called from
// any thread at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "kcl/aws_config.h"
#include "kcl/clock.h"
#include "kcl/dependencies.h"
#include "kcl/status.h"

namespace kcl {

namespace producer {
struct ProducerAccess;  // internal: builds a producer with an injected Kinesis client
}

struct ProducerConfig {
  // The stream to write. Required.
  std::string stream_name;
  AwsConfig aws;
  // How long a record may wait for others to fill a call. Default 100 ms, range 0..60 s.
  std::chrono::milliseconds linger{100};
  // Records put but not yet resolved (queued or in flight). Default 100,000, range >= 1.
  std::size_t max_buffered_records = 100000;
  // Bytes (data + partition key) put but not yet resolved. Default 64 MiB, range >= 1 MiB.
  std::size_t max_buffered_bytes = std::size_t{64} << 20;
  // When the buffer is full: true = put() waits for room (default); false = put() returns a
  // future that is already failed with kUnavailable ("buffer full"). A put() from a callback
  // never waits (its thread answers the records that make room): the record is taken, and
  // the buffer may then hold more than its bounds by what callbacks put.
  bool block_when_full = true;
  // Pack small records into KPL aggregates. Default true.
  bool aggregate = true;
  // Largest aggregate (magic + protobuf + MD5). Default 51,200 bytes (the KPL's), range
  // 256..1,048,576. A record too big to share an aggregate is sent as a plain record.
  std::size_t aggregation_max_bytes = 51200;
  // Sends per record, including the first. Default 10, range 1..100.
  int max_attempts = 10;
  // PutRecords calls in flight at once (request threads). Default 4, range 1..64.
  int max_concurrent_requests = 4;
  // Calls in flight per shard. Default 1 (keeps per-key order; see above), range 1..16.
  int max_in_flight_per_shard = 1;
  // Per-shard rate limits. Defaults are the service's: 1,048,576 bytes/s, 1,000 records/s.
  // 0 turns the limit off.
  double shard_bytes_per_second = 1048576;
  double shard_records_per_second = 1000;
  // How much later than the call before it a call may reach the service. A shard's records
  // count against its limits until a second after the earlier of their call's answer and
  // this long after they were sent, so that no second of the service's holds more than the
  // limits (see "Throttling" above). Larger: fewer throttles where arrival times vary more
  // (a busy host, a distant region), a lower sustained rate (about limit / (1 s + this)).
  // Default 20 ms, range 0..10 s.
  std::chrono::milliseconds arrival_jitter{20};
  // How long shutdown() (and the destructor) waits for the records still buffered to be
  // sent; what is left after it fails with kCancelled. Default 30 s, range 0..1 h.
  std::chrono::milliseconds close_timeout{30000};
  // Whether a written record's PutResult carries its shard_id and sequence_number. Default
  // true. false leaves both empty (the other fields stay), for callers that only need to
  // know a record was written: its answer is then parsed without two strings a record.
  bool report_positions = true;
  // Every problem with this configuration, in plain words; empty when valid.
  std::vector<std::string> validate() const;
};

// Where a record was written.
struct PutResult {
  std::string shard_id;
  std::string sequence_number;
  // Position inside the KPL aggregate (0 for a plain record); a consumer that deaggregates
  // sees the same (sequence_number, sub_sequence_number).
  std::uint64_t sub_sequence_number = 0;
  bool aggregated = false;
  int attempts = 0;  // sends it took
};

struct ProducerStats {
  std::uint64_t records_put = 0;           // accepted by put()
  std::uint64_t records_succeeded = 0;     // resolved with a sequence number
  std::uint64_t records_failed = 0;        // resolved with an error
  std::uint64_t records_retried = 0;       // sends after a failure
  std::uint64_t put_records_calls = 0;     // PutRecords calls made
  std::uint64_t kinesis_records_sent = 0;  // Kinesis records in those calls (aggregates = 1)
  std::uint64_t throttled = 0;             // records (or calls) answered with throttling
  std::uint64_t shard_map_refreshes = 0;   // ListShards after the first
  std::size_t buffered_records = 0;        // put but not yet resolved
  std::size_t buffered_bytes = 0;
  std::size_t in_flight_calls = 0;
};

using PutCallback = std::function<void(Result<PutResult>)>;

// A record as put() took it, handed back to a PutRecordCallback with its outcome.
struct UserRecord {
  std::string partition_key;
  std::string data;
  std::string explicit_hash_key;
};
using PutRecordCallback = std::function<void(Result<PutResult>, UserRecord)>;

class Producer {
 public:
  // Validates the configuration, reads the shard map (ListShards) and starts the request
  // threads.
  // Errors: kInvalidArgument listing every configuration problem; the ListShards error
  // (kNotFound for a stream that does not exist, kPermissionDenied, ...) naming the stream.
  static Result<std::unique_ptr<Producer>> create(ProducerConfig config, Dependencies deps = {});
  ~Producer();  // shutdown() if not done yet
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // Queues one record. The future resolves once: with where the record was written, or with
  // the final error (kInvalidArgument for a bad record: partition key 1..256 characters,
  // data + key at most 1 MiB, explicit hash key a decimal below 2^128; kUnavailable when the
  // buffer is full and block_when_full is false; the service's error code and message when
  // the retry budget is spent).
  std::future<Result<PutResult>> put(std::string partition_key, std::string data,
                                     std::string explicit_hash_key = {});
  // The same with a callback, run once on a producer thread (keep it short; it must not
  // call flush() or destroy the producer).
  void put(std::string partition_key, std::string data, std::string explicit_hash_key,
           PutCallback callback);
  // The same, with the record handed back to the callback (moved, not copied) beside its
  // outcome: a caller can write a failed record elsewhere or send it again without keeping
  // a copy of every record it puts.
  void put(std::string partition_key, std::string data, std::string explicit_hash_key,
           PutRecordCallback callback);
  // Sends what is buffered without waiting for linger, and waits until nothing is buffered
  // or `timeout` passed. Returns kDeadlineExceeded naming how many records are left.
  Status flush(std::chrono::milliseconds timeout = std::chrono::hours(1));
  ProducerStats stats() const;

  // Graceful stop: put() refuses new records from now on (kCancelled); what is buffered is
  // sent for at most config.close_timeout, what is left then fails with kCancelled, and the
  // threads stop. Blocks until done; OK when every record was resolved by the service, else
  // kDeadlineExceeded naming how many were cancelled. Calling it again returns the same
  // result. (The same meaning as Worker::shutdown() and PullConsumer::shutdown(); not from
  // inside a put() callback, which runs on a thread it waits for.)
  Status shutdown();
  // Begins the same stop on a thread of its own and returns at once; the future is ready
  // when shutdown() would have returned. Calling it again returns the same future.
  std::shared_future<Status> begin_shutdown();

 private:
  class Impl;
  friend struct producer::ProducerAccess;
  explicit Producer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kcl
