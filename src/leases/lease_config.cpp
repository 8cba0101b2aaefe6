#include "kcl/lease_config.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace kcl {
namespace {

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

bool valid_table_name(const std::string& name) {
  if (name.size() < 3 || name.size() > 255) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

}  // namespace

std::vector<std::string> LeaseConfig::validate() const {
  using std::chrono::milliseconds;
  std::vector<std::string> problems;

  if (application_name.empty() && table_name.empty()) {
    problems.push_back(
        "application_name is empty and no table_name is set: the lease table "
        "is named after the application, so one of them is required");
  } else if (application_name.size() > 255) {
    problems.push_back("application_name is " + std::to_string(application_name.size()) +
                       " characters long; at most 255 are allowed");
  }
  const std::string& table = effective_table_name();
  if (!table.empty() && !valid_table_name(table)) {
    problems.push_back("lease table name \"" + table +
                       "\" is not a valid DynamoDB table name (3 to 255 characters of "
                       "A-Z a-z 0-9 _ - .)");
  }

  if (worker_id.empty()) {
    problems.push_back(
        "worker_id is empty: each worker needs an id, unique among the "
        "running workers, to write as lease owner");
  } else if (worker_id.size() > 256) {
    problems.push_back("worker_id is " + std::to_string(worker_id.size()) +
                       " characters long; at most 256 are allowed");
  }

  bool failover_ok = true;
  if (failover_time < milliseconds(100) || failover_time > std::chrono::hours(1)) {
    problems.push_back("failover_time is " + ms(failover_time) +
                       "; it must be between 100 ms and 1 hour");
    failover_ok = false;
  }

  if (renew_interval.count() < 0) {
    problems.push_back("renew_interval is negative (" + ms(renew_interval) + ")");
  } else if (failover_ok) {
    milliseconds renew = effective_renew_interval();
    if (renew < milliseconds(10) || renew > failover_time / 2) {
      problems.push_back("renew_interval is " + ms(renew) + "; it must be between 10 ms and " +
                         "half the failover time (" + ms(failover_time / 2) +
                         ") so that a lease is renewed at least twice per failover time");
    }
  }

  if (failover_ok) {
    auto in_range = [&](const char* name, milliseconds v, milliseconds lo, milliseconds hi) {
      if (v < lo || v > hi) {
        problems.push_back(std::string(name) + " is " + ms(v) + "; it must be between " + ms(lo) +
                           " and " + ms(hi));
      }
    };
    in_range("poll_interval", poll_interval, milliseconds(10), failover_time / 2);
    in_range("leader_poll_interval", leader_poll_interval, milliseconds(10), failover_time / 2);
    if (idle_poll_interval.count() != 0) {
      in_range("idle_poll_interval", idle_poll_interval, poll_interval, failover_time);
    }
    if (leader_idle_poll_interval.count() != 0) {
      in_range("leader_idle_poll_interval", leader_idle_poll_interval, leader_poll_interval,
               failover_time / 2);
    }
    in_range("settle_time", settle_time, milliseconds(0), failover_time / 2);
    in_range("lease_scan_interval", lease_scan_interval, milliseconds(1000), std::chrono::hours(1));
    in_range("handoff_timeout", handoff_timeout, milliseconds(100), std::chrono::hours(1));
  }
  if (!coordinator_table_name.empty() && !valid_table_name(coordinator_table_name)) {
    problems.push_back("coordinator_table_name \"" + coordinator_table_name +
                       "\" is not a valid DynamoDB table name (3 to 255 characters of "
                       "A-Z a-z 0-9 _ - .)");
  } else if (coordinator_table_name.empty() && !table.empty() &&
             effective_coordinator_table_name().size() > 255) {
    problems.push_back("the coordination table's name \"" + effective_coordinator_table_name() +
                       "\" is longer than 255 characters; set coordinator_table_name");
  }

  if (take_interval.count() < 0) {
    problems.push_back("take_interval is negative (" + ms(take_interval) + ")");
  } else if (failover_ok) {
    milliseconds take = effective_take_interval();
    if (take < milliseconds(10) || take > std::chrono::hours(1)) {
      problems.push_back("take_interval is " + ms(take) + "; it must be between 10 ms and 1 hour");
    }
  }

  if (renew_parallelism < 1 || renew_parallelism > 64) {
    problems.push_back("renew_parallelism is " + std::to_string(renew_parallelism) +
                       "; it must be between 1 and 64");
  }
  if (max_leases_per_worker < 1) {
    problems.push_back("max_leases_per_worker is " + std::to_string(max_leases_per_worker) +
                       "; it must be at least 1");
  }
  if (max_leases_to_steal_at_once < 1 || max_leases_to_steal_at_once > 1000) {
    problems.push_back("max_leases_to_steal_at_once is " +
                       std::to_string(max_leases_to_steal_at_once) +
                       "; it must be between 1 and 1000");
  }
  if (take_ramp_floor < 0 || take_ramp_floor > 1000000) {
    problems.push_back("take_ramp_floor is " + std::to_string(take_ramp_floor) +
                       "; it must be between 0 (no ramp) and 1,000,000");
  }

  if (lost_lease_margin.count() < 0) {
    problems.push_back("lost_lease_margin is negative (" + ms(lost_lease_margin) + ")");
  } else if (failover_ok && renew_interval.count() >= 0) {
    milliseconds margin = effective_lost_lease_margin();
    milliseconds room = failover_time - effective_renew_interval();
    if (margin >= room) {
      problems.push_back("lost_lease_margin is " + ms(margin) +
                         "; it must be less than failover_time - renew_interval (" + ms(room) +
                         "), or a lease would be given up before it is due for renewal");
    }
  }

  if (!(interval_jitter >= 0.0 && interval_jitter <= 0.5)) {
    problems.push_back("interval_jitter is " + std::to_string(interval_jitter) +
                       "; it must be between 0 and 0.5");
  }

  if (billing_mode == BillingMode::kProvisioned) {
    if (read_capacity_units < 1 || read_capacity_units > 40000) {
      problems.push_back("read_capacity_units is " + std::to_string(read_capacity_units) +
                         "; with provisioned billing it must be between 1 and 40,000");
    }
    if (write_capacity_units < 1 || write_capacity_units > 40000) {
      problems.push_back("write_capacity_units is " + std::to_string(write_capacity_units) +
                         "; with provisioned billing it must be between 1 and 40,000");
    }
  }

  if (table_active_timeout < std::chrono::seconds(1) ||
      table_active_timeout > std::chrono::hours(1)) {
    problems.push_back("table_active_timeout is " + ms(table_active_timeout) +
                       "; it must be between 1 second and 1 hour");
  }
  return problems;
}

}  // namespace kcl
