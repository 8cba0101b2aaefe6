// kcl/lease_config.h: how workers share the shards of a stream through the lease table.
//
// The defaults follow the Java KCL 2.x (failover 10 s, renew about every failover/3, take
// every 2 x failover, steal one lease at a time), so a mixed fleet behaves alike. Call
// validate() to get every problem in plain words; the effective_*() accessors resolve the
// fields whose default depends on another field.
//
// Thread safety: a plain value; copy freely.
#pragma once

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <vector>

namespace kcl {

// How leases are shared out (docs/architecture.md, "Leases (Java KCL compatible)", and
// src/assignment/README.md).
enum class LeaseAssignment {
  // One worker, elected through a lock entry in the coordination table, assigns the leases;
  // every worker keeps its leases through one heartbeat of its own entry there, and planned
  // moves are graceful handoffs (the Java KCL 3.x's checkpointOwner): the old owner finishes
  // its batch and checkpoints, then the new owner starts right after that checkpoint. A
  // joining worker gets its share within seconds; reads and writes do not grow with workers x
  // shards. All workers of an application must use the same mode.
  kLeader,
  // Every worker scans the lease table, takes free and expired leases and steals to balance,
  // and renews each lease it holds (the Java KCL 2.x's way; for fleets that share a table with
  // Java KCL 2.x workers or kcl-cpp workers of older versions).
  kWorkerTakes,
};

enum class BillingMode {
  kPayPerRequest,  // on-demand capacity (the default)
  kProvisioned,    // fixed read/write capacity units (see LeaseConfig)
};

struct LeaseConfig {
  // The application's name; the lease table is named after it unless table_name is set.
  // Required (1..255 characters) unless table_name is set.
  std::string application_name;

  // The DynamoDB lease table. Default: empty = application_name. DynamoDB table names are
  // 3..255 characters of [A-Za-z0-9_.-].
  std::string table_name;

  // This worker's identity, written as leaseOwner. Required, 1..256 characters, and unique
  // among the running workers of the application (e.g. "<host>:<pid>:<random>"): two
  // processes with one id would each believe they hold the same leases.
  std::string worker_id;

  // A lease whose leaseCounter has not changed for this long, as measured on the observing
  // worker's own monotonic clock, is expired and may be taken by another worker. Default
  // 10 s, range 100 ms..1 h. Wall clocks of different hosts are never compared.
  std::chrono::milliseconds failover_time{10000};

  // How leases are shared out. Default kLeader.
  LeaseAssignment assignment = LeaseAssignment::kLeader;

  // How often the holder renews its hold: with kLeader, one heartbeat of the worker's entry
  // in the coordination table (and the leader lock, on the leader); with kWorkerTakes, a
  // conditional increment of each lease's leaseCounter. Default 0 = failover_time / 2 with
  // kLeader (a failed heartbeat is retried after a fifth of that), failover_time / 3 with
  // kWorkerTakes; range 10 ms..failover_time / 2, so at least two renewals fit in one
  // failover time. Each renewal call has a deadline of half this interval, so one stalled
  // connection costs one attempt, not the lease.
  std::chrono::milliseconds renew_interval{0};

  // kLeader: how often a worker with something in progress (it joined, found a lease moved,
  // or saw a new leader or a call for attention in the last failover_time; a handoff to or
  // from it is pending) finds the leases the table gives it (a Query of the lease table's
  // owner index) and reads the leader lock, eventually consistent. Default 1 s, range
  // 10 ms..failover_time / 2. Sets how fast a worker in the middle of a change acts on the
  // leader's next move.
  std::chrono::milliseconds poll_interval{1000};

  // kLeader: how often a worker with nothing in progress reads the leader lock (eventually
  // consistent; half a read unit); one holding many leases reads it more often, within a
  // budget of 2 read units per lease and 12.5 per worker and minute (from 6 leases on, every
  // 2.4 s with the defaults). Every fifth of those reads finds the leases the table gives it
  // instead, so a lease assigned to it is read within five of them whatever became of the
  // leader. The leader calls the workers' attention in the lock when something is about to
  // move (a join, a move, a heartbeat overdue): a worker that reads it finds its leases and
  // polls every poll_interval for a failover time. Default 0 = max(poll_interval,
  // failover_time / 2); range poll_interval..failover_time. Sets how soon an idle worker acts
  // on a move, how long a lapsed lock can go unnoticed (a new leader is elected within
  // failover_time + this of the old one's crash) and, with renew_interval, most of an idle
  // worker's read cost (docs/cost-model.md).
  std::chrono::milliseconds idle_poll_interval{0};

  // kLeader: how often the leader reads every worker's entry (eventually consistent) while
  // something moves (a join, a leave, a handoff, a worker that missed a heartbeat, a
  // rebalance). Default 500 ms, range 10 ms..failover_time / 2. A crashed worker's leases
  // move within failover_time + leader_idle_poll_interval + this of the crash.
  std::chrono::milliseconds leader_poll_interval{500};

  // kLeader: how long the membership must stay unchanged before the leader assigns free
  // leases or rebalances: a fleet whose workers register within this of one another is
  // assigned in one pass, with no handoffs; a worker that comes later gets its share by
  // handoffs (graceful: nothing is read twice). A new leader starts unsettled, and while
  // unsettled it reads the workers' entries every settle_time / 4. A fleet that keeps
  // changing is taken as settled after failover_time / 2; a worker's own registration counts
  // from when it was written. Default 200 ms (a single worker's first record about 0.35 s
  // after start on the emulators); range 0..failover_time / 2. Raise it
  // when a fleet's workers start further apart and a cold start should move nothing.
  std::chrono::milliseconds settle_time{200};

  // kLeader: how often the leader reads every worker's entry while nothing moves. Default
  // 0 = max(leader_poll_interval, failover_time / 5); range leader_poll_interval..
  // failover_time / 2. Sets how soon a join is seen.
  std::chrono::milliseconds leader_idle_poll_interval{0};

  // kLeader: how often the leader reads the whole lease table (besides when a worker leaves
  // or a worker notes that it created or deleted leases). Default 30 s, range 1 s..1 h.
  std::chrono::milliseconds lease_scan_interval{30000};

  // kLeader: how long a worker a lease is handed to waits for the old owner to finish and
  // checkpoint before it takes the lease anyway (records after the old owner's last
  // checkpoint may then be delivered twice). The old owner, a kcl::PullConsumer, waits for
  // the shard's records taken and not yet acknowledged up to this less twice
  // max(2 x poll_interval, lost_lease_margin), so it checkpoints and lets go in time.
  // Default 30 s, range 100 ms..1 h.
  std::chrono::milliseconds handoff_timeout{30000};

  // kLeader: the coordination table (workers and the leader lock). Default: empty =
  // "<lease table>-CoordinatorState" (shared with a Java KCL 3.0-3.4 application's
  // coordinator state, whose entries kcl-cpp leaves alone), or, beside a lease table in the
  // Java KCL 3.5 single-table layout, "<lease table>-KclCppCoordinatorState" (a 3.5
  // application reads a "-CoordinatorState" table as one still to migrate);
  // docs/lease-table-layouts.md.
  std::string coordinator_table_name;

  // kWorkerTakes: how many lease renewals of one pass run at once (each on a lane of its own
  // for the pass). Default 8, range 1..64;
  // 1 renews one lease after the other (the simulation does, to stay deterministic).
  int renew_parallelism = 8;

  // How often a worker scans the lease table and takes (or steals) leases. Default 0 =
  // 2 x failover_time (as the Java KCL); range 10 ms..1 h. A crashed worker's leases are
  // taken within failover_time + take_interval. Each pass reads the whole table, so at scale
  // this interval sets most of the read cost (docs/benchmarks.md, "Lease table at scale").
  std::chrono::milliseconds take_interval{0};

  // Most leases one worker holds. Default: no limit; range >= 1. With a limit, shards can go
  // unprocessed if the workers together cannot hold every lease.
  int max_leases_per_worker = std::numeric_limits<int>::max();

  // Most leases taken from another worker in one pass, when no lease is free or expired and
  // this worker is below its share. Default 1, range 1..1000. Higher converges faster after a
  // worker joins, at the price of more leases changing hands.
  int max_leases_to_steal_at_once = 1;

  // Start-up ramp: in one pass a worker takes at most max(take_ramp_floor, leases it already
  // holds) free or expired leases, i.e. it at most doubles its holdings per pass. A worker is
  // visible to others only through the leases it owns, so without a ramp the first worker of
  // a cold start (or of a fleet restart) takes every lease and the others then steal them
  // back one lease per pass. Default 10, range 0..1,000,000; 0 turns the ramp off (take up
  // to the share at once, as the Java KCL does).
  int take_ramp_floor = 10;

  // The holder stops believing it holds a lease it could not renew this long before another
  // worker could take it: a lease is given up (and the lease-lost callback fires) once
  // failover_time - lost_lease_margin has passed since the start of its last successful
  // renewal. Gives the shard consumer time to stop before a new owner starts. Default 0 =
  // failover_time / 10; otherwise 1 ms..failover_time - renew_interval.
  std::chrono::milliseconds lost_lease_margin{0};

  // Random spread of the renew and take intervals of the threaded runner, as a fraction
  // (0.1 = +-10%), so that workers started together do not scan in lockstep. Default 0.1,
  // range 0..0.5.
  double interval_jitter = 0.1;

  // Billing mode of a lease table created by kcl-cpp. Default kPayPerRequest. An existing
  // table is used as it is.
  BillingMode billing_mode = BillingMode::kPayPerRequest;
  // Capacity of a table created with BillingMode::kProvisioned. Default 10 each, range
  // 1..40,000. Ignored for kPayPerRequest.
  long long read_capacity_units = 10;
  long long write_capacity_units = 10;

  // How long start-up waits for a new (or still CREATING) table to become ACTIVE. Default
  // 5 min, range 1 s..1 h.
  std::chrono::milliseconds table_active_timeout{300000};

  // Resolved values.
  const std::string& effective_table_name() const {
    return table_name.empty() ? application_name : table_name;
  }
  std::chrono::milliseconds effective_renew_interval() const {
    if (renew_interval.count() > 0) return renew_interval;
    return assignment == LeaseAssignment::kLeader ? failover_time / 2 : failover_time / 3;
  }
  // The deadline of one renewal call (heartbeat, lock renewal, lease renewal).
  std::chrono::milliseconds effective_renew_call_timeout() const {
    return std::max(std::chrono::milliseconds(5), effective_renew_interval() / 2);
  }
  std::string effective_coordinator_table_name() const {
    return coordinator_table_name.empty() ? effective_table_name() + "-CoordinatorState"
                                          : coordinator_table_name;
  }
  std::chrono::milliseconds effective_idle_poll_interval() const {
    if (idle_poll_interval.count() > 0) return idle_poll_interval;
    return std::max(poll_interval, failover_time / 2);
  }
  std::chrono::milliseconds effective_leader_idle_poll_interval() const {
    if (leader_idle_poll_interval.count() > 0) return leader_idle_poll_interval;
    return std::max(leader_poll_interval, failover_time / 5);
  }
  std::chrono::milliseconds effective_take_interval() const {
    return take_interval.count() > 0 ? take_interval : failover_time * 2;
  }
  std::chrono::milliseconds effective_lost_lease_margin() const {
    return lost_lease_margin.count() > 0 ? lost_lease_margin : failover_time / 10;
  }

  // Every problem with this configuration, in plain words; empty when valid.
  std::vector<std::string> validate() const;
};

}  // namespace kcl
