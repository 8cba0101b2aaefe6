// Building a LeaderAssignment over stores the test owns, for tests that drive its agent's
// steps by hand on a ManualClock.
#pragma once

#include <memory>

#include "assignment/leader_assignment.h"
#include "coordination/coordination_store.h"
#include "leases/lease_store.h"

namespace kcl::leases::testing {

inline std::unique_ptr<assignment::LeaderAssignment> make_leader_assignment(
    const LeaseConfig& config, LeaseStore& leases, coordination::CoordinationStore& coordination,
    const Clock& clock, MetricsSink& metrics, Logger* logger, std::uint64_t seed) {
  assignment::AssignmentParts parts;
  parts.store = &leases;
  // Not owned: the test's store outlives the assignment.
  parts.coordination =
      std::shared_ptr<coordination::CoordinationStore>(std::shared_ptr<void>(), &coordination);
  parts.clock = &clock;
  parts.metrics = &metrics;
  parts.logger = logger;
  parts.seed = seed;
  return std::make_unique<assignment::LeaderAssignment>(config, parts);
}

}  // namespace kcl::leases::testing
