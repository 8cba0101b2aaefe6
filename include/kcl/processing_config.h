// kcl/processing_config.h: how a worker runs its shard consumers (threads, intervals,
// processor failures, shutdown). Part of kcl::WorkerConfig.
//
// Thread safety: a plain value.
#pragma once

#include <chrono>
#include <memory>

#include "kcl/dead_letter.h"

namespace kcl {

// What the worker does when a processor's process_records throws. Records the processor
// checkpointed during the call that threw are done: what is delivered again starts after them.
enum class ProcessorErrorPolicy {
  kRetry,       // deliver the same batch again after a backoff, forever (default: nothing lost)
  kSkip,        // after max_attempts_before_skip failures, log and move on (records are lost to
                // this processor, counted in the metric consumer.records_skipped; explicit
                // opt-in)
  kDeadLetter,  // after max_attempts_before_dead_letter failures, bisect the batch to the
                // record(s) that fail while their neighbours succeed and hand each to
                // dead_letter_sink with the error, then go on; a failure of every record (an
                // outage) is retried instead, up to dead_letter_outage_limit (nothing lost;
                // redelivery and checkpoints: kcl/dead_letter.h)
};

struct ProcessingConfig {
  // Threads running the shard consumers. Default 4, range 1..256.
  int thread_pool_size = 4;
  // How often a consumer waiting on parents re-reads their leases. Default 1 s,
  // range 10 ms..1 min.
  std::chrono::milliseconds parent_check_interval{1000};
  // How often shards are synced to leases (each run is jittered by +-20%). Default 60 s,
  // range 100 ms..1 h. A shard that ends triggers a sync at once as well. With leader-based
  // assignment only the leader syncs periodically (every worker syncs at start and when a
  // shard it holds ends): each sync scans the whole lease table.
  std::chrono::milliseconds shard_sync_interval{60000};
  // Backoff after a processor failure (exception), a dead-letter sink's refusal or a
  // shard_ended without checkpoint: doubles with each failure in a row on the shard, from
  // base up to max, and starts from base again once a call succeeds (a record dead-lettered
  // does not end the series: the processor is still failing). Defaults 200 ms and 30 s.
  std::chrono::milliseconds failure_backoff_base{200};
  std::chrono::milliseconds failure_backoff_max{30000};
  ProcessorErrorPolicy on_processor_error = ProcessorErrorPolicy::kRetry;
  // With kSkip: failures of one batch before it is skipped. Default 3, range 1..1000.
  int max_attempts_before_skip = 3;
  // With kDeadLetter: failures of a batch before it is bisected, and of a single record on
  // its own before it is dead-lettered. Default 3, range 1..1000.
  int max_attempts_before_dead_letter = 3;
  // With kDeadLetter: how long an outage may last before records are dead-lettered anyway.
  // A record that fails alone is poison only if a neighbour succeeds (the records after it,
  // or the one before it when it ends its batch); when its neighbours fail too, every record
  // fails: an outage of what the processor depends on (its database down), not a poison
  // record. The rest of the batch is then delivered again as a whole after the failure
  // backoff, nothing dead-lettered, until it succeeds or this long has passed since the
  // shard's last successful process_records; from then on, until one succeeds, each record
  // that fails max_attempts_before_dead_letter times alone is dead-lettered (a run of bad
  // records, which no neighbour vouches for, goes to the sink this way too). Default 30 min;
  // 0 = never (an outage holds the shard for as long as it lasts, as kRetry does);
  // otherwise 1 s..7 days.
  std::chrono::milliseconds dead_letter_outage_limit{30 * 60 * 1000};
  // With kDeadLetter: where failing records go (kcl/dead_letter.h). Required with
  // kDeadLetter, ignored otherwise.
  std::shared_ptr<DeadLetterSink> dead_letter_sink;
  // A processor callback running longer than this is reported as hung (a warning and the
  // metric "processor.hung"), once per call. Default 60 s, range 1 s..1 h.
  std::chrono::milliseconds hung_processor_warning{60000};
  // The scheduler thread starts and stops consumers at once when a lease is taken, lost or
  // to be handed off and when a consumer ends; besides, it looks at least this often (a
  // handoff to try again, hung processors; a failed shard's restart wakes it when due).
  // Default 1 s, range 10 ms..10 s.
  std::chrono::milliseconds scheduler_interval{1000};
  // Graceful shutdown waits this long for processors' shutdown_requested (or a callback in
  // progress) before handing leases back anyway and ending with kDeadlineExceeded. Default
  // 60 s, range 1 s..1 h.
  std::chrono::milliseconds shutdown_timeout{60000};
  // When a shard has delivered no records for this long, process_records is called with an
  // empty batch (and again each time this long passes while the shard stays idle), so that a
  // processor that checkpoints on a timer writes its checkpoint without waiting for the next
  // record: checkpointer.checkpoint() then names the last record delivered. The Java KCL's
  // callProcessRecordsEvenForEmptyRecordList, on a timer. Default 0 = never (only batches
  // with records are delivered); otherwise 100 ms..1 h.
  std::chrono::milliseconds empty_batch_interval{0};
  // A shard is flagged stalled (a log line, the gauge kcl_shard_stalled{shard,cause}, its
  // `stalled` field in /status.json, /readyz "degraded") when it makes no progress for this
  // long although something is known to be in its way: a processor callback running, reads
  // failing in a row (throttled, a fan-out subscription failing), a parent shard not
  // finished, checkpoints rejected, or records waiting (millisBehindLatest > 0 or a batch
  // fetched) with none delivered. A shard idle at the tip of the stream is never stalled.
  // Default 60 s, range 1 s..1 h; 0 = off.
  std::chrono::milliseconds stall_threshold{60000};
};

}  // namespace kcl
