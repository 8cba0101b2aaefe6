// AssignmentStrategy: what a worker asks of the way its leases are shared. Two strategies,
// chosen once from LeaseConfig::assignment by make_assignment() (the only place that looks at
// it), both filling the held-lease core (leases/held_leases.h) with their hold rule as its
// HoldPolicy:
//  - leader-based (leader_assignment.h): an elected leader assigns the leases and moves them
//    by graceful handoffs; one heartbeat of the worker's membership entry holds all its
//    leases (hold rule and safety argument: membership.h).
//  - worker-takes (worker_takes_assignment.h): every worker takes free and expired leases,
//    steals to balance and renews each lease it holds, as the Java KCL 2.x does (hold rule
//    and safety argument: lease_taker.h).
// A worker calls make_assignment(), prepare(), start(); at a graceful stop drain(), stops its
// consumers, then release_all(), stop(), leave().
//
// Thread safety: prepare/start/drain/stop/leave from the worker's controlling thread, in that
// order; held(), leases_changed() and report() from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kcl/clock.h"
#include "kcl/lease_config.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"
#include "kcl/status.h"
#include "leases/held_leases.h"
#include "leases/lease_store.h"

namespace kcl::dynamodb {
class DynamoDbClient;
}
namespace kcl::leases {
class LoadMeter;
}

namespace kcl::coordination {
class CoordinationStore;
}

namespace kcl::assignment {

// A kind of coordination call that keeps failing (heartbeats, polls, lock renewals, leader
// passes), for the status page.
struct FailingCalls {
  std::string operation;
  std::uint64_t consecutive = 0;
  Clock::MonoTime since;
  Status last;
};

// A lease held by no live worker as this worker sees it (worker-takes: its counter has not
// moved for the failover time and no one has taken it).
struct UnheldLease {
  std::string lease_key;
  std::string owner;      // the worker named in the lease, not seen alive
  Clock::MonoTime since;  // when its counter last moved, as this worker saw it
};

struct AssignmentReport {
  std::string strategy;  // "leader" or "worker-takes"
  // Whether this worker holds the leader lock (the gauge kcl_leader_is_leader); empty when
  // the strategy has no leader (worker-takes).
  std::optional<bool> leading;
  std::vector<FailingCalls> failing;
  // Worker-takes: leases whose owner stopped renewing, left by the last take pass (this
  // worker at its maximum, say). Leader-based: empty (the leader moves a silent worker's
  // leases; KclNoLeader covers a fleet without one).
  std::vector<UnheldLease> unheld;
};

class AssignmentStrategy {
 public:
  virtual ~AssignmentStrategy() = default;

  // The leases this worker holds, filled by this strategy.
  virtual leases::HeldLeases& held() = 0;
  // Creates (or checks) what the strategy keeps in DynamoDB besides the lease table.
  virtual Status prepare() = 0;
  virtual void start() = 0;
  // A graceful stop begins: nothing more is taken or assigned to this worker.
  virtual void drain() = 0;
  // This worker created or deleted leases (a shard sync): the strategy looks at the table.
  virtual void leases_changed() = 0;
  // Once the consumers stopped at a graceful stop: hands back every held lease (a handoff
  // in progress completes; leader-based, a lease handed off to a worker that is gone or
  // stopping too is freed, so a fleet stopped together leaves no lease owned).
  virtual Status release_all() { return held().release_all(); }
  // Ends the threads (a step in progress finishes). Releases nothing.
  virtual void stop() = 0;
  // The last step of a graceful stop, after the leases were handed back and stop().
  virtual Status leave() = 0;
  virtual AssignmentReport report() const = 0;
  // Whether this worker runs the periodic shard sync now: leader-based, only while it leads
  // (one worker lists the shards); worker-takes, every worker.
  virtual bool runs_periodic_shard_sync() const = 0;
  // Called each time runs_periodic_shard_sync() turns true (leader-based: this worker became
  // the leader), on the strategy's thread; quick. Set before start().
  virtual void set_on_leading(std::function<void()> /*fn*/) {}

  // The fleet view's directory (observability/status_server.h): where this worker serves its
  // status endpoint, published before start() (leader-based: in its coordination-table entry,
  // written once at each registration, so it costs no write of its own).
  virtual void set_status_url(std::string /*url*/) {}
  // Where the directory comes from, or why there is none, in words for the fleet view.
  virtual std::string directory_note() const = 0;
  // Every worker's published status endpoint (worker id, url), this one's included; empty
  // when the strategy keeps no directory (worker-takes).
  virtual std::optional<Result<std::vector<std::pair<std::string, std::string>>>> status_urls() {
    return std::nullopt;
  }
};

// What a strategy is made from. Everything must outlive it; `coordination` may be null (then
// the leader-based strategy makes a DynamoDB one from `dynamodb`, or an in-memory one when
// that is null too: tests).
struct AssignmentParts {
  leases::LeaseStore* store = nullptr;
  std::shared_ptr<dynamodb::DynamoDbClient> dynamodb;
  std::shared_ptr<coordination::CoordinationStore> coordination;
  const Clock* clock = nullptr;
  MetricsSink* metrics = nullptr;
  Logger* logger = nullptr;           // may be null
  leases::LoadMeter* load = nullptr;  // may be null: no balancing by load
  std::uint64_t seed = 0;
};

// `config` must be valid (LeaseConfig::validate()).
std::unique_ptr<AssignmentStrategy> make_assignment(const LeaseConfig& config,
                                                    AssignmentParts parts);

}  // namespace kcl::assignment
