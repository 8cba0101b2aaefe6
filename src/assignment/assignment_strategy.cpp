#include "assignment/assignment_strategy.h"

#include "assignment/leader_assignment.h"
#include "assignment/worker_takes_assignment.h"
#include "coordination/dynamodb_coordination_store.h"
#include "coordination/in_memory_coordination_store.h"

namespace kcl::assignment {

std::unique_ptr<AssignmentStrategy> make_assignment(const LeaseConfig& config,
                                                    AssignmentParts parts) {
  if (config.assignment == kcl::LeaseAssignment::kWorkerTakes) {
    return std::make_unique<WorkerTakesAssignment>(config, parts);
  }
  if (!parts.coordination) {
    if (parts.dynamodb) {
      leases::LeaseStore* store = parts.store;
      parts.coordination = std::make_shared<coordination::DynamoDbCoordinationStore>(
          parts.dynamodb, config,
          [store]() -> Result<bool> { return store ? store->uses_entity_types() : false; },
          parts.logger);
    } else {
      parts.coordination = std::make_shared<coordination::InMemoryCoordinationStore>();
    }
  }
  return std::make_unique<LeaderAssignment>(config, parts);
}

}  // namespace kcl::assignment
