// The renew pass of worker-takes (LeaseAssignment::kWorkerTakes): every lease this worker
// holds renewed by one conditional increment of its counter, so that other workers do not
// see it expire (lease_taker.h: the safety argument). A lease whose deadline passed is given
// up by its renewal (the listener told); one checkpointed within the last half renew interval
// counts as renewed. Renewals run in parallel, so one stalled connection delays no other
// lease's renewal. WorkerTakesAssignment runs the pass on real time; tests and the simulation
// call it on a ManualClock.
//
// Thread safety: any thread; beside a take pass and checkpoint writes.
#pragma once

#include <string>
#include <vector>

#include "kcl/lease_config.h"
#include "kcl/status.h"
#include "leases/held_leases.h"

namespace kcl::assignment {

struct RenewPassResult {
  Status status;  // the first failure other than a lost lease
  int renewed = 0;
  int skipped = 0;                // written (checkpointed) recently: counted as renewed
  std::vector<std::string> lost;  // leases given up by this pass (listener told)
  int failed = 0;                 // renewals that failed transiently (lease still held)
};

RenewPassResult run_renew_pass(leases::HeldLeases& held, const LeaseConfig& config);

}  // namespace kcl::assignment
