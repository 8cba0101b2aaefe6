// LeaseAdopter: brings what this worker holds in line with what the lease table gives it
// (leader-based). discover() reads the keys of the leases whose leaseOwner is this worker and
// looks at each that differs from what it claims (held, or handed to it: claimed_keys()):
//  - gained: assigned to it (no checkpointOwner): adopted with take_lease (counter + 1,
//    conditional on what was read), which fences an earlier holder's writes. Handed to it
//    while the old owner still reads (checkpointOwner = that owner): waited for in
//    poll_incoming_handoffs() until the old owner completes, or handoff_timeout passes.
//  - to hand off: held, checkpointOwner = this worker, leaseOwner another: HeldLeases tells
//    the listener once; the worker stops the shard's consumer (final checkpoint) and
//    completes the handoff (HeldLeases::complete_handoff), within the hold MembershipHold
//    gives a lease being handed off.
//  - lost: held, but the table gives it to another or deleted it: given up.
// After the membership ended every lease was given up; those the table still gives this
// worker are adopted again by its next discover() (every take is conditional).
//
// Thread safety: belongs to the thread that runs the agent's steps (the coordinator); its
// store calls run on the poll lane (inline without a call runner). taking_stopped() from any
// thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "assignment/call_task.h"
#include "kcl/clock.h"
#include "kcl/lease_config.h"
#include "kcl/metrics.h"
#include "kcl/status.h"
#include "leases/held_leases.h"
#include "leases/lease_store.h"

namespace kcl::assignment {

// What discover() / poll_incoming_handoffs() did.
struct LookResult {
  Status status;                     // the first failure (the keys not handled are retried)
  std::vector<std::string> handled;  // keys looked at to the end
  std::vector<std::string> gained;
  std::vector<std::string> handoffs_requested;
  std::vector<std::string> lost;
  std::vector<std::string> forced;  // taken after handoff_timeout
};

class LeaseAdopter {
 public:
  // Everything given must outlive the adopter.
  LeaseAdopter(leases::HeldLeases& held, leases::LeaseStore& store, const LeaseConfig& config,
               const Clock& clock, MetricsSink& metrics);

  // Where the store calls run (null: inline).
  void set_call_runner(CallRunner* runner) { runner_ = runner; }
  // How a worker learns its leases: reads the keys of the leases the table gives this worker
  // (LeaseStore::owned_lease_keys: one Query of the owner index) and looks at each one that differs
  // from what it claims: one it does not hold is adopted (or waited for, when it is handed to it),
  // one it holds that the table no longer names it the owner of is read (a handoff to note, or a
  // loss); so is every key an earlier look did not finish.
  CallTask<LookResult> discover();
  // Checks the leases handed to this worker whose old owner has not finished yet.
  CallTask<LookResult> poll_incoming_handoffs();
  bool has_pending_incoming() const;
  // The membership ended: every lease is given up (`why` tells their consumers), handoffs to
  // come are forgotten, and those from this worker that were in progress are completed by the
  // next discover().
  void membership_ended(const Status& why);
  // The held leases and those handed to this worker, sorted.
  std::vector<std::string> claimed_keys() const;
  // Graceful shutdown: nothing more is adopted; an assigned lease is handed straight back.
  void stop_taking() { stopped_.store(true); }
  // A lease still being handed over to this worker: its key and its old owner.
  struct HandingOver {
    std::string key;
    std::string from;
  };
  // The last step of a graceful stop, when nothing is held any more: reads the leases the
  // table gives this worker and hands back each one assigned to it. Returns those still
  // being handed over to it, for the caller to hand back (hand_back) unless their old owner
  // still reads them: that one completes the handoff, and the leader moves the lease on.
  CallTask<Result<std::vector<HandingOver>>> hand_back_unread();
  // Hands back a lease the table gives this worker (`seen`: as just read, else it is read),
  // one still being handed over to it included: so a fleet stopped at any moment leaves no
  // lease owned.
  CallTask<Status> hand_back(std::string key, std::optional<Lease> seen = std::nullopt);
  // A graceful stop's last look at the leases this worker was handing off, as
  // HeldLeases::release_all() wrote them when it completed their handoffs: each given to a
  // worker for which `reads` is false (gone, or stopping itself) is freed, as its receiver
  // would hand it back: nobody else would (a fleet stopped while a lease was being handed).
  CallTask<Status> free_unread(std::vector<Lease> handed_over,
                               std::function<bool(const std::string& worker)> reads);
  bool taking_stopped() const { return stopped_.load(); }

 private:
  struct Incoming {
    Clock::MonoTime since;  // first seen handed to this worker
    std::string from;       // the old owner
  };
  // Reads each lease and acts on it (see the header).
  CallTask<LookResult> look_at(std::vector<std::string> keys);
  // One key of look_at(); false when the rest must wait (the store failed).
  CallTask<bool> look_at_one(std::string key, LookResult& result);
  bool act_on_held(const Lease& lease, LookResult& result);
  CallTask<bool> act_on_unheld(Lease lease, LookResult& result);
  // Adopts `seen` (leaseOwner = this worker) with take_lease; false when the store failed
  // or the lease is to be looked at again (see kTakeAttempts).
  CallTask<bool> adopt(Lease seen, LookResult& result);
  // evict_lease (hand back, or complete a handoff of a lease this worker does not read);
  // false when the store failed.
  CallTask<bool> evict(Lease lease, LookResult& result);
  CallTask<Result<std::optional<Lease>>> get_lease(std::string key);
  // hand_back() for the worker `owner` the table gives the lease to.
  CallTask<Status> hand_back_for(std::string owner, std::string key, std::optional<Lease> seen);
  const std::string& worker_id() const { return config_.worker_id; }

  leases::HeldLeases& held_;
  leases::LeaseStore& store_;
  const LeaseConfig config_;
  const Clock& clock_;
  MetricsSink& metrics_;
  CallRunner* runner_ = nullptr;
  std::atomic<bool> stopped_{false};
  std::map<std::string, Incoming, std::less<>> incoming_;
  // keys a look did not finish (looked at again by the next discover())
  std::set<std::string, std::less<>> unfinished_;
};

}  // namespace kcl::assignment
