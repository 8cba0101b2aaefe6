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
//
// By load, when the leases' weights (their recent throughput, PlanInput::weights) differ
// (the heaviest more than twice the lightest): a worker's load is the sum of its leases'
// weights; orphans go, heaviest first, to the least loaded worker; then, while the most loaded
// worker carries more than 1.5 times the mean load or the least loaded less than the mean
// / 1.5 (a worker that just joined), the most loaded hands the lease whose weight is closest
// to half the gap to the least loaded, as long as that lowers the larger of the two loads. A worker
// with a hot shard so holds fewer others. The same fixed point: a plan carried out plans nothing
// more while the weights stay.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coordination/coordination_store.h"
#include "kcl/lease.h"

namespace kcl::assignment {

struct PlanInput {
  std::vector<std::string> workers;  // live workers
  // Assignable leases (not at SHARD_END), each with its owners as last read.
  std::vector<Lease> leases;
  // Keys of leases in `leases` to place whatever their leaseOwner says (free leases,
  // leases of fenced workers, expired leases of unknown owners).
  std::vector<std::string> orphans;
  int max_leases_per_worker = 0;  // 0: no cap
  // Lease key -> weight (e.g. KB/s processed recently); leases without one weigh the mean of
  // the others. Empty, or weights within a factor of two of each other: by count.
  std::map<std::string, double> weights;
};

struct Move {
  std::string lease_key;
  std::optional<std::string> from;  // the owner it leaves (absent for a free lease)
  std::string to;
  bool handoff = false;  // a graceful handoff from a live owner (else an assignment)
};

struct Plan {
  std::vector<Move> moves;
  std::map<std::string, int> target;          // worker -> its share
  std::map<std::string, int> load;            // worker -> leases once the plan is done
  bool by_load = false;                       // the weights decided (see above)
  std::map<std::string, double> weight_load;  // by_load: worker -> load once the plan is done
};

Plan plan_assignment(const PlanInput& input);

// What the leader knows when it plans (LeaseLeader gathers it each pass).
struct LeaderKnowledge {
  std::vector<coordination::WorkerEntry> workers;  // the live workers' entries
  const std::map<std::string, Lease>* leases;      // the lease table as the leader knows it
  std::vector<std::string> orphans;                // leases to place whatever their owner says
  // The membership has not changed for a while (see lease_leader.h): free leases may be
  // placed and leases rebalanced; while it changes, only the leases of dead workers move.
  bool settled = true;
  int max_leases_per_worker = 0;  // 0: no cap
};

struct PlanRequest {
  PlanInput input;
  // Every owned lease has a weight from its reader. A lease that moved a moment ago has no
  // estimate from its new reader yet: rebalancing waits for it (orphans are still placed),
  // or it would chase stale weights.
  bool weights_complete = true;
};

// The plan's input from what the leader knows, as a pure function: a draining worker gets
// nothing more; leases at SHARD_END are not assignable; while unsettled, free leases wait;
// each lease weighs what its reader published (KB/s), at least 1 so that idle shards spread
// by count.
PlanRequest build_plan_input(const LeaderKnowledge& known);

}  // namespace kcl::assignment
