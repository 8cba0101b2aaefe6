// LeaderAssignment: the leader-based strategy (LeaseAssignment::kLeader; see
// assignment_strategy.h): this worker's held leases under the membership's hold
// (MembershipHold), its AssignmentAgent, and the Coordinator whose one thread owns the agent's
// state and runs its steps (heartbeat, poll, leader pass), their calls on three I/O lanes.
//
// Thread safety: as AssignmentStrategy; agent() for tests and the simulation, which drive the
// steps themselves instead of start().
#pragma once

#include <memory>

#include "assignment/assignment_agent.h"
#include "assignment/assignment_strategy.h"
#include "assignment/coordinator.h"
#include "assignment/membership.h"
#include "coordination/coordination_store.h"

namespace kcl::assignment {

class LeaderAssignment final : public AssignmentStrategy {
 public:
  // `parts.coordination` is required.
  LeaderAssignment(const LeaseConfig& config, const AssignmentParts& parts);
  ~LeaderAssignment() override;

  leases::HeldLeases& held() override { return held_; }
  Status prepare() override { return coordination_->create_table_if_not_exists(); }
  void start() override;
  void drain() override;
  Status release_all() override;
  void leases_changed() override { (void)coordination_->note_leases_changed(); }
  void stop() override;
  Status leave() override { return agent_.leave(); }
  AssignmentReport report() const override;
  void set_status_url(std::string url) override {
    agent_.membership().set_status_url(std::move(url));
  }
  bool runs_periodic_shard_sync() const override { return agent_.leading(); }
  void set_on_leading(std::function<void()> fn) override { agent_.set_on_leading(std::move(fn)); }
  std::string directory_note() const override {
    return "the workers' entries in the coordination table";
  }
  // One eventually consistent read of the coordination table.
  std::optional<Result<std::vector<std::pair<std::string, std::string>>>> status_urls() override;

  AssignmentAgent& agent() { return agent_; }

 private:
  const std::shared_ptr<coordination::CoordinationStore> coordination_;
  std::shared_ptr<MembershipHold> hold_;
  leases::HeldLeases held_;
  AssignmentAgent agent_;
  Coordinator coordinator_;
};

}  // namespace kcl::assignment
