// kcl/initial_position.h: where reading starts in a shard whose lease has never been
// checkpointed.
//
// The initial position applies to the oldest shards that still need reading when an
// application starts on an empty lease table (see src/shardsync/lineage.h for the exact
// rules); shards created later by a split or merge start at TRIM_HORIZON (under
// AT_TIMESTAMP, at the timestamp, as the Java KCL), so nothing written to a child after the
// start is skipped. It is stored in a new lease as its checkpoint sentinel
// (TRIM_HORIZON / LATEST / AT_TIMESTAMP), as the Java KCL does; the timestamp itself is not
// stored: the shard consumer takes it from this configuration.
//
// Default: LATEST, as the Java KCL (a new application sees only records written after it
// starts). Choose TRIM_HORIZON to process everything still retained in the stream.
//
// Thread safety: a plain value; copy freely.
#pragma once

#include "kcl/start_position.h"

namespace kcl {

// A worker's initial position: TRIM_HORIZON, LATEST (the default) or AT_TIMESTAMP (see
// kcl/start_position.h; AFTER_CHECKPOINT is a resume point, which WorkerConfig::validate()
// refuses here).
using InitialPosition = StartPosition;

}  // namespace kcl
