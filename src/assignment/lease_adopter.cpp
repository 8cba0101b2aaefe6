#include "assignment/lease_adopter.h"

#include <algorithm>
#include <iterator>

namespace kcl::assignment {

LeaseAdopter::LeaseAdopter(leases::HeldLeases& held, leases::LeaseStore& store,
                           const LeaseConfig& config, const Clock& clock, MetricsSink& metrics)
    : held_(held), store_(store), config_(config), clock_(clock), metrics_(metrics) {}

// A take whose condition failed: the leader moved the lease on, a checkpoint landed, or the
// take itself landed and its answer was lost (the client's retry then finds the counter
// moved). The lease is read again and, while the table still gives it to this worker, taken
// on that read: otherwise the table would name this worker while it reads nothing until its
// next discover(). After kTakeAttempts the key is left to that discover() (never counted as
// handled while the table gives it to this worker).
constexpr int kTakeAttempts = 3;

//
// Two steps may look at the same key at once (the poll's, and the leader's after a pass that
// moved one of its leases), each awaiting its calls: a key this worker took meanwhile (a tenure
// exists) is not taken again, which would end the first tenure and start a second consumer beside
// it.
CallTask<bool> LeaseAdopter::adopt(Lease seen, LookResult& result) {
  Lease current = std::move(seen);
  for (int attempt = 1;; ++attempt) {
    if (held_.tenure_of(current.lease_key)) co_return true;
    const auto start = clock_.now();
    auto taken = co_await call(
        runner_, Lane::kPoll, [this, &current] { return store_.take_lease(current, worker_id()); });
    if (taken.ok()) {
      incoming_.erase(current.lease_key);
      metrics_.count("leases.taken", 1, {});
      result.gained.push_back(current.lease_key);
      held_.gain(taken.value(), start);
      co_return true;
    }
    if (taken.status().code() != StatusCode::kConditionFailed) {
      if (result.status.ok()) result.status = taken.status();
      co_return false;
    }
    const MetricTag tag{"operation", "take"};
    metrics_.count("leases.failed_conditions", 1, MetricTags(&tag, 1));
    auto read = co_await get_lease(current.lease_key);
    if (!read.ok()) {
      if (result.status.ok()) {
        result.status =
            read.status().with_context("reading lease " + current.lease_key + " again: ");
      }
      co_return false;
    }
    const std::optional<Lease>& now = *read;
    if (!now || now->lease_owner != worker_id() || now->checkpoint_owner || stopped_.load()) {
      co_return true;
    }
    if (attempt == kTakeAttempts) {
      if (result.status.ok()) {
        result.status = Status(StatusCode::kUnavailable,
                               "taking lease " + current.lease_key + ": the condition failed " +
                                   std::to_string(kTakeAttempts) +
                                   " times while the table gives it to this worker");
      }
      co_return false;
    }
    current = *now;
  }
}

CallTask<Result<std::optional<Lease>>> LeaseAdopter::get_lease(std::string key) {
  co_return co_await call(runner_, Lane::kPoll, [this, &key] { return store_.get_lease(key); });
}

CallTask<bool> LeaseAdopter::evict(Lease lease, LookResult& result) {
  auto done =
      co_await call(runner_, Lane::kPoll, [this, &lease] { return store_.evict_lease(lease); });
  if (done.ok() || done.status().code() == StatusCode::kConditionFailed) co_return true;
  if (result.status.ok()) result.status = done.status();
  co_return false;
}

// A lease this worker holds: a handoff the leader started is noted; a lease the table gives
// to someone else is given up.
bool LeaseAdopter::act_on_held(const Lease& lease, LookResult& result) {
  const std::string& key = lease.lease_key;
  if (lease.actual_owner() == worker_id()) {
    if (lease.checkpoint_owner == worker_id() && lease.lease_owner != worker_id()) {
      result.handoffs_requested.push_back(key);
      held_.note_handoff(lease);
    }
    return true;
  }
  // The table names someone else: lost (a write of ours would fail too).
  if (held_.lose(key,
                 Status(StatusCode::kLeaseLost, "the lease for " + key + " now belongs to " +
                                                    lease.actual_owner().value_or("nobody")))) {
    result.lost.push_back(key);
  }
  return true;
}

// A lease this worker does not hold: adopted, handed back, or waited for.
CallTask<bool> LeaseAdopter::act_on_unheld(Lease lease, LookResult& result) {
  const bool mine = lease.lease_owner == worker_id();
  if (lease.checkpoint_owner == worker_id()) {
    // Being handed off by this worker, which does not read it (an earlier incarnation did
    // and has stopped): nothing to finish, complete the handoff at once.
    co_return co_await evict(lease, result);
  }
  if (!mine) co_return true;
  if (stopped_.load()) {
    // Shutting down: hand an assigned lease straight back (free again, the leader moves it
    // on); one still being handed over is left to its old owner.
    if (lease.checkpoint_owner) co_return true;
    co_return co_await evict(lease, result);
  }
  if (!lease.checkpoint_owner) co_return co_await adopt(lease, result);
  // Handed to this worker; the old owner is still finishing (poll_incoming_handoffs).
  incoming_.try_emplace(lease.lease_key, Incoming{clock_.now(), *lease.checkpoint_owner});
  co_return true;
}

CallTask<bool> LeaseAdopter::look_at_one(std::string key, LookResult& result) {
  auto read = co_await get_lease(key);
  if (!read.ok()) {
    if (result.status.ok())
      result.status = read.status().with_context("reading lease " + key + ": ");
    co_return false;  // the rest wait for the next discover()
  }
  bool done = true;
  if (!read->has_value()) {
    if (held_.lose(key, Status(StatusCode::kLeaseLost, "the lease for " + key + " was deleted"))) {
      result.lost.push_back(key);
    }
  } else if (held_.holds(key)) {
    done = act_on_held(**read, result);
  } else if (held_.tenure_of(key)) {
    // Still held, but past the hold's deadline (a heartbeat or lock renewal is late): the
    // membership decides. A renewal that lands makes it current again in the same tenure; a
    // lapse gives it up (its consumer told), and it is looked at first after that. Taking it
    // now would start a second tenure beside the first one's consumer.
    co_return true;  // not handled: looked at again at the next poll
  } else {
    done = co_await act_on_unheld(**read, result);
  }
  if (done) result.handled.push_back(key);
  co_return done;
}

CallTask<LookResult> LeaseAdopter::look_at(std::vector<std::string> keys) {
  LookResult result;
  for (const std::string& key : keys) {
    if (!(co_await look_at_one(key, result))) break;
  }
  for (const std::string& key : keys) unfinished_.insert(key);
  for (const std::string& key : result.handled) unfinished_.erase(key);
  co_return result;
}

CallTask<LookResult> LeaseAdopter::discover() {
  auto owned =
      co_await call(runner_, Lane::kPoll, [this] { return store_.owned_lease_keys(worker_id()); });
  if (!owned.ok()) {
    LookResult failed;
    failed.status = owned.status().with_context("finding the leases the table gives this worker: ");
    co_return failed;
  }
  const std::vector<std::string> claimed = claimed_keys();  // sorted
  std::vector<std::string> differ;
  std::set_difference(owned->begin(), owned->end(), claimed.begin(), claimed.end(),
                      std::back_inserter(differ));
  // Keys an earlier look did not finish (a read or a take failed): the lease may have moved
  // on since (a handoff from this worker that it never read, to complete).
  differ.insert(differ.end(), unfinished_.begin(), unfinished_.end());
  for (const leases::HeldSummary& h : held_.summaries()) {
    if (h.current && !h.handing_off &&
        !std::binary_search(owned->begin(), owned->end(), h.lease_key)) {
      differ.push_back(h.lease_key);
    }
  }
  if (differ.empty()) co_return LookResult{};
  std::sort(differ.begin(), differ.end());
  differ.erase(std::unique(differ.begin(), differ.end()), differ.end());
  co_return co_await look_at(std::move(differ));
}

bool LeaseAdopter::has_pending_incoming() const { return !incoming_.empty(); }

CallTask<LookResult> LeaseAdopter::poll_incoming_handoffs() {
  LookResult result;
  const std::vector<std::pair<std::string, Incoming>> pending(incoming_.begin(), incoming_.end());
  for (const auto& [key, in] : pending) {
    auto read = co_await get_lease(key);
    if (!read.ok()) {
      if (result.status.ok()) result.status = read.status();
      break;
    }
    if (!read->has_value() || (*read)->lease_owner != worker_id() || stopped_.load()) {
      incoming_.erase(key);
      continue;
    }
    const Lease& lease = **read;
    if (!lease.checkpoint_owner) {
      if (!(co_await adopt(lease, result))) break;
      continue;
    }
    if (clock_.now() - in.since < config_.handoff_timeout) continue;
    // The old owner did not finish in time: take it anyway (conditional on what was read,
    // checkpointOwner included). Its later writes fail on the counter; records after its
    // last checkpoint may be delivered twice.
    if (!(co_await adopt(lease, result))) break;
    if (held_.holds(key)) {
      result.forced.push_back(key);
      metrics_.count("leases.handoffs_forced", 1, {});
    }
  }
  co_return result;
}

CallTask<Result<std::vector<LeaseAdopter::HandingOver>>> LeaseAdopter::hand_back_unread() {
  auto owned =
      co_await call(runner_, Lane::kPoll, [this] { return store_.owned_lease_keys(worker_id()); });
  if (!owned.ok()) co_return owned.status().with_context("reading the leases of this worker: ");
  std::vector<HandingOver> handing_over;
  for (const std::string& key : *owned) {
    if (held_.holds(key)) continue;
    auto read = co_await get_lease(key);
    if (!read.ok()) co_return read.status().with_context("reading lease " + key + ": ");
    const std::optional<Lease>& lease = *read;
    if (!lease || lease->lease_owner != worker_id()) continue;
    if (lease->checkpoint_owner) {
      handing_over.push_back({key, *lease->checkpoint_owner});
      continue;
    }
    Status s = co_await hand_back(key, *lease);
    if (!s.ok()) co_return s.with_context("handing back " + key + ": ");
  }
  co_return handing_over;
}

// One evict_lease hands back a lease assigned to this worker. A lease still being handed over
// to it takes two: the first completes the handoff (checkpointOwner goes, the counter moves, so
// a write of the old owner still finishing fails and it gives the lease up; its next owner
// starts from the last checkpoint), the second removes leaseOwner. A condition that fails means
// the lease moved meanwhile (the old owner completed the handoff): it is read again.
CallTask<Status> LeaseAdopter::hand_back(std::string key, std::optional<Lease> seen) {
  co_return co_await hand_back_for(worker_id(), std::move(key), std::move(seen));
}

CallTask<Status> LeaseAdopter::hand_back_for(std::string owner, std::string key,
                                             std::optional<Lease> seen) {
  std::optional<Lease> current = std::move(seen);
  for (int failed = 0;;) {
    if (!current) {
      auto read = co_await get_lease(key);
      if (!read.ok()) co_return read.status();
      current = std::move(*read);
      if (!current) co_return Status::Ok();
    }
    if (current->lease_owner != owner) co_return Status::Ok();
    auto done = co_await call(runner_, Lane::kPoll,
                              [this, &current] { return store_.evict_lease(*current); });
    if (done.ok()) {
      current = std::move(*done);
      continue;
    }
    if (done.status().code() != StatusCode::kConditionFailed) co_return done.status();
    if (++failed == kTakeAttempts) {
      co_return Status(StatusCode::kUnavailable,
                       "the condition failed " + std::to_string(kTakeAttempts) + " times");
    }
    current.reset();
  }
}

// The leases as written need no read: a write of their receiver meanwhile fails the first
// condition, and hand_back_for() reads again.
CallTask<Status> LeaseAdopter::free_unread(std::vector<Lease> handed_over,
                                           std::function<bool(const std::string&)> reads) {
  for (Lease& lease : handed_over) {
    if (!lease.lease_owner || reads(*lease.lease_owner)) continue;
    const std::string key = lease.lease_key;
    Status s = co_await hand_back_for(*lease.lease_owner, key, std::move(lease));
    if (!s.ok()) co_return s.with_context("freeing " + key + ": ");
  }
  co_return Status::Ok();
}

void LeaseAdopter::membership_ended(const Status& why) {
  // The consumers of leases this worker was handing off stop without completing their
  // handoffs: the next discover() completes each at once (act_on_unheld), so the new owner
  // need not wait handoff_timeout. The owner index does not find them: their leaseOwner is the
  // new owner already.
  for (const leases::HeldSummary& h : held_.summaries()) {
    if (h.handing_off) unfinished_.insert(h.lease_key);
  }
  (void)held_.lose_all(why);
  incoming_.clear();
}

std::vector<std::string> LeaseAdopter::claimed_keys() const {
  std::vector<std::string> keys;
  for (const leases::HeldSummary& h : held_.summaries()) {
    if (h.current) keys.push_back(h.lease_key);
  }
  for (const auto& [key, in] : incoming_) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

}  // namespace kcl::assignment
