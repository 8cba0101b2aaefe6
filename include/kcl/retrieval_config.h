// kcl/retrieval_config.h: how kcl-cpp reads a shard: polling with GetRecords (the default) or
// enhanced fan-out (SubscribeToShard's pushed events over HTTP/2).
//
// The defaults suit AWS: they stay inside the per-shard service limits (5 GetRecords calls
// and 2 MiB per second, 10,000 records per call) and keep at most a few seconds of data in
// memory per shard. Call validate() to get every problem in plain words.
//
// Thread safety: a plain value; copy freely.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace kcl {

enum class RetrievalMode { kPolling, kFanOut };

struct RetrievalConfig {
  // Records asked for in one GetRecords call (its Limit). Default 10000 (the service
  // maximum), range 1..10000. With pacing by bytes (max_read_bytes_per_second), a call past
  // the first asks for fewer when one second of that budget holds fewer records of the last
  // answer's mean size (1 KB records at 2 MiB/s: about 2,000).
  int max_records_per_call = 10000;

  // Least time between the starts of two calls of one kind for one shard (two GetRecords, or
  // a call after a failed one; the service limits GetRecords and GetShardIterator each on its
  // own, so a new iterator is used at once). Default 250 ms, i.e. at most 4 GetRecords/s per
  // shard, one under the service's 5 (https://docs.aws.amazon.com/streams/latest/dev/
  // service-sizes-and-limits.html): calls exactly 200 ms apart arrive closer than that now and
  // then (the network's jitter), and a shard at the tip read at 200 ms had 3% of its calls
  // throttled through the limits proxy, none at 250 ms; the margin also leaves room for a new
  // owner's first call at a handoff. Range 0..60 s. Below 200 ms, AWS throttles a shard that
  // is behind.
  std::chrono::milliseconds min_call_interval{250};

  // Pause after a response that shows the shard caught up (no records and
  // MillisBehindLatest == 0) before the next GetRecords. Default 1 s, range 0..4 min (a shard
  // iterator expires after 5 minutes).
  // A response that returned records, or says the shard is behind, is followed as soon as
  // min_call_interval and max_read_bytes_per_second allow.
  std::chrono::milliseconds idle_time_between_calls{1000};

  // The shard's read rate for GetRecords, in bytes a second of what the answers return (each
  // record's data and partition key). AWS serves a shard at most 2 MiB a second of reads, and
  // a call after the shard's reads went past that is refused: "If a call returns this amount
  // of data [10 MiB], subsequent calls made within the next 5 seconds throw
  // ProvisionedThroughputExceededException"
  // (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_GetRecords.html). So each
  // answer is paid for before the next GetRecords: the shard's budget refills at this rate,
  // holds at most one second of it, is empty when the fetcher starts (the lease's previous
  // owner may have spent it) and is charged with each answer's bytes when the answer
  // arrives; the next call waits until the budget is out of debt, and asks for about one
  // second of the budget (see max_records_per_call). A shard catching up thus reads at this
  // rate without being throttled (after a 10 MiB answer the next call comes 5 s after the
  // call that read it; an answer of one second's budget may take up to a second to come at
  // no cost); a shard at the tip reads what is written (at most 1 MiB/s a shard), so its
  // calls are paced by min_call_interval and idle_time_between_calls alone. The limit is the
  // shard's, shared by every application that reads it with GetRecords: with two, give each
  // its share. Default 2 MiB (2,097,152); 0 = no pacing by bytes (min_call_interval alone);
  // otherwise at least 1 KiB. Enhanced fan-out is not paced (the service pushes at its own
  // rate).
  std::size_t max_read_bytes_per_second = std::size_t{2} << 20;

  // Prefetch bound, in records. The shard's records source runs beside its processor: the
  // next GetRecords call is in flight while the processor handles a batch, and no call is
  // made while the batches fetched and not yet taken hold at least this many records. One
  // response larger than what is left is still accepted (the bound is checked before a
  // call), so per shard at most this plus max_records_per_call records wait, besides the
  // batch being processed. Default 10000 (one full response waits while one is processed),
  // range 1..10,000,000.
  std::size_t max_prefetch_records = 10000;

  // Prefetch bound, in bytes the waiting batches hold (as above): each batch's response
  // body, which its records point into, and the records themselves. Default 8 MiB, range 1
  // byte..16 GiB. One response can add up to 10 MiB (plus its records) past it.
  std::size_t max_prefetch_bytes = std::size_t{8} << 20;

  // Drop a KPL aggregate that holds a record whose hash key (its explicit hash key, else the
  // MD5 of its partition key) lies outside the hash key range of the shard it was read from,
  // as the Java KCL does. A producer writes such an aggregate when its shard map is stale (a
  // split or a merge it has not seen yet); the KPL and kcl::Producer then send its records
  // again to their own shards, so delivering this copy too would deliver them twice. Default
  // false: an aggregator that does not send them again (one that packs records of every
  // shard together) would lose them. Each drop is logged with the aggregate's sequence
  // number. Applies where the lease has its shard's range (kcl-cpp's leases and the Java
  // KCL's 2.x and later do); polling and fan-out alike.
  bool drop_aggregates_outside_shard = false;

  // Backoff after a throttled or otherwise transient failure (ProvisionedThroughputExceeded,
  // 5xx, timeouts) that the AWS client's own retries did not get past: the k-th failure in
  // a row waits a uniformly random time in [0, min(throttle_backoff_max,
  // throttle_backoff_base * 2^(k-1))] ("full jitter"), never less than min_call_interval
  // after the failed call started. The fetcher never gives up on such failures.
  // Base: default 200 ms, range 1 ms..1 min.
  std::chrono::milliseconds throttle_backoff_base{200};
  // Cap of one backoff. Default 10 s, range throttle_backoff_base..4 min (inside a shard
  // iterator's 5-minute life).
  std::chrono::milliseconds throttle_backoff_max{10000};

  // Timeout of one GetRecords request (one attempt). Default 30 s, range 100 ms..10 min.
  std::chrono::milliseconds get_records_timeout{30000};

  // Timeout of one GetShardIterator request (one attempt). Default 10 s, range
  // 100 ms..10 min. kinesalite never answers AT_TIMESTAMP when no record lies at or after
  // the timestamp; a timeout is treated as transient (backoff, then ask again).
  std::chrono::milliseconds iterator_request_timeout{10000};

  // Attempts the AWS client makes per GetRecords / GetShardIterator call before the records
  // source sees the failure. Default 1: every retry is the source's own backoff (above),
  // which reschedules the shard instead of blocking one of the worker's pool threads.
  // Range 0..20; 0 = the AWS client's RetryConfig::max_attempts (its retries wait on the
  // calling thread).
  int call_max_attempts = 1;

  // ---- enhanced fan-out ----
  // kPolling (default) or kFanOut: the worker registers (or finds) a stream consumer on each
  // stream it reads, at start (a stream added later by a stream tracker: when its shards
  // first subscribe), and each shard subscribes with SubscribeToShard through its stream's
  // consumer; records are delivered as with polling (deaggregated, resumed after the
  // checkpoint), bounded by the prefetch bounds above (a full queue pauses the shard's HTTP/2
  // stream).
  RetrievalMode mode = RetrievalMode::kPolling;
  // The registered consumers' name, the same on every stream read (a name is unique per
  // stream only; the Java KCL names multi-stream consumers so too). Default (empty): the
  // application name, which must then be a valid consumer name (1..128 of a-z A-Z 0-9 _ . -).
  std::string consumer_name;
  // A subscription that delivers no event for this long is ended and made again (AWS sends
  // an event at least every few seconds). Default 35 s, range 1 s..10 min.
  std::chrono::milliseconds fanout_idle_timeout{35000};
  // After ResourceInUse (a subscription of this consumer and shard still open, e.g. within
  // 5 s of the last one) wait at least this long. Default 6 s, range 100 ms..5 min.
  std::chrono::milliseconds fanout_in_use_backoff{6000};
  // After a subscription ends normally (its 5-minute lifetime, or fanout_idle_timeout
  // without an event) the shard subscribes again after a uniformly random wait in [0, this]
  // ("full jitter"), so shards subscribed together do not all come back in the same instant;
  // each further idle end in a row doubles the bound, up to throttle_backoff_max. Default
  // 250 ms, range 0 (at once)..10 s.
  std::chrono::milliseconds fanout_resubscribe_jitter{250};

  // Every problem with this configuration, in plain words; empty when valid.
  std::vector<std::string> validate() const;
};

}  // namespace kcl
