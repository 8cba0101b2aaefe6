#include "assignment/leader_assignment.h"

namespace kcl::assignment {

LeaderAssignment::LeaderAssignment(const LeaseConfig& config, const AssignmentParts& parts)
    : coordination_(parts.coordination),
      hold_(std::make_shared<MembershipHold>(config)),
      held_(*parts.store, config, *parts.clock, *parts.metrics, hold_),
      agent_(*parts.coordination, *parts.store, held_, *hold_, parts.load, config, *parts.clock,
             *parts.metrics, parts.logger, parts.seed),
      coordinator_(*parts.clock, {[this] { return agent_.heartbeat_task(); },
                                  [this] { return agent_.poll_task(); },
                                  [this] { return agent_.leader_task(); }}) {
  agent_.set_poll_waker([this] { coordinator_.wake(1); });
  agent_.set_leader_waker([this] { coordinator_.wake(2); });
}

LeaderAssignment::~LeaderAssignment() { stop(); }

void LeaderAssignment::start() {
  agent_.set_call_runner(&coordinator_);
  coordinator_.start();
}

void LeaderAssignment::drain() {
  coordinator_.run_and_wait([this] { return agent_.drain_task(); });
}

Status LeaderAssignment::release_all() {
  Status released;
  coordinator_.run_and_wait([this, &released]() -> CallTask<Done> {
    released = co_await agent_.release_task();
    co_return Done{};
  });
  return released;
}

// The agent's state is the caller's again once the coordinator stopped: leave() runs inline.
void LeaderAssignment::stop() {
  coordinator_.stop();
  agent_.set_call_runner(nullptr);
}

AssignmentReport LeaderAssignment::report() const {
  AssignmentReport r;
  r.strategy = "leader";
  r.leading = agent_.leading();
  r.failing = agent_.failing_calls();
  return r;
}

std::optional<Result<std::vector<std::pair<std::string, std::string>>>>
LeaderAssignment::status_urls() {
  auto view = coordination_->read_all(coordination::Consistency::kEventual);
  if (!view.ok()) return {view.status().with_context("reading the coordination table: ")};
  std::vector<std::pair<std::string, std::string>> out;
  for (const coordination::WorkerEntry& w : view->workers)
    out.emplace_back(w.worker_id, w.status_url);
  return {std::move(out)};
}

}  // namespace kcl::assignment
