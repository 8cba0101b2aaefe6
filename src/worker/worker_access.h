// worker/worker_access.h: builds a kcl::Worker with collaborators that are not part of the
// public API (a ready Kinesis client, a lease store). For tests and in-tree embedding (the
// kcl tools); users construct kcl::Worker from its configuration alone.
//
// Thread safety: make_worker may be called from any thread.
#pragma once

#include <chrono>
#include <memory>

#include "coordination/coordination_store.h"
#include "kcl/worker.h"
#include "kinesis/kinesis_client.h"
#include "leases/lease_store.h"
#include "lifecycle/paced_processor.h"
#include "retrieval/records_source.h"

namespace kcl::worker {

// What the worker otherwise makes from its configuration; anything left empty is made so.
struct WorkerInternals {
  std::shared_ptr<kinesis::KinesisClient> kinesis;
  std::shared_ptr<leases::LeaseStore> lease_store;
  // LeaseAssignment::kLeader's coordination table. Empty: a DynamoDB table, or, when
  // `lease_store` is given, an in-memory one of this worker's own (a fleet sharing an
  // in-memory lease store must share one of these too).
  std::shared_ptr<coordination::CoordinationStore> coordination_store;
  // Makes each shard's records source; empty = polling through `kinesis`.
  retrieval::RecordsSourceFactory records_source_factory;
  // Processors that pace their own deliveries (the pull consumer), instead of the
  // RecordProcessorFactory given to the worker (which may then be null).
  std::shared_ptr<lifecycle::PacedProcessorFactory> paced_factory;
  // At a graceful shutdown, how long each paced processor's records handed on are waited
  // for (before the worker's own shutdown_timeout starts). A handoff waits
  // assignment::handoff_finish_bound instead.
  std::chrono::milliseconds paced_shutdown_drain{0};
};

struct WorkerAccess {
  static std::unique_ptr<Worker> make(WorkerConfig config,
                                      std::shared_ptr<RecordProcessorFactory> factory,
                                      Dependencies deps, WorkerInternals internals);
};

inline std::unique_ptr<Worker> make_worker(WorkerConfig config,
                                           std::shared_ptr<RecordProcessorFactory> factory,
                                           Dependencies deps, WorkerInternals internals) {
  return WorkerAccess::make(std::move(config), std::move(factory), std::move(deps),
                            std::move(internals));
}

}  // namespace kcl::worker
