// Liveness of leader-based assignment under faults, deterministically: a fleet of workers on
// a ManualClock, each reaching the shared in-memory lease and coordination stores through
// its own fault-injecting view (faulty_stores.h: calls failing before or after they were
// applied, answers lost, stalls), killed one after another (the leader among them) and
// restarted under new ids, as the fault suite's soak does. Checked all along:
//  - no silent owner: a lease the table gives to a running worker (no handoff pending) is
//    held by that worker within the bound;
//  - takeover: every killed worker's leases are held by running workers again within the
//    bound;
//  - safety: no lease is held by two running workers at once (but for an old owner that is
//    completing a handoff: its consumer has stopped).
// The seeded runs take seeds 1-12; KCL_TEST_SEEDS=N runs seeds 1..N and prints each run's
// longest silent owner and takeover, to compare their distribution before and after a change
// (docs/benchmarks.md, "Liveness under injected faults").
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "assignment/assignment_agent.h"
#include "coordination/in_memory_coordination_store.h"
#include "support/lease_test_util.h"
#include "unit/assignment/faulty_stores.h"
#include "unit/assignment/leader_test_util.h"

namespace kcl::leases {
namespace {

using namespace ::kcl::assignment;
using namespace ::kcl::coordination;

using namespace std::chrono_literals;
using std::chrono::duration_cast;
using std::chrono::milliseconds;
using testing::FaultScript;
using testing::InjectedFault;

class FleetListener final : public LeaseListener {
 public:
  void on_lease_gained(const Lease& l) override {
    if (trace) trace->log(LogLevel::kInfo, "gained", l.lease_key);
  }
  void on_lease_lost(const std::string& key, const Status& why) override {
    if (trace) trace->log(LogLevel::kInfo, "lost", key + ": " + why.to_string());
  }
  Logger* trace = nullptr;
  void on_handoff_requested(const std::string& key, const std::string&) override {
    handoffs.push_back(key);
  }
  std::vector<std::string> handoffs;
};

// One worker of the fleet; its steps run when they ask to, each delayed by what its calls
// stalled.
struct FleetWorker {
  FleetWorker(const std::string& worker_id, LeaseStore& leases, CoordinationStore& coordination)
      : id(worker_id), lease_view(leases), coordination_view(coordination) {}
  std::string id;
  testing::FaultyLeaseStore lease_view;
  testing::FaultyCoordinationStore coordination_view;
  std::unique_ptr<LeaderAssignment> assignment;
  HeldLeases* coordinator = nullptr;  // the assignment's held leases
  AssignmentAgent* agent = nullptr;   // its steps, run by the test
  FleetListener listener;
  bool running = true;
  Clock::MonoTime next_heartbeat, next_poll, next_lead;
};

// With KCL_TEST_TRACE set, the agents' log lines and each lease's owner changes are printed
// with the fake time (to see why a run failed).
class TraceLogger final : public Logger {
 public:
  explicit TraceLogger(const Clock& clock) : clock_(clock) {}
  bool enabled(LogLevel) const override { return true; }
  void log(LogLevel, std::string_view component, std::string_view message) override {
    std::fprintf(stderr, "%8.2f [%.*s] %.*s\n",
                 std::chrono::duration<double>(clock_.now().time_since_epoch()).count(),
                 static_cast<int>(component.size()), component.data(),
                 static_cast<int>(message.size()), message.data());
  }

 private:
  const Clock& clock_;
};

struct FleetOptions {
  int leases = 12;
  int workers = 3;
  milliseconds failover{3000};
  double coordination_fault_rate = 0;
  double lease_fault_rate = 0;
  std::uint64_t seed = 1;
};

class Fleet {
 public:
  explicit Fleet(FleetOptions o) : o_(o) {
    testing::add_free_leases(leases_, o.leases);
    if (std::getenv("KCL_TEST_TRACE")) trace_ = std::make_unique<TraceLogger>(clock_);
  }

  FleetWorker& start(const std::string& id, const std::function<void(LeaseConfig&)>& tweak = {}) {
    auto w = std::make_unique<FleetWorker>(id, leases_, coordination_);
    LeaseConfig c;
    c.application_name = "liveness";
    c.worker_id = id;
    c.assignment = LeaseAssignment::kLeader;
    c.failover_time = o_.failover;
    c.interval_jitter = 0.1;
    if (tweak) tweak(c);
    const std::uint64_t seed = o_.seed * 1000 + workers_.size();
    w->coordination_view.faults().set_script(
        testing::random_faults(seed * 7 + 1, o_.coordination_fault_rate));
    w->lease_view.faults().set_script(testing::random_faults(seed * 7 + 2, o_.lease_fault_rate));
    w->assignment = testing::make_leader_assignment(c, w->lease_view, w->coordination_view, clock_,
                                                    metrics_, trace_.get(), seed * 7 + 4);
    w->coordinator = &w->assignment->held();
    w->agent = &w->assignment->agent();
    w->coordinator->set_listener(&w->listener);
    w->listener.trace = trace_.get();
    w->next_heartbeat = w->next_poll = w->next_lead = clock_.now();
    workers_.push_back(std::move(w));
    return *workers_.back();
  }

  FleetWorker* leader() {
    for (auto& w : workers_) {
      if (w->running && w->agent->leading()) return w.get();
    }
    return nullptr;
  }
  std::vector<FleetWorker*> running() {
    std::vector<FleetWorker*> out;
    for (auto& w : workers_) {
      if (w->running) out.push_back(w.get());
    }
    return out;
  }

  // Runs every running worker's due steps, 10 ms of fake time at a time, watching the
  // invariants, for `d`.
  void run_for(milliseconds d) {
    const auto end = clock_.now() + d;
    while (clock_.now() < end) {
      for (auto& w : workers_) {
        if (w->running) step(*w);
      }
      watch();
      clock_.advance(10ms);
    }
  }

  // Kills `w` (SIGKILL): it stops running with whatever it holds.
  void kill(FleetWorker& w) {
    if (trace_) trace_->log(LogLevel::kInfo, "test", "SIGKILL " + w.id);
    Takeover t;
    t.worker = w.id;
    t.at = clock_.now();
    for (const Lease& l : w.coordinator->held_leases()) t.pending.insert(l.lease_key);
    w.running = false;
    takeovers_.push_back(std::move(t));
  }

  milliseconds longest_silent_owner() const { return longest_silent_; }
  const std::string& longest_silent_what() const { return longest_silent_what_; }
  milliseconds longest_takeover() const {
    milliseconds worst{0};
    for (const auto& t : takeovers_) worst = std::max(worst, t.took.value_or(unfinished(t)));
    return worst;
  }
  std::string takeover_table() const {
    std::ostringstream out;
    for (const auto& t : takeovers_) {
      out << "  kill of " << t.worker << ": "
          << (t.took ? std::to_string(t.took->count()) + " ms"
                     : "not done after " + std::to_string(unfinished(t).count()) + " ms")
          << "\n";
    }
    return out.str();
  }
  int double_holds() const { return double_holds_; }
  ManualClock& clock() { return clock_; }
  InMemoryLeaseStore& leases() { return leases_; }
  FleetWorker& worker(const std::string& id) {
    for (auto& w : workers_) {
      if (w->id == id) return *w;
    }
    throw std::runtime_error("no worker " + id);
  }
  // Runs until `done` or `limit`; returns the time it took, or nothing.
  std::optional<milliseconds> run_until(const std::function<bool()>& done, milliseconds limit) {
    const auto start = clock_.now();
    while (clock_.now() - start < limit) {
      if (done()) return duration_cast<milliseconds>(clock_.now() - start);
      run_for(10ms);
    }
    return std::nullopt;
  }

 private:
  struct Takeover {
    std::string worker;
    Clock::MonoTime at;
    std::set<std::string> pending;  // killed worker's leases not yet held by a running one
    std::optional<milliseconds> took;
  };
  milliseconds unfinished(const Takeover& t) const {
    return duration_cast<milliseconds>(clock_.now() - t.at);
  }

  void step(FleetWorker& w) {
    const auto now = clock_.now();
    auto stalled = [&] {
      return w.coordination_view.faults().take_stalled() + w.lease_view.faults().take_stalled();
    };
    if (w.next_heartbeat <= now) w.next_heartbeat = w.agent->heartbeat_step() + stalled();
    if (w.next_poll <= now) {
      w.next_poll = w.agent->poll_step() + stalled();
      // As a worker whose processor checkpoints at once when asked to hand a lease off, and
      // which tries again later when completing the handoff fails for a transient reason.
      auto keys = std::move(w.listener.handoffs);
      w.listener.handoffs.clear();
      for (const auto& k : keys) {
        Status s = w.coordinator->complete_handoff(k);
        if (trace_)
          trace_->log(LogLevel::kInfo, w.id, "complete_handoff " + k + ": " + s.to_string());
        if (!s.ok() && s.code() != StatusCode::kLeaseLost) w.listener.handoffs.push_back(k);
      }
    }
    if (w.next_lead <= now) w.next_lead = w.agent->leader_step() + stalled();
  }

  void watch() {
    const auto now = clock_.now();
    std::map<std::string, FleetWorker*> by_id;
    std::map<std::string, int> holders;
    for (auto& w : workers_) {
      if (!w->running) continue;
      by_id[w->id] = w.get();
      // A lease this worker is handing off is not read any more once the handoff is being
      // completed (its consumer stopped first), even if the answer of that write was lost.
      const auto handing_off = w->coordinator->pending_handoffs();
      for (const Lease& l : w->coordinator->held_leases()) {
        if (!handing_off.count(l.lease_key)) ++holders[l.lease_key];
      }
    }
    for (const auto& [key, n] : holders) {
      if (n <= 1) continue;
      ++double_holds_;
      if (trace_ && !double_traced_.count(key)) {
        std::string who;
        for (auto& w : workers_) {
          if (w->running && w->coordinator->holds(key)) who += " " + w->id;
        }
        trace_->log(LogLevel::kInfo, "test", key + " held by" + who);
      }
    }
    if (trace_) {
      double_traced_.clear();
      for (const auto& [key, n] : holders) {
        if (n > 1) double_traced_.insert(key);
      }
    }
    // Silent owners.
    for (const Lease& l : leases_.snapshot()) {
      if (trace_) {
        const std::string state =
            l.lease_owner.value_or("-") + "/" + l.checkpoint_owner.value_or("-");
        std::string& last = traced_[l.lease_key];
        if (last != state) {
          trace_->log(LogLevel::kInfo, "table", l.lease_key + " owner/checkpointOwner " + state);
          last = state;
        }
      }
      bool silent = false;
      if (l.lease_owner && !l.checkpoint_owner) {
        auto it = by_id.find(*l.lease_owner);
        silent = it != by_id.end() && !it->second->coordinator->holds(l.lease_key);
      }
      if (!silent) {
        silent_since_.erase(l.lease_key);
        continue;
      }
      auto [s, inserted] = silent_since_.try_emplace(l.lease_key, now);
      const auto d = duration_cast<milliseconds>(now - s->second);
      if (d > longest_silent_) {
        longest_silent_ = d;
        longest_silent_what_ = l.lease_key + " owned by " + *l.lease_owner;
      }
    }
    // Takeovers.
    for (auto& t : takeovers_) {
      if (t.took) continue;
      for (auto it = t.pending.begin(); it != t.pending.end();) {
        it = holders.count(*it) ? t.pending.erase(it) : std::next(it);
      }
      if (t.pending.empty()) t.took = duration_cast<milliseconds>(now - t.at);
    }
  }

  FleetOptions o_;
  ManualClock clock_;
  std::unique_ptr<TraceLogger> trace_;
  std::map<std::string, std::string> traced_;
  std::set<std::string> double_traced_;
  InMemoryLeaseStore leases_;
  InMemoryCoordinationStore coordination_;
  testing::RecordingMetrics metrics_;
  std::vector<std::unique_ptr<FleetWorker>> workers_;
  std::map<std::string, Clock::MonoTime> silent_since_;
  milliseconds longest_silent_{0};
  std::string longest_silent_what_;
  std::vector<Takeover> takeovers_;
  int double_holds_ = 0;
};

// Kills a worker every `every` (the leader every other time), restarting it under a new id
// `restart_after` later, `kills` times.
void kill_one_after_another(Fleet& fleet, int kills, milliseconds every, milliseconds restart_after,
                            std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  int restarts = 0;
  for (int k = 0; k < kills; ++k) {
    fleet.run_for(every - restart_after);
    std::vector<FleetWorker*> candidates = fleet.running();
    FleetWorker* victim = nullptr;
    if (k % 2 == 0) victim = fleet.leader();
    if (!victim && !candidates.empty()) {
      victim =
          candidates[std::uniform_int_distribution<std::size_t>(0, candidates.size() - 1)(rng)];
    }
    ASSERT_NE(victim, nullptr);
    const std::string id = victim->id;
    fleet.kill(*victim);
    fleet.run_for(restart_after);
    fleet.start(id.substr(0, id.find('-')) + "-r" + std::to_string(++restarts));
  }
  fleet.run_for(every);
}

class LeaderLivenessTest : public ::testing::TestWithParam<std::uint64_t> {
 protected:
  // Three workers, killed one after another (the leader every other time) with the given
  // fault rates; every lease is read within `bound` of being owned by a live worker, every
  // killed worker's leases within `bound` of the kill, and no lease is held twice.
  static void run_fleet(double coordination_faults, milliseconds extra_failover) {
    FleetOptions o;
    o.seed = GetParam();
    o.coordination_fault_rate = coordination_faults;
    o.lease_fault_rate = 0.05;
    Fleet fleet(o);
    for (int i = 1; i <= o.workers; ++i) fleet.start("w" + std::to_string(i));
    fleet.run_for(15s);
    kill_one_after_another(fleet, 8, 30s, 6s, o.seed);
    const milliseconds bound = o.failover + extra_failover + 7s;
    if (std::getenv("KCL_TEST_SEEDS")) {
      std::fprintf(stderr,
                   "seed %llu: longest silent owner %lld ms (%s), longest takeover %lld ms\n",
                   static_cast<unsigned long long>(o.seed),
                   static_cast<long long>(fleet.longest_silent_owner().count()),
                   fleet.longest_silent_what().c_str(),
                   static_cast<long long>(fleet.longest_takeover().count()));
      if (std::getenv("KCL_TEST_TRACE")) std::fprintf(stderr, "%s", fleet.takeover_table().c_str());
    }
    EXPECT_LE(fleet.longest_silent_owner(), bound)
        << "a running worker owned " << fleet.longest_silent_what() << " in the table for "
        << fleet.longest_silent_owner().count() << " ms without reading it";
    EXPECT_LE(fleet.longest_takeover(), bound) << fleet.takeover_table();
    EXPECT_EQ(fleet.double_holds(), 0);
  }
};

// The fault suite's soak in miniature: 5% of every call fails; bound failover + 7 s.
TEST_P(LeaderLivenessTest, UnderTheSoaksFaultsEveryOwnerReadsAndEveryTakeoverIsQuick) {
  run_fleet(0.05, 0ms);
}

// Harder: a quarter of the coordination table's calls fail; bound 2 x failover + 7 s (a dead
// leader's lock lapses, then the dead worker's silence is seen).
TEST_P(LeaderLivenessTest, WithAQuarterOfCoordinationCallsFailingKilledWorkersShardsMoveInTime) {
  run_fleet(0.25, FleetOptions{}.failover);
}

std::uint64_t seeds_to_run() {
  const char* n = std::getenv("KCL_TEST_SEEDS");
  const std::uint64_t seeds = n ? std::strtoull(n, nullptr, 10) : 0;
  return seeds > 0 ? seeds : 12;
}

INSTANTIATE_TEST_SUITE_P(Seeds, LeaderLivenessTest,
                         ::testing::Range<std::uint64_t>(1, seeds_to_run() + 1));

// Adds a free lease for shard `n` and has `w` note that leases changed (as a shard sync
// that created one would), so the leader reads the table at its next pass.
Lease add_lease(Fleet& fleet, FleetWorker& w, int n) {
  Lease l;
  l.lease_key = testing::shard(n);
  fleet.leases().put(l);
  EXPECT_TRUE(w.coordination_view.note_leases_changed().ok());
  return l;
}

// A fleet of `leases` leases and no workers yet, without random faults: a scripted test
// starts its workers and injects its own faults.
FleetOptions scripted_fleet(int leases) {
  FleetOptions o;
  o.leases = leases;
  o.workers = 0;
  return o;
}

// The soak's 89 s: a worker that holds one lease too many (a handoff it never heard of) and
// one too few (an assignment it never heard of) reports the right number of leases, so a
// repair that compares counts never sees it. Here b's reads of the lock fail from the moment
// c joins (b hears no call for attention): c joins (one of b's leases is handed to c) and a new
// lease is assigned to b. b must read the new lease, and let the old one go, within the
// bound all the same: it finds its leases in the table on its own period.
TEST(LeaderLivenessScriptedTest, AWorkerShortOfOneLeaseAndOverByAnotherIsRepaired) {
  const FleetOptions o = scripted_fleet(4);
  Fleet fleet(o);
  bool deaf_b = false;
  fleet.start("a");
  fleet.start("b").coordination_view.faults().set_script(
      [&](std::string_view op, std::string_view) {
        InjectedFault f;
        if (deaf_b && op == "read_leader") f.when = InjectedFault::When::kBefore;
        return f;
      });
  ASSERT_TRUE(fleet.run_until(
      [&] {
        return fleet.worker("a").coordinator->held_count() == 2 &&
               fleet.worker("b").coordinator->held_count() == 2;
      },
      20s));
  ASSERT_TRUE(fleet.worker("a").agent->leading());

  deaf_b = true;
  const auto dropped_at = fleet.clock().now();
  fleet.start("c");
  fleet.run_for(5s);  // c gets its share: one lease handed from a, one from b
  const Lease extra = add_lease(fleet, fleet.worker("a"), 4);
  ASSERT_TRUE(fleet.run_until(
      [&] { return fleet.leases().peek(extra.lease_key)->lease_owner.has_value(); }, 10s));
  const std::string owner = *fleet.leases().peek(extra.lease_key)->lease_owner;
  const milliseconds bound = o.failover + 7s;
  auto all_read = [&] {
    for (const Lease& l : fleet.leases().snapshot()) {
      if (!l.lease_owner || l.checkpoint_owner) return false;
      if (!fleet.worker(*l.lease_owner).coordinator->holds(l.lease_key)) return false;
    }
    return true;
  };
  auto took = fleet.run_until(all_read, 60s);
  ASSERT_TRUE(took) << "some lease owned by a running worker was still not read 60 s after "
                       "the extra lease went to "
                    << owner;
  EXPECT_LE(*took, bound) << "b, still deaf to the lock since "
                          << duration_cast<milliseconds>(fleet.clock().now() - dropped_at).count()
                          << " ms";
  EXPECT_EQ(fleet.double_holds(), 0);
}

// Starts worker a alone and runs until it holds the fleet's `leases`.
void start_a_alone(Fleet& fleet, int leases) {
  fleet.start("a");
  ASSERT_TRUE(fleet.run_until(
      [&] {
        return fleet.worker("a").coordinator->held_count() == static_cast<std::size_t>(leases);
      },
      20s));
}

// Starts workers a and b and runs until they hold the fleet's `leases` between them.
void start_a_and_b(Fleet& fleet, int leases) {
  fleet.start("a");
  fleet.start("b");
  ASSERT_TRUE(fleet.run_until(
      [&] {
        return fleet.worker("a").coordinator->held_count() +
                   fleet.worker("b").coordinator->held_count() ==
               static_cast<std::size_t>(leases);
      },
      20s));
}

// start_a_and_b(), then checks that a, which started first, leads.
void start_a_and_b_led_by_a(Fleet& fleet, int leases) {
  ASSERT_NO_FATAL_FAILURE(start_a_and_b(fleet, leases));
  ASSERT_TRUE(fleet.worker("a").agent->leading());
}

// Seed 752 of the quarter-faults fleet: the leader's take of a lease for b landed but its
// answer was lost; b, whose reads failed, had not taken it yet when a joining worker made the
// leader rebalance, and the leader handed it off from b. b never read the
// lease, so it never finished the handoff (nothing tells a worker of a lease whose
// checkpointOwner it is but whose leaseOwner it no longer is), and the receiver waited the
// whole handoff_timeout. A lease assigned by the leader is handed off only once its owner has
// taken it, whether or not the answer of the assigning take arrived, and whether or not the
// leader's read after the take could tell that it landed.
void lease_taken_unseen_then_c_joins(bool reread_fails) {
  const FleetOptions o = scripted_fleet(3);
  Fleet fleet(o);
  ASSERT_NO_FATAL_FAILURE(start_a_alone(fleet, o.leases));
  // While deaf, b neither reads the lock nor finds its leases in the table.
  bool deaf_b = false;
  auto deafness = [&](std::string_view op, std::string_view) {
    InjectedFault f;
    if (deaf_b && (op == "read_leader" || op == "owned_lease_keys")) {
      f.when = InjectedFault::When::kBefore;
    }
    return f;
  };
  FleetWorker& b = fleet.start("b");
  b.coordination_view.faults().set_script(deafness);
  b.lease_view.faults().set_script(deafness);
  ASSERT_TRUE(fleet.run_until(
      [&] {
        return fleet.worker("a").coordinator->held_count() == 2 && b.coordinator->held_count() == 1;
      },
      20s));
  FleetWorker& a = fleet.worker("a");
  ASSERT_TRUE(a.agent->leading());
  fleet.run_for(o.failover);  // b idle again: it reads only the lock

  // The leader's take of a fourth lease for b (the one with fewer) lands; its answer is lost.
  // Its key sorts first, so it is the one b hands off when c joins.
  const std::string extra_key = "shardId-00000000000-extra";
  bool lost = false;
  bool reread_failed = false;
  a.lease_view.faults().set_script([&](std::string_view op, std::string_view subject) {
    InjectedFault f;
    if (!lost && op == "take_lease" && subject == extra_key) {
      lost = true;
      f.when = InjectedFault::When::kAfter;
    } else if (reread_fails && lost && !reread_failed && op == "get_lease" &&
               subject == extra_key) {
      reread_failed = true;
      f.when = InjectedFault::When::kBefore;
      // and the leader's next pass reads the whole table (which shows the take landed) rather
      // than trying the take again
      EXPECT_TRUE(a.coordination_view.note_leases_changed().ok());
    }
    return f;
  });
  deaf_b = true;
  Lease extra;
  extra.lease_key = extra_key;
  fleet.leases().put(extra);
  ASSERT_TRUE(a.coordination_view.note_leases_changed().ok());
  ASSERT_TRUE(fleet.run_until([&] { return lost; }, 10s));
  ASSERT_EQ(fleet.leases().peek(extra_key)->lease_owner, "b");
  fleet.start("c");
  fleet.run_for(o.failover);  // the fleet settles and the leader rebalances, b still deaf
  deaf_b = false;

  auto all_read = [&] {
    for (const Lease& l : fleet.leases().snapshot()) {
      if (!l.lease_owner || l.checkpoint_owner) return false;
      if (!fleet.worker(*l.lease_owner).coordinator->holds(l.lease_key)) return false;
    }
    return fleet.worker("c").coordinator->held_count() > 0;
  };
  auto took = fleet.run_until(all_read, 60s);
  ASSERT_TRUE(took) << "the fleet never settled with every lease read";
  EXPECT_LE(*took, o.failover + 7s) << "a lease waited " << took->count()
                                    << " ms (a handoff b never heard of waits handoff_timeout)";
  EXPECT_EQ(fleet.double_holds(), 0);
}

TEST(LeaderLivenessScriptedTest, ALeaseWhoseAssigningTakeWasLostIsNotHandedOffUnread) {
  for (const bool reread_fails : {false, true}) {
    SCOPED_TRACE(reread_fails ? "the leader's read after the take failing too"
                              : "the take's answer lost");
    ASSERT_NO_FATAL_FAILURE(lease_taken_unseen_then_c_joins(reread_fails));
  }
}

// The fault suite's R7: after an outage the new leader assigns a lease to a worker whose
// membership ends at that moment; the worker then registers again. Registering makes it look
// at the table at once: the lease is read within about a second, not at its next periodic
// look (several seconds, and never if the leader died first and nobody called for attention).
TEST(LeaderLivenessScriptedTest, ALeaseAssignedJustBeforeTheWorkerRegistersAgainIsReadAtOnce) {
  const FleetOptions o = scripted_fleet(3);
  Fleet fleet(o);
  ASSERT_NO_FATAL_FAILURE(start_a_and_b(fleet, o.leases));
  FleetWorker* leader = fleet.leader();
  ASSERT_NE(leader, nullptr);
  FleetWorker& target = fleet.worker(leader->id == "a" ? "b" : "a");
  ASSERT_EQ(target.coordinator->held_count(), 1);

  // The leader's take of the new lease for the target; the target's membership ends at that
  // moment (as its hold lapsing in an outage would), so its next heartbeat registers a new
  // incarnation.
  const std::string extra_key = testing::shard(3);
  std::optional<Clock::MonoTime> assigned;
  leader->lease_view.faults().set_script([&](std::string_view op, std::string_view subject) {
    if (!assigned && op == "take_lease" && subject == extra_key) {
      assigned = fleet.clock().now();
      target.agent->membership().abandon(
          Status(StatusCode::kLeaseLost, "the test ends the membership"));
    }
    return InjectedFault{};
  });
  (void)add_lease(fleet, *leader, 3);
  ASSERT_TRUE(fleet.run_until([&] { return assigned.has_value(); }, 10s));
  ASSERT_EQ(fleet.leases().peek(extra_key)->lease_owner, target.id);

  auto took = fleet.run_until([&] { return target.coordinator->holds(extra_key); }, 30s);
  ASSERT_TRUE(took) << target.id << " never read the lease assigned as its membership ended";
  EXPECT_LE(*took, 1500ms) << target.id << " read the lease assigned as its membership ended "
                           << took->count() << " ms later";
  EXPECT_EQ(fleet.double_holds(), 0);
}

// A handoff the leader started whose answer was lost (the write landed; the call failed, or
// the client's retry found the condition failed): the leader reads the lease again at once,
// sees the handoff it started and calls the workers' attention; when that read fails too, it
// calls it anyway (that only makes workers look at the table). So the lease is read by its
// new owner about a second after the handoff landed, not at its next periodic look.
TEST(LeaderLivenessScriptedTest, AHandoffThatLandedUnseenIsToldAtOnce) {
  for (const auto when :
       {InjectedFault::When::kAfter, InjectedFault::When::kAppliedThenConditionFailed}) {
    for (const bool reread_fails : {false, true}) {
      SCOPED_TRACE("fault kind " + std::to_string(static_cast<int>(when)) +
                   (reread_fails ? ", the read after it failing" : ""));
      const FleetOptions o = scripted_fleet(4);
      Fleet fleet(o);
      ASSERT_NO_FATAL_FAILURE(start_a_and_b(fleet, o.leases));
      FleetWorker* leader = fleet.leader();
      ASSERT_NE(leader, nullptr);
      std::optional<Clock::MonoTime> landed;
      std::string handed;
      bool reread_failed = false;
      leader->lease_view.faults().set_script([&](std::string_view op, std::string_view subject) {
        InjectedFault f;
        if (!landed && op == "initiate_handoff") {
          landed = fleet.clock().now();
          handed = std::string(subject);
          f.when = when;
        } else if (reread_fails && landed && !reread_failed && op == "get_lease" &&
                   subject == handed) {
          reread_failed = true;
          f.when = InjectedFault::When::kBefore;
        }
        return f;
      });
      FleetWorker& c = fleet.start("c");
      ASSERT_TRUE(fleet.run_until([&] { return landed.has_value(); }, 20s));
      ASSERT_EQ(fleet.leases().peek(handed)->lease_owner, "c");
      auto took = fleet.run_until([&] { return c.coordinator->holds(handed); }, 30s);
      ASSERT_TRUE(took) << "c never read " << handed;
      EXPECT_EQ(reread_failed, reread_fails);
      EXPECT_LE(*took, 1500ms) << "c read " << handed << " only " << took->count()
                               << " ms after its handoff landed unseen";
      EXPECT_EQ(fleet.double_holds(), 0);
    }
  }
}

// A call for attention lost with the leader: the leader assigns a new lease, its call for
// the workers' attention fails, and it is killed before its next pass. Whoever leads next,
// the lease's owner finds it in the table (LeaseAdopter::discover) within five of its idle
// reads (1.5 s each here, jittered; sooner when the next leader's first pass calls every
// worker's attention).
TEST(LeaderLivenessScriptedTest, ACallForAttentionLostWithTheLeaderDoesNotLeaveTheLeaseUnread) {
  const FleetOptions o = scripted_fleet(4);
  Fleet fleet(o);
  ASSERT_NO_FATAL_FAILURE(start_a_alone(fleet, o.leases));
  ASSERT_TRUE(fleet.worker("a").agent->leading());
  fleet.start("b");
  fleet.start("c");
  ASSERT_TRUE(fleet.run_until(
      [&] {
        return fleet.worker("a").coordinator->held_count() == 2 &&
               fleet.worker("b").coordinator->held_count() == 1 &&
               fleet.worker("c").coordinator->held_count() == 1;
      },
      30s));
  fleet.run_for(o.failover);  // b and c idle again: they read only the lock

  // The new lease goes to b or c (a holds the extra one already); the call for attention
  // that follows fails, and a is killed at that moment.
  FleetWorker& a = fleet.worker("a");
  const std::string extra_key = testing::shard(4);
  bool assigned = false;
  bool call_failed = false;
  a.lease_view.faults().set_script([&](std::string_view op, std::string_view subject) {
    if (op == "take_lease" && subject == extra_key) assigned = true;
    return InjectedFault{};
  });
  a.coordination_view.faults().set_script([&](std::string_view op, std::string_view) {
    InjectedFault f;
    if (assigned && op == "call_attention") {
      call_failed = true;
      f.when = InjectedFault::When::kBefore;
    }
    return f;
  });
  (void)add_lease(fleet, a, 4);
  ASSERT_TRUE(fleet.run_until([&] { return call_failed; }, 10s));
  fleet.kill(a);
  const auto owner_id = fleet.leases().peek(extra_key)->lease_owner;
  ASSERT_TRUE(owner_id == "b" || owner_id == "c");
  FleetWorker& owner = fleet.worker(*owner_id);
  auto took = fleet.run_until([&] { return owner.coordinator->holds(extra_key); }, 30s);
  ASSERT_TRUE(took) << *owner_id << " never read the lease whose call for attention was lost";
  EXPECT_LE(*took, 8300ms) << *owner_id << " read the lease " << took->count()
                           << " ms after the leader was killed";
  EXPECT_EQ(fleet.double_holds(), 0);
}

// A worker joins while the leader's reads of the lease table fail, so the passes that see the
// join end early. The join still counts for settling: nothing is handed to the newcomer
// before settle_time after the leader first saw it (a burst of joins is balanced once, not
// at every join).
TEST(LeaderLivenessScriptedTest, AJoinSeenByAPassThatEndedEarlyStillWaitsForTheFleetToSettle) {
  const FleetOptions o = scripted_fleet(12);
  Fleet fleet(o);
  bool scans_fail = false;
  auto scan_faults = [&](std::string_view op, std::string_view) {
    InjectedFault f;
    if (scans_fail && op == "list_leases") f.when = InjectedFault::When::kBefore;
    return f;
  };
  auto slow_settle = [](LeaseConfig& c) { c.settle_time = 2s; };
  for (const char* id : {"a", "b"})
    fleet.start(id, slow_settle).lease_view.faults().set_script(scan_faults);
  ASSERT_TRUE(fleet.run_until(
      [&] {
        return fleet.worker("a").coordinator->held_count() == 6 &&
               fleet.worker("b").coordinator->held_count() == 6;
      },
      30s));

  // Every pass now wants a scan (the lease set changed) and fails at it.
  scans_fail = true;
  ASSERT_TRUE(fleet.worker("a").coordination_view.note_leases_changed().ok());
  fleet.start("c", slow_settle);
  const auto c_started = fleet.clock().now();
  fleet.run_for(1500ms);  // the leader sees c in this time, at a pass that fails
  scans_fail = false;

  auto moving_to_c = [&] {
    for (const Lease& l : fleet.leases().snapshot()) {
      if (l.lease_owner == "c" || l.checkpoint_owner == "c") return true;
    }
    return false;
  };
  ASSERT_TRUE(fleet.run_until(moving_to_c, 20s)) << "c never got a lease";
  EXPECT_GE(fleet.clock().now() - c_started, 2s)
      << "a lease was handed to c before the fleet settled after its join";
  ASSERT_TRUE(
      fleet.run_until([&] { return fleet.worker("c").coordinator->held_count() == 4; }, 20s));
  EXPECT_EQ(fleet.double_holds(), 0);
}

// A dead worker's leases move in one pass even when the write for one of them fails: that
// lease waits for the next pass, the others do not wait with it. (Under a quarter of the
// store's calls failing, a pass that stopped at its first failed write left a killed leader's
// leases unassigned for 2.7 s more than a pass that goes on: seed 93 of the test above.) Two
// failed writes in a row stop the pass: a failing store is not written to lease after lease.
TEST(LeaderLivenessScriptedTest, AWriteThatFailsForOneLeaseDoesNotHoldUpTheOthers) {
  for (const int failing : {1, 2}) {
    SCOPED_TRACE(std::to_string(failing) + " failed takes in a row");
    const FleetOptions o = scripted_fleet(6);
    Fleet fleet(o);
    ASSERT_NO_FATAL_FAILURE(start_a_and_b_led_by_a(fleet, o.leases));
    FleetWorker& a = fleet.worker("a");
    ASSERT_TRUE(fleet.run_until(
        [&] {
          return a.coordinator->held_count() == 3 &&
                 fleet.worker("b").coordinator->held_count() == 3;
        },
        20s));
    int takes = 0;
    std::optional<Clock::MonoTime> first_take;
    a.lease_view.faults().set_script([&](std::string_view op, std::string_view) {
      InjectedFault f;
      if (op != "take_lease") return f;
      if (++takes == 1) first_take = fleet.clock().now();
      if (takes <= failing) f.when = InjectedFault::When::kBefore;
      return f;
    });
    fleet.kill(fleet.worker("b"));
    ASSERT_TRUE(fleet.run_until([&] { return first_take.has_value(); }, 20s));
    auto owned_by_a = [&](std::size_t n) {
      return [&fleet, n] {
        std::size_t owned = 0;
        for (const Lease& l : fleet.leases().snapshot()) owned += l.lease_owner == "a" ? 1 : 0;
        return owned >= n;
      };
    };
    const auto same_pass = fleet.run_until(owned_by_a(6 - failing), 10s);
    ASSERT_TRUE(same_pass) << "a never took b's other leases";
    if (failing == 1) {
      EXPECT_LT(*same_pass, 100ms) << "b's other leases waited " << same_pass->count()
                                   << " ms for the next pass after one failed take";
    } else {
      EXPECT_GE(*same_pass, 100ms) << "the pass went on writing after two failed takes in a row";
    }
    ASSERT_TRUE(fleet.run_until(owned_by_a(6), 10s)) << "the failed lease was never taken";
    // Each of b's leases assigned once by the leader's pass (besides the failed takes), then
    // adopted once by a as any worker adopts what the table gives it.
    EXPECT_EQ(takes, failing + 3 + 3) << "each of b's leases assigned once and adopted once";
    EXPECT_EQ(fleet.double_holds(), 0);
  }
}

// A call for attention that failed is not needed by a worker that just joined: it finds what
// the table gives it, even while the leader's passes all fail (their read of the workers
// fails). Seed 65 at a quarter of the calls failing, before the table was the truth: the
// hint of four handoffs to a joining worker failed, the leader's next passes failed until it
// lost the lock, and the worker read those leases 9 s later.
TEST(LeaderLivenessScriptedTest, ALostCallForAttentionDoesNotMatterWhileTheLeadersPassesFail) {
  const FleetOptions o = scripted_fleet(4);
  Fleet fleet(o);
  ASSERT_NO_FATAL_FAILURE(start_a_and_b_led_by_a(fleet, o.leases));
  FleetWorker& a = fleet.worker("a");
  bool passes_fail = false;
  std::optional<Clock::MonoTime> handed;
  a.lease_view.faults().set_script([&](std::string_view op, std::string_view) {
    if (op == "initiate_handoff" && !handed) {
      handed = fleet.clock().now();
      passes_fail = true;  // from now on every pass fails at its first step
    }
    return InjectedFault{};
  });
  a.coordination_view.faults().set_script([&](std::string_view op, std::string_view) {
    InjectedFault f;
    if (passes_fail && (op == "read_all" || op == "call_attention")) {
      f.when = InjectedFault::When::kBefore;
    }
    return f;
  });
  FleetWorker& c = fleet.start("c");
  ASSERT_TRUE(fleet.run_until([&] { return handed.has_value(); }, 20s))
      << "the leader never handed a lease to c";
  auto took = fleet.run_until([&] { return c.coordinator->held_count() == 1; }, 10s);
  ASSERT_TRUE(took) << "c did not read the lease handed to it while the leader's passes failed";
  EXPECT_LT(*took, 1500ms);
  EXPECT_EQ(fleet.double_holds(), 0);
}

// A take whose first attempt landed unseen: the client's retry finds the counter moved and
// reports the condition failed, while the table now names the worker. It reads the lease again
// and takes it on that read, at once, rather than leaving it unread until the leader notices
// the difference between what it reports and what the table gives it.
TEST(LeaderLivenessScriptedTest, ATakeThatLandedUnseenIsTakenAgainAtOnce) {
  const FleetOptions o = scripted_fleet(4);
  Fleet fleet(o);
  ASSERT_NO_FATAL_FAILURE(start_a_alone(fleet, o.leases));
  int landed_unseen = 0;
  std::optional<Clock::MonoTime> first_take;
  FleetWorker& b = fleet.start("b");
  b.lease_view.faults().set_script([&](std::string_view op, std::string_view) {
    InjectedFault f;
    if (op == "take_lease" && landed_unseen == 0) {
      ++landed_unseen;
      first_take = fleet.clock().now();
      f.when = InjectedFault::When::kAppliedThenConditionFailed;
    }
    return f;
  });
  ASSERT_TRUE(fleet.run_until([&] { return first_take.has_value(); }, 20s));
  auto owned_and_read = [&] {
    for (const Lease& l : fleet.leases().snapshot()) {
      if (l.lease_owner != "b" || l.checkpoint_owner) continue;
      if (!b.coordinator->holds(l.lease_key)) return false;
    }
    return true;
  };
  auto took = fleet.run_until(owned_and_read, 30s);
  ASSERT_TRUE(took) << "b did not read a lease the table gave it within 30 s";
  EXPECT_LE(*took, 200ms) << "a lease b took unseen stayed unread for " << took->count() << " ms";
  EXPECT_EQ(fleet.double_holds(), 0);
}

// A leader whose own renewals fail stops assigning before its hold lapses, and so before any
// other worker may take the lock and fence it: no lease write of it lands in the last part of
// its hold. A third worker joins at different moments after the renewals began to fail, so
// that the leader wants to hand leases to it at different points of its lapsing hold.
TEST(LeaderLivenessScriptedTest, ALeaderWhoseRenewalsFailStopsAssigningBeforeItsHoldLapses) {
  for (const milliseconds join_after : {0ms, 300ms, 600ms, 900ms, 1200ms, 1500ms}) {
    SCOPED_TRACE("c joins " + std::to_string(join_after.count()) + " ms after the cut");
    const FleetOptions o = scripted_fleet(6);
    Fleet fleet(o);
    bool cut = false;
    Clock::MonoTime last_heartbeat{}, last_lock_renewal{};
    std::optional<Clock::MonoTime> last_write;
    fleet.start("a");
    fleet.start("b");
    ASSERT_TRUE(fleet.run_until([&] { return fleet.leader() != nullptr; }, 10s));
    FleetWorker& leader = *fleet.leader();
    leader.coordination_view.faults().set_script([&](std::string_view op, std::string_view) {
      InjectedFault f;
      // A call for attention renews the lock too.
      if (op != "heartbeat" && op != "renew_leadership" && op != "call_attention") return f;
      if (cut) {
        f.when = InjectedFault::When::kBefore;
      } else {
        (op == "heartbeat" ? last_heartbeat : last_lock_renewal) = fleet.clock().now();
      }
      return f;
    });
    // The leader's assigning writes (a take for another worker, a handoff); not the takes
    // of a new incarnation of its own adopting what it had to give up.
    leader.lease_view.faults().set_script([&](std::string_view op, std::string_view) {
      if ((op == "take_lease" || op == "initiate_handoff") && leader.agent->leading()) {
        last_write = fleet.clock().now();
      }
      return InjectedFault{};
    });
    ASSERT_TRUE(fleet.run_until(
        [&] {
          std::size_t held = 0;
          for (FleetWorker* w : fleet.running()) held += w->coordinator->held_count();
          return held == 6;
        },
        20s));
    cut = true;
    fleet.run_for(join_after);
    fleet.start("c");
    ASSERT_TRUE(fleet.run_until([&] { return !leader.agent->leading(); }, 20s));
    // Its hold lapses at basis + failover - margin; it must have stopped writing half the
    // slack between its renew interval and the failover time before that.
    const auto basis = std::min(last_heartbeat, last_lock_renewal);
    const auto stop_by = basis + o.failover - o.failover / 10 - (o.failover - o.failover / 2) / 2;
    ASSERT_TRUE(last_write);
    EXPECT_LT(*last_write, stop_by)
        << "the leader wrote a lease " << duration_cast<milliseconds>(*last_write - basis).count()
        << " ms after its last successful renewal";
    EXPECT_EQ(fleet.double_holds(), 0);
  }
}

}  // namespace
}  // namespace kcl::leases
