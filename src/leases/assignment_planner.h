// The leader's assignment plan (LeaseAssignment::kLeader), as a pure function of what it
// knows, so it is tested on its own and the simulation and the leader share it.
//
// Shares: every assignable lease (not at SHARD_END) counts for its leaseOwner (a lease being
// handed off counts for the worker it goes to). With n leases and m live workers, the
// n mod m most loaded workers get ceil(n / m) and the rest floor(n / m), capped by
// max_leases_per_worker. The plan:
//   1. every orphan (free, or its owner is gone) goes to the worker furthest below its share;
//   2. a worker above its share hands its excess (leases not already being handed off) to
//      workers below theirs, as graceful handoffs.
// Once every worker holds its share nothing moves: the plan for a balanced fleet is empty,
// whatever the order of workers or leases.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kcl/lease.h"

namespace kcl::leases {

struct PlanInput {
  std::vector<std::string> workers;  // live workers
  // Assignable leases (not at SHARD_END), each with its owners as last read.
  std::vector<Lease> leases;
  // Keys of leases in `leases` to place whatever their leaseOwner says (free leases,
  // leases of fenced workers, expired leases of unknown owners).
  std::vector<std::string> orphans;
  int max_leases_per_worker = 0;  // 0: no cap
};

struct Move {
  std::string lease_key;
  std::optional<std::string> from;  // the owner it leaves (absent for a free lease)
  std::string to;
  bool handoff = false;  // a graceful handoff from a live owner (else an assignment)
};

struct Plan {
  std::vector<Move> moves;
  std::map<std::string, int> target;  // worker -> its share
  std::map<std::string, int> load;    // worker -> leases once the plan is done
};

Plan plan_assignment(const PlanInput& input);

}  // namespace kcl::leases
