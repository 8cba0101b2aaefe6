#include "assignment/lease_renewer.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "base/thread_name.h"

namespace kcl::assignment {

using leases::HeldSummary;
using leases::RenewOutcome;

namespace {

// Renewals run in parallel (each call has a deadline shorter than the renew interval), so one
// stalled connection delays no other lease's renewal.
void renew_all(leases::HeldLeases& held, const LeaseConfig& config,
               const std::vector<std::string>& keys, RenewPassResult& result) {
  std::mutex result_mu;
  auto renew_one = [&](const std::string& key) {
    Status failure;
    const RenewOutcome outcome = held.renew(key, &failure);
    std::lock_guard<std::mutex> lock(result_mu);
    switch (outcome) {
      case RenewOutcome::kRenewed:
        ++result.renewed;
        break;
      case RenewOutcome::kLost:
        result.lost.push_back(key);
        break;
      case RenewOutcome::kFailed:
        ++result.failed;
        if (result.status.ok()) result.status = failure;
        break;
      case RenewOutcome::kBusy:
      case RenewOutcome::kNotHeld:
        break;
    }
  };
  if (keys.size() <= 1 || config.renew_parallelism <= 1) {
    for (const auto& key : keys) renew_one(key);
    return;
  }
  const std::size_t lanes =
      std::min(keys.size(), static_cast<std::size_t>(config.renew_parallelism));
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> threads;
  threads.reserve(lanes);
  for (std::size_t t = 0; t < lanes; ++t) {
    threads.push_back(base::named_thread("kcl-renew-lane", [&] {
      for (std::size_t i = next++; i < keys.size(); i = next++) renew_one(keys[i]);
    }));
  }
  for (auto& t : threads) t.join();
}

}  // namespace

RenewPassResult run_renew_pass(leases::HeldLeases& held, const LeaseConfig& config) {
  RenewPassResult result;
  // A lease checkpointed within the last half renew interval counts as renewed (the
  // checkpoint moved its counter): the next pass, at most about 1.5 intervals after that
  // write, renews it.
  const auto recent = config.effective_renew_interval() / 2;
  std::vector<std::string> keys;
  for (const HeldSummary& h : held.summaries()) {
    if (held.checkpointed_within(h.lease_key, recent)) {
      ++result.skipped;
    } else {
      keys.push_back(h.lease_key);
    }
  }
  renew_all(held, config, keys, result);
  std::sort(result.lost.begin(), result.lost.end());
  return result;
}

}  // namespace kcl::assignment
