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

// The parts of LeaseConfig::validate(), each adding what it finds to `problems`.
void check_names(const LeaseConfig& c, std::vector<std::string>& problems) {
  if (c.application_name.empty() && c.table_name.empty()) {
    problems.push_back(
        "application_name is empty and no table_name is set: the lease table "
        "is named after the application, so one of them is required");
  } else if (c.application_name.size() > 255) {
    problems.push_back("application_name is " + std::to_string(c.application_name.size()) +
                       " characters long; at most 255 are allowed");
  }
  const std::string& table = c.effective_table_name();
  if (!table.empty() && !valid_table_name(table)) {
    problems.push_back("lease table name \"" + table +
                       "\" is not a valid DynamoDB table name (3 to 255 characters of "
                       "A-Z a-z 0-9 _ - .)");
  }

  if (c.worker_id.empty()) {
    problems.push_back(
        "worker_id is empty: each worker needs an id, unique among the "
        "running workers, to write as lease owner");
  } else if (c.worker_id.size() > 256) {
    problems.push_back("worker_id is " + std::to_string(c.worker_id.size()) +
                       " characters long; at most 256 are allowed");
  }

  if (!c.coordinator_table_name.empty() && !valid_table_name(c.coordinator_table_name)) {
    problems.push_back("coordinator_table_name \"" + c.coordinator_table_name +
                       "\" is not a valid DynamoDB table name (3 to 255 characters of "
                       "A-Z a-z 0-9 _ - .)");
  } else if (c.coordinator_table_name.empty() && !table.empty() &&
             c.effective_coordinator_table_name().size() > 255) {
    problems.push_back("the coordination table's name \"" + c.effective_coordinator_table_name() +
                       "\" is longer than 255 characters; set coordinator_table_name");
  }
}

bool failover_in_range(const LeaseConfig& c) {
  return c.failover_time >= std::chrono::milliseconds(100) &&
         c.failover_time <= std::chrono::hours(1);
}

void check_intervals(const LeaseConfig& c, std::vector<std::string>& problems) {
  using std::chrono::milliseconds;
  const bool failover_ok = failover_in_range(c);
  if (!failover_ok) {
    problems.push_back("failover_time is " + ms(c.failover_time) +
                       "; it must be between 100 ms and 1 hour");
  }

  if (c.renew_interval.count() < 0) {
    problems.push_back("renew_interval is negative (" + ms(c.renew_interval) + ")");
  } else if (failover_ok) {
    milliseconds renew = c.effective_renew_interval();
    if (renew < milliseconds(10) || renew > c.failover_time / 2) {
      problems.push_back("renew_interval is " + ms(renew) + "; it must be between 10 ms and " +
                         "half the failover time (" + ms(c.failover_time / 2) +
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
    in_range("poll_interval", c.poll_interval, milliseconds(10), c.failover_time / 2);
    in_range("leader_poll_interval", c.leader_poll_interval, milliseconds(10), c.failover_time / 2);
    if (c.idle_poll_interval.count() != 0) {
      in_range("idle_poll_interval", c.idle_poll_interval, c.poll_interval, c.failover_time);
    }
    if (c.leader_idle_poll_interval.count() != 0) {
      in_range("leader_idle_poll_interval", c.leader_idle_poll_interval, c.leader_poll_interval,
               c.failover_time / 2);
    }
    in_range("settle_time", c.settle_time, milliseconds(0), c.failover_time / 2);
    in_range("lease_scan_interval", c.lease_scan_interval, milliseconds(1000),
             std::chrono::hours(1));
    in_range("handoff_timeout", c.handoff_timeout, milliseconds(100), std::chrono::hours(1));
  }
  if (c.take_interval.count() < 0) {
    problems.push_back("take_interval is negative (" + ms(c.take_interval) + ")");
  } else if (failover_ok) {
    milliseconds take = c.effective_take_interval();
    if (take < milliseconds(10) || take > std::chrono::hours(1)) {
      problems.push_back("take_interval is " + ms(take) + "; it must be between 10 ms and 1 hour");
    }
  }
}

void check_limits(const LeaseConfig& c, std::vector<std::string>& problems) {
  using std::chrono::milliseconds;
  const bool failover_ok = failover_in_range(c);
  if (c.renew_parallelism < 1 || c.renew_parallelism > 64) {
    problems.push_back("renew_parallelism is " + std::to_string(c.renew_parallelism) +
                       "; it must be between 1 and 64");
  }
  if (c.max_leases_per_worker < 1) {
    problems.push_back("max_leases_per_worker is " + std::to_string(c.max_leases_per_worker) +
                       "; it must be at least 1");
  }
  if (c.max_leases_to_steal_at_once < 1 || c.max_leases_to_steal_at_once > 1000) {
    problems.push_back("max_leases_to_steal_at_once is " +
                       std::to_string(c.max_leases_to_steal_at_once) +
                       "; it must be between 1 and 1000");
  }
  if (c.take_ramp_floor < 0 || c.take_ramp_floor > 1000000) {
    problems.push_back("take_ramp_floor is " + std::to_string(c.take_ramp_floor) +
                       "; it must be between 0 (no ramp) and 1,000,000");
  }

  if (c.lost_lease_margin.count() < 0) {
    problems.push_back("lost_lease_margin is negative (" + ms(c.lost_lease_margin) + ")");
  } else if (failover_ok && c.renew_interval.count() >= 0) {
    milliseconds margin = c.effective_lost_lease_margin();
    milliseconds room = c.failover_time - c.effective_renew_interval();
    if (margin >= room) {
      problems.push_back("lost_lease_margin is " + ms(margin) +
                         "; it must be less than failover_time - renew_interval (" + ms(room) +
                         "), or a lease would be given up before it is due for renewal");
    }
  }

  if (!(c.interval_jitter >= 0.0 && c.interval_jitter <= 0.5)) {
    problems.push_back("interval_jitter is " + std::to_string(c.interval_jitter) +
                       "; it must be between 0 and 0.5");
  }

  if (c.billing_mode == BillingMode::kProvisioned) {
    if (c.read_capacity_units < 1 || c.read_capacity_units > 40000) {
      problems.push_back("read_capacity_units is " + std::to_string(c.read_capacity_units) +
                         "; with provisioned billing it must be between 1 and 40,000");
    }
    if (c.write_capacity_units < 1 || c.write_capacity_units > 40000) {
      problems.push_back("write_capacity_units is " + std::to_string(c.write_capacity_units) +
                         "; with provisioned billing it must be between 1 and 40,000");
    }
  }

  if (c.table_active_timeout < std::chrono::seconds(1) ||
      c.table_active_timeout > std::chrono::hours(1)) {
    problems.push_back("table_active_timeout is " + ms(c.table_active_timeout) +
                       "; it must be between 1 second and 1 hour");
  }
}

}  // namespace

std::vector<std::string> LeaseConfig::validate() const {
  std::vector<std::string> problems;
  check_names(*this, problems);
  check_intervals(*this, problems);
  check_limits(*this, problems);
  return problems;
}

}  // namespace kcl
