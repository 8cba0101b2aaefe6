#include "simulation/lease_simulation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <sstream>
#include <unordered_map>

#include "assignment/leader_assignment.h"
#include "assignment/worker_takes_assignment.h"
#include "leases/load_meter.h"

namespace kcl::leases {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string shard_key(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shardId-%012d", i);
  return buf;
}

std::string worker_name(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "worker-%04d", i);
  return buf;
}

// DynamoDB on-demand prices (us-east-1): per read unit, per write unit; minutes in a month.
constexpr double kReadUnitUsd = 0.125 / 1e6;
constexpr double kWriteUnitUsd = 0.625 / 1e6;
constexpr double kMinutesPerMonth = 730.0 * 60.0;

LeaseStoreStats minus(const LeaseStoreStats& a, const LeaseStoreStats& b) {
  LeaseStoreStats d;
  d.scans = a.scans - b.scans;
  d.scan_pages = a.scan_pages - b.scan_pages;
  d.items_scanned = a.items_scanned - b.items_scanned;
  d.bytes_scanned = a.bytes_scanned - b.bytes_scanned;
  d.gets = a.gets - b.gets;
  d.writes = a.writes - b.writes;
  d.takes = a.takes - b.takes;
  d.renews = a.renews - b.renews;
  d.evicts = a.evicts - b.evicts;
  d.checkpoints = a.checkpoints - b.checkpoints;
  d.failed_conditions = a.failed_conditions - b.failed_conditions;
  d.owner_changes = a.owner_changes - b.owner_changes;
  d.injected_faults = a.injected_faults - b.injected_faults;
  d.read_units = a.read_units - b.read_units;
  d.write_units = a.write_units - b.write_units;
  return d;
}

CoordinationStoreStats minus(const CoordinationStoreStats& a, const CoordinationStoreStats& b) {
  CoordinationStoreStats d;
  d.reads = a.reads - b.reads;
  d.eventual_reads = a.eventual_reads - b.eventual_reads;
  d.items_read = a.items_read - b.items_read;
  d.read_units = a.read_units - b.read_units;
  d.write_units = a.write_units - b.write_units;
  d.writes = a.writes - b.writes;
  d.heartbeats = a.heartbeats - b.heartbeats;
  d.leader_writes = a.leader_writes - b.leader_writes;
  d.fences = a.fences - b.fences;
  d.failed_conditions = a.failed_conditions - b.failed_conditions;
  return d;
}

enum class WorkerState { kRunning, kPaused, kCrashed, kLeft };

// Counts what a worker believes it holds, from its coordinator's callbacks; with kLeader, also
// tells the simulation (which keeps owners by belief) and remembers handoffs asked for.
class BeliefCounter final : public LeaseListener {
 public:
  void on_lease_gained(const Lease& lease) override {
    ++believed;
    if (gained) gained(lease.lease_key);
  }
  void on_lease_lost(const std::string& key, const Status&) override {
    --believed;
    if (lost) lost(key);
  }
  void on_handoff_requested(const std::string& key, const std::string&) override {
    handoffs.push_back(key);
  }
  int believed = 0;
  std::function<void(const std::string&)> gained;
  std::function<void(const std::string&)> lost;
  std::vector<std::string> handoffs;
};

struct SimWorker {
  std::string id;
  std::unique_ptr<OffsetClock> clock;
  std::unique_ptr<LoadMeter> load;
  std::unique_ptr<assignment::LeaderAssignment> leader;      // kLeader
  std::unique_ptr<assignment::WorkerTakesAssignment> takes;  // kWorkerTakes
  HeldLeases* coordinator = nullptr;                         // the held leases of either
  assignment::AssignmentAgent* agent = nullptr;              // kLeader
  BeliefCounter belief;
  WorkerState state = WorkerState::kRunning;
  nanoseconds paused_until{0};
  int held = 0;  // leases the table says it owns (bookkeeping)
  std::uint64_t take_generation = 0;
  std::uint64_t poll_generation = 0;
  std::optional<nanoseconds> fed_until;  // shard traffic reported to its coordinator up to
};

enum class TickKind { kRenew, kTake, kHeartbeat, kPoll, kLead };

struct Tick {
  nanoseconds at;
  std::uint64_t seq;
  int worker;
  TickKind kind;
  std::uint64_t generation = 0;  // take and poll ticks: only the latest scheduled one runs
  bool operator>(const Tick& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

// With KCL_SIM_TRACE set, the workers' log lines are printed with the simulated time (to see
// why a run took as long as it did).
class SimTraceLogger final : public Logger {
 public:
  explicit SimTraceLogger(const Clock& clock) : clock_(clock) {}
  bool enabled(LogLevel) const override { return true; }
  void log(LogLevel, std::string_view component, std::string_view message) override {
    std::fprintf(stderr, "%9.3f [%.*s] %.*s\n",
                 std::chrono::duration<double>(clock_.now().time_since_epoch()).count(),
                 static_cast<int>(component.size()), component.data(),
                 static_cast<int>(message.size()), message.data());
  }

 private:
  const Clock& clock_;
};

class Simulation {
 public:
  explicit Simulation(const SimulationOptions& options) : options_(options), rng_(options.seed) {}

  Result<SimulationReport> run();

 private:
  nanoseconds now() const { return clock_.now() - Clock::MonoTime{}; }
  nanoseconds jittered(milliseconds interval) {
    double j = options_.lease.interval_jitter;
    std::uniform_real_distribution<double> d(1.0 - j, 1.0 + j);
    return nanoseconds(static_cast<std::int64_t>(
        static_cast<double>(duration_cast<nanoseconds>(interval).count()) * d(rng_)));
  }
  void schedule(int w, nanoseconds at, TickKind kind) {
    std::uint64_t generation = 0;
    if (kind == TickKind::kTake)
      generation = ++workers_[static_cast<std::size_t>(w)]->take_generation;
    if (kind == TickKind::kPoll)
      generation = ++workers_[static_cast<std::size_t>(w)]->poll_generation;
    ticks_.push(Tick{at, seq_++, w, kind, generation});
  }
  // Which strategy the workers run (chosen once from the options; each is driven by its own
  // steps below).
  bool leader_based() const { return config_.assignment == LeaseAssignment::kLeader; }
  void run_leader_tick(const Tick& t, SimWorker& worker);
  void on_gained(int w, const std::string& key);
  void on_lost(int w, const std::string& key);
  int add_worker(nanoseconds first_take);
  std::vector<int> pick_alive(int count, bool running_only);
  void set_owner(int shard, int owner);
  bool counts_as_running(int w) const {
    return w >= 0 && workers_[static_cast<std::size_t>(w)]->state == WorkerState::kRunning;
  }
  void recount_unserved();
  void start_phase();
  void label_phase(std::string label);
  void check_balance();
  void finish_phase();
  void apply_event(const SimulationEvent& e);
  void run_tick(const Tick& t);

  const SimulationOptions& options_;
  LeaseConfig config_;
  ManualClock clock_;
  InMemoryLeaseStore store_;
  coordination::InMemoryCoordinationStore coordination_;
  std::mt19937_64 rng_;
  std::vector<std::unique_ptr<SimWorker>> workers_;
  std::priority_queue<Tick, std::vector<Tick>, std::greater<Tick>> ticks_;
  std::uint64_t seq_ = 0;
  std::unordered_map<std::string, int> shard_index_;
  std::vector<int> owner_;  // per shard: worker index, -1 = none
  int unserved_ = 0;        // leases not owned by a running worker
  SimulationReport report_;
  bool phase_balanced_ = false;
  LeaseStoreStats stats_at_balance_;
  CoordinationStoreStats coordination_at_balance_;
  nanoseconds balance_time_{0};
  std::multimap<nanoseconds, SimulationEvent> pending_events_;
  std::multimap<nanoseconds, int> resumes_;
  std::unique_ptr<SimTraceLogger> trace_;
};

int Simulation::add_worker(nanoseconds first_take) {
  int index = static_cast<int>(workers_.size());
  auto w = std::make_unique<SimWorker>();
  w->id = worker_name(index);
  // Every worker has its own monotonic epoch (up to ~40 days apart) and its own wall clock
  // (up to 10 minutes off): the lease logic must not care.
  std::uniform_int_distribution<std::int64_t> mono(0, std::int64_t{1000} * 3600);
  std::uniform_int_distribution<std::int64_t> wall(-600, 600);
  w->clock = std::make_unique<OffsetClock>(clock_, std::chrono::seconds(mono(rng_)),
                                           std::chrono::seconds(wall(rng_)));
  LeaseConfig config = config_;
  config.worker_id = w->id;
  const std::uint64_t seed = options_.seed * 7919 + static_cast<std::uint64_t>(index);
  w->load = std::make_unique<LoadMeter>(*w->clock);
  assignment::AssignmentParts parts;
  parts.store = &store_;
  parts.coordination =
      std::shared_ptr<coordination::CoordinationStore>(std::shared_ptr<void>(),
                                                       &coordination_);  // not owned
  parts.clock = w->clock.get();
  parts.metrics = &NoopMetricsSink::instance();
  parts.load = w->load.get();
  parts.seed = seed;
  if (std::getenv("KCL_SIM_TRACE")) {
    if (!trace_) trace_ = std::make_unique<SimTraceLogger>(clock_);
    parts.logger = trace_.get();
  }
  if (leader_based()) {
    w->leader = std::make_unique<assignment::LeaderAssignment>(config, parts);
    w->coordinator = &w->leader->held();
    w->agent = &w->leader->agent();
    // A heartbeat that brings a post runs the poll now (as the step runner does).
    w->agent->set_poll_waker([this, index] { schedule(index, now(), TickKind::kPoll); });
  } else {
    w->takes = std::make_unique<assignment::WorkerTakesAssignment>(config, parts);
    w->coordinator = &w->takes->held();
  }
  w->coordinator->set_listener(&w->belief);
  if (leader_based()) {
    w->belief.gained = [this, index](const std::string& key) { on_gained(index, key); };
    w->belief.lost = [this, index](const std::string& key) { on_lost(index, key); };
  }
  workers_.push_back(std::move(w));
  if (leader_based()) {
    schedule(index, first_take, TickKind::kHeartbeat);
    schedule(index, first_take, TickKind::kPoll);
    schedule(index, first_take, TickKind::kLead);
  } else {
    schedule(index, first_take, TickKind::kTake);
    schedule(index, first_take + jittered(config_.effective_renew_interval()), TickKind::kRenew);
  }
  report_.peak_workers =
      std::max(report_.peak_workers,
               static_cast<int>(std::count_if(workers_.begin(), workers_.end(), [](const auto& x) {
                 return x->state == WorkerState::kRunning || x->state == WorkerState::kPaused;
               })));
  return index;
}

std::vector<int> Simulation::pick_alive(int count, bool running_only) {
  std::vector<int> alive;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    auto s = workers_[i]->state;
    if (s == WorkerState::kRunning || (!running_only && s == WorkerState::kPaused)) {
      alive.push_back(static_cast<int>(i));
    }
  }
  std::shuffle(alive.begin(), alive.end(), rng_);
  if (static_cast<int>(alive.size()) > count) alive.resize(static_cast<std::size_t>(count));
  return alive;
}

void Simulation::set_owner(int shard, int owner) {
  int& current = owner_[static_cast<std::size_t>(shard)];
  if (current == owner) return;
  if (current >= 0) --workers_[static_cast<std::size_t>(current)]->held;
  if (!counts_as_running(current)) --unserved_;
  current = owner;
  if (current >= 0) ++workers_[static_cast<std::size_t>(current)]->held;
  if (!counts_as_running(current)) ++unserved_;
  if (phase_balanced_ && !report_.phases.empty()) ++report_.phases.back().moves_after_balance;
}

void Simulation::recount_unserved() {
  unserved_ = static_cast<int>(
      std::count_if(owner_.begin(), owner_.end(), [&](int o) { return !counts_as_running(o); }));
}

// Closes the current phase (its final spread is measured before the event changes anything)
// and opens a new one; moves made by the event itself count in the new phase.
void Simulation::start_phase() {
  finish_phase();
  SimulationPhase phase;
  phase.started = duration_cast<milliseconds>(now());
  report_.phases.push_back(std::move(phase));
  phase_balanced_ = false;
}

// Names the phase just opened, once the event has been applied.
void Simulation::label_phase(std::string label) {
  auto& phase = report_.phases.back();
  phase.label = std::move(label);
  phase.running_workers =
      static_cast<int>(std::count_if(workers_.begin(), workers_.end(), [](const auto& w) {
        return w->state == WorkerState::kRunning;
      }));
  recount_unserved();
}

void Simulation::finish_phase() {
  if (report_.phases.empty()) return;
  auto& phase = report_.phases.back();
  int lo = std::numeric_limits<int>::max();
  int hi = 0;
  for (const auto& w : workers_) {
    if (w->state != WorkerState::kRunning) continue;
    lo = std::min(lo, w->held);
    hi = std::max(hi, w->held);
  }
  phase.min_held = lo == std::numeric_limits<int>::max() ? 0 : lo;
  phase.max_held = hi;
  if (!options_.shard_kbps.empty()) {
    std::map<int, double> load;
    int running = 0;
    for (std::size_t w = 0; w < workers_.size(); ++w) {
      if (workers_[w]->state != WorkerState::kRunning) continue;
      load[static_cast<int>(w)] = 0;
      ++running;
    }
    double total = 0;
    for (std::size_t s = 0; s < owner_.size() && s < options_.shard_kbps.size(); ++s) {
      total += options_.shard_kbps[s];
      if (load.count(owner_[s])) load[owner_[s]] += options_.shard_kbps[s];
    }
    double most = 0;
    double least = total;
    for (const auto& [w, l] : load) {
      most = std::max(most, l);
      least = std::min(least, l);
    }
    phase.max_load_over_mean = running > 0 && total > 0 ? most / (total / running) : 0;
    phase.min_load_over_mean = running > 0 && total > 0 ? least / (total / running) : 0;
  }
}

// Balanced: every lease is owned in the table by a running worker, each running worker
// believes it holds exactly the leases the table gives it (a worker that was stolen from or
// paused has noticed), and the most loaded holds at most one more than the least (with
// shard_kbps: carries at most 1.5 times the mean load).
void Simulation::check_balance() {
  if (phase_balanced_ || report_.phases.empty() || unserved_ > 0) return;
  int lo = std::numeric_limits<int>::max();
  int hi = 0;
  for (const auto& w : workers_) {
    if (w->state != WorkerState::kRunning) continue;
    if (w->belief.believed != w->held) return;
    lo = std::min(lo, w->held);
    hi = std::max(hi, w->held);
  }
  if (lo == std::numeric_limits<int>::max()) return;
  if (options_.shard_kbps.empty()) {
    if (hi - lo > 1) return;
  } else {
    // By load: nobody carries more than 1.5 times the mean, nor less than the mean / 1.5.
    finish_phase();
    if (report_.phases.back().max_load_over_mean > 1.5 ||
        report_.phases.back().min_load_over_mean < 1 / 1.5) {
      return;
    }
  }
  phase_balanced_ = true;
  auto& phase = report_.phases.back();
  phase.time_to_balance = duration_cast<milliseconds>(now()) - phase.started;
  stats_at_balance_ = store_.stats();
  coordination_at_balance_ = coordination_.stats();
  balance_time_ = now();
}

// kLeader: owners are kept by belief (a lease is someone's from the moment it adopts it
// until it gives it up), which is what "balanced" and the safety check are about.
void Simulation::on_gained(int w, const std::string& key) {
  if (trace_)
    trace_->log(LogLevel::kInfo, workers_[static_cast<std::size_t>(w)]->id, "gained " + key);
  const int shard = shard_index_[key];
  const int prev = owner_[static_cast<std::size_t>(shard)];
  if (prev >= 0 && prev != w) {
    const auto& previous = *workers_[static_cast<std::size_t>(prev)];
    const bool alive =
        previous.state == WorkerState::kRunning || previous.state == WorkerState::kPaused;
    if (alive && previous.coordinator->holds(key)) ++report_.invariant_violations;
    ++report_.phases.back().takes_of_expired;
  } else {
    ++report_.phases.back().takes_of_free;
  }
  set_owner(shard, w);
}

void Simulation::on_lost(int w, const std::string& key) {
  const int shard = shard_index_[key];
  if (owner_[static_cast<std::size_t>(shard)] == w) set_owner(shard, -1);
}

void Simulation::run_leader_tick(const Tick& t, SimWorker& worker) {
  Clock::MonoTime next;
  switch (t.kind) {
    case TickKind::kHeartbeat:
      // What the shard consumers would have processed since the last heartbeat.
      if (!options_.shard_kbps.empty()) {
        const double seconds =
            worker.fed_until ? std::chrono::duration<double>(now() - *worker.fed_until).count()
                             : 0.0;
        for (const Lease& l : worker.coordinator->held_leases()) {
          const auto i = static_cast<std::size_t>(shard_index_[l.lease_key]);
          if (i < options_.shard_kbps.size()) {
            worker.load->note_processed(
                l.lease_key, static_cast<std::size_t>(options_.shard_kbps[i] * 1024.0 * seconds));
          }
        }
        worker.fed_until = now();
      }
      next = worker.agent->heartbeat_step();
      break;
    case TickKind::kPoll:
      next = worker.agent->poll_step();
      break;
    default: {
      const auto before = worker.agent->leader().stats();
      next = worker.agent->leader_step();
      const auto after = worker.agent->leader().stats();
      if ((after.assigned != before.assigned || after.handoffs != before.handoffs) &&
          !phase_balanced_) {
        ++report_.phases.back().assignment_passes;
      }
      break;
    }
  }
  // The consumers stop at once: each handoff asked for (by a poll, or by the leader's pass of
  // its own leases) completes now.
  std::vector<std::string> handoffs;
  handoffs.swap(worker.belief.handoffs);
  for (const auto& key : handoffs) {
    if (worker.coordinator->complete_handoff(key).ok()) {
      if (trace_) trace_->log(LogLevel::kInfo, worker.id, "handed off " + key);
      --worker.belief.believed;
      on_lost(t.worker, key);
      ++report_.phases.back().handoffs;
    }
  }
  const nanoseconds delay = std::max(nanoseconds(1000), nanoseconds(next - worker.clock->now()));
  schedule(t.worker, t.at + delay, t.kind);
}

void Simulation::apply_event(const SimulationEvent& e) {
  start_phase();
  std::string label;
  switch (e.kind) {
    case SimulationEvent::Kind::kJoin: {
      for (int i = 0; i < e.count; ++i) add_worker(now());
      label = "join " + std::to_string(e.count);
      break;
    }
    case SimulationEvent::Kind::kCrash: {
      for (int w : pick_alive(e.count, false)) {
        workers_[static_cast<std::size_t>(w)]->state = WorkerState::kCrashed;
      }
      label = "crash " + std::to_string(e.count);
      break;
    }
    case SimulationEvent::Kind::kLeave: {
      for (int w : pick_alive(e.count, true)) {
        auto& worker = *workers_[static_cast<std::size_t>(w)];
        auto held = worker.coordinator->held_leases();
        // Nothing more is taken (a graceful stop's drain, without its heartbeat), then every
        // lease is handed back.
        if (worker.agent) worker.agent->adopter().stop_taking();
        if (worker.takes) worker.takes->taker().stop_taking();
        (void)worker.coordinator->release_all();
        if (worker.agent) {
          worker.belief.gained = nullptr;
          worker.belief.lost = nullptr;
          (void)worker.agent->leave();
        }
        worker.belief.believed = 0;  // release_all reports no losses: it was asked for
        for (const auto& lease : held) {
          auto in_table = store_.peek(lease.lease_key);
          if (in_table && !in_table->lease_owner) set_owner(shard_index_[lease.lease_key], -1);
        }
        worker.state = WorkerState::kLeft;
      }
      label = "leave " + std::to_string(e.count) + " (graceful)";
      break;
    }
    case SimulationEvent::Kind::kPause: {
      auto picked = pick_alive(1, true);
      if (picked.empty()) {
        label = "pause (no running worker)";
        break;
      }
      auto& worker = *workers_[static_cast<std::size_t>(picked[0])];
      worker.state = WorkerState::kPaused;
      worker.paused_until = now() + duration_cast<nanoseconds>(e.pause_for);
      resumes_.emplace(worker.paused_until, picked[0]);
      label = "pause " + worker.id + " for " +
              fixed(static_cast<double>(e.pause_for.count()) / 1000.0, 1) + " s";
      break;
    }
  }
  label_phase(std::move(label));
}

void Simulation::run_tick(const Tick& t) {
  auto& worker = *workers_[static_cast<std::size_t>(t.worker)];
  if (worker.state == WorkerState::kCrashed || worker.state == WorkerState::kLeft) return;
  if (t.kind == TickKind::kTake && t.generation != worker.take_generation) return;  // superseded
  if (t.kind == TickKind::kPoll && t.generation != worker.poll_generation) return;  // woken since
  if (worker.state == WorkerState::kPaused) {
    schedule(t.worker, worker.paused_until, t.kind);  // runs when the pause ends
    return;
  }
  if (leader_based()) {
    run_leader_tick(t, worker);
    return;
  }
  if (t.kind == TickKind::kRenew) {
    (void)worker.takes->renew_pass();
    schedule(t.worker, t.at + jittered(config_.effective_renew_interval()), TickKind::kRenew);
    return;
  }
  assignment::TakePassResult result = worker.takes->taker().run_take_pass();
  auto& phase = report_.phases.back();
  for (const auto& key : result.taken) {
    int shard = shard_index_[key];
    int prev = owner_[static_cast<std::size_t>(shard)];
    if (prev < 0 || prev == t.worker) {
      ++phase.takes_of_free;
    } else {
      ++phase.takes_of_expired;
      const auto& previous = *workers_[static_cast<std::size_t>(prev)];
      bool alive =
          previous.state == WorkerState::kRunning || previous.state == WorkerState::kPaused;
      if (alive && previous.coordinator->holds(key)) ++report_.invariant_violations;
    }
    set_owner(shard, t.worker);
  }
  for (const auto& key : result.stolen) {
    ++phase.steals;
    set_owner(shard_index_[key], t.worker);
  }
  // As WorkerTakesAssignment: the next pass after the take interval, sooner when a lease
  // looks abandoned.
  nanoseconds next = t.at + jittered(config_.effective_take_interval());
  if (result.next_expiry) {
    nanoseconds at =
        t.at + (*result.next_expiry - worker.clock->now()) + std::chrono::milliseconds(1);
    next = std::min(next, at);
  }
  schedule(t.worker, next, TickKind::kTake);
}

Result<SimulationReport> Simulation::run() {
  config_ = options_.lease;
  if (config_.application_name.empty() && config_.table_name.empty()) {
    config_.application_name = "simulation";
  }
  config_.worker_id = "validation";
  auto problems = config_.validate();
  if (!problems.empty()) {
    std::string text = "simulation lease configuration:";
    for (const auto& p : problems) text += " " + p + ";";
    return Status(StatusCode::kInvalidArgument, text);
  }
  if (options_.shards < 0 || options_.workers < 0) {
    return Status(StatusCode::kInvalidArgument, "simulation: negative workers or shards");
  }
  if (options_.workers == 0 &&
      std::none_of(options_.events.begin(), options_.events.end(),
                   [](const auto& e) { return e.kind == SimulationEvent::Kind::kJoin; })) {
    return Status(StatusCode::kInvalidArgument, "simulation: no workers and no joins");
  }

  if (!leader_based()) config_.renew_parallelism = 1;  // deterministic order of writes
  report_.assignment = config_.assignment;
  report_.shards = options_.shards;
  report_.take_interval = config_.effective_take_interval();
  report_.renew_interval = config_.effective_renew_interval();
  report_.failover_time = config_.failover_time;

  owner_.assign(static_cast<std::size_t>(options_.shards), -1);
  for (int i = 0; i < options_.shards; ++i) {
    Lease lease;
    lease.lease_key = shard_key(i);
    shard_index_.emplace(lease.lease_key, i);
    store_.put(lease);
  }
  store_.reset_stats();
  coordination_.reset_stats();

  milliseconds spread =
      options_.start_spread.count() > 0 ? options_.start_spread : config_.effective_take_interval();
  std::uniform_int_distribution<std::int64_t> start(
      0, std::max<std::int64_t>(0, duration_cast<nanoseconds>(spread).count() - 1));
  start_phase();
  for (int i = 0; i < options_.workers; ++i) add_worker(nanoseconds(start(rng_)));
  label_phase("start " + std::to_string(options_.workers) + " workers");

  for (const auto& e : options_.events) {
    pending_events_.emplace(duration_cast<nanoseconds>(e.at), e);
  }
  const nanoseconds end = duration_cast<nanoseconds>(options_.duration);

  while (true) {
    nanoseconds next = end;
    int source = 0;  // 0 end, 1 tick, 2 event, 3 resume
    if (!ticks_.empty() && ticks_.top().at < next) {
      next = ticks_.top().at;
      source = 1;
    }
    if (!pending_events_.empty() && pending_events_.begin()->first <= next) {
      next = pending_events_.begin()->first;
      source = 2;
    }
    if (!resumes_.empty() && resumes_.begin()->first <= next) {
      next = resumes_.begin()->first;
      source = 3;
    }
    if (next > now()) clock_.advance(next - now());
    if (source == 0) break;
    if (source == 1) {
      Tick t = ticks_.top();
      ticks_.pop();
      run_tick(t);
    } else if (source == 2) {
      SimulationEvent e = pending_events_.begin()->second;
      pending_events_.erase(pending_events_.begin());
      apply_event(e);
    } else {
      int w = resumes_.begin()->second;
      resumes_.erase(resumes_.begin());
      auto& worker = *workers_[static_cast<std::size_t>(w)];
      if (worker.state == WorkerState::kPaused) {
        start_phase();
        worker.state = WorkerState::kRunning;
        label_phase("resume " + worker.id);
      }
    }
    check_balance();
  }
  finish_phase();

  report_.simulated = duration_cast<milliseconds>(now());
  report_.stats = store_.stats();
  report_.coordination = coordination_.stats();
  if (phase_balanced_) {
    report_.steady_stats = minus(report_.stats, stats_at_balance_);
    report_.steady_coordination = minus(report_.coordination, coordination_at_balance_);
    report_.steady_duration = duration_cast<milliseconds>(now() - balance_time_);
  }
  for (const auto& lease : store_.snapshot()) {
    int expected = owner_[static_cast<std::size_t>(shard_index_[lease.lease_key])];
    bool match = expected < 0
                     ? !lease.lease_owner
                     : lease.lease_owner == workers_[static_cast<std::size_t>(expected)]->id;
    if (!match) ++report_.bookkeeping_mismatches;
  }
  return report_;
}

}  // namespace

std::optional<double> SimulationPhase::passes_to_balance(milliseconds take_interval) const {
  if (!time_to_balance || take_interval.count() <= 0) return std::nullopt;
  return static_cast<double>(time_to_balance->count()) / static_cast<double>(take_interval.count());
}

bool SimulationReport::all_phases_balanced() const {
  return std::all_of(phases.begin(), phases.end(),
                     [](const SimulationPhase& p) { return p.time_to_balance.has_value(); });
}

std::int64_t SimulationReport::total_moves_after_balance() const {
  std::int64_t n = 0;
  for (const auto& p : phases) n += p.moves_after_balance;
  return n;
}

double SimulationReport::per_shard_minute(std::int64_t count, int shard_count, milliseconds over) {
  if (shard_count <= 0 || over.count() <= 0) return 0;
  double minutes = static_cast<double>(over.count()) / 60000.0;
  return static_cast<double>(count) / shard_count / minutes;
}

double SimulationReport::steady_items_read_per_shard_minute() const {
  return per_shard_minute(
      steady_stats.items_scanned + steady_stats.gets + steady_coordination.items_read, shards,
      steady_duration);
}

double SimulationReport::steady_writes_per_shard_minute() const {
  return per_shard_minute(steady_stats.writes + steady_coordination.writes, shards,
                          steady_duration);
}

std::string SimulationReport::to_text() const {
  const bool leader = assignment == LeaseAssignment::kLeader;
  std::ostringstream out;
  out << "lease simulation (" << (leader ? "leader-based assignment" : "every worker takes")
      << "): " << shards << " shards, up to " << peak_workers << " workers; failover "
      << failover_time.count() << " ms, renew " << renew_interval.count() << " ms, "
      << (leader ? "" : "take " + std::to_string(take_interval.count()) + " ms; ") << "simulated "
      << fixed(static_cast<double>(simulated.count()) / 1000.0, 0) << " s\n";
  out << "  phase                          at(s) running  balanced-after(s) passes  "
      << (leader ? "free  expired handoff" : "free  expired  stolen")
      << "  moved-after  least/most\n";
  for (const auto& p : phases) {
    char line[256];
    std::string balanced = p.time_to_balance
                               ? fixed(static_cast<double>(p.time_to_balance->count()) / 1000.0, 1)
                               : std::string("never");
    std::optional<double> passes = p.passes_to_balance(take_interval);
    if (leader) passes = static_cast<double>(p.assignment_passes);
    std::snprintf(
        line, sizeof line, "  %-30s %6.0f %7d  %17s %6s %5lld %8lld %7lld %12lld  %d/%d\n",
        p.label.c_str(), static_cast<double>(p.started.count()) / 1000.0, p.running_workers,
        balanced.c_str(), passes ? fixed(*passes, 1).c_str() : "-",
        static_cast<long long>(p.takes_of_free), static_cast<long long>(p.takes_of_expired),
        static_cast<long long>(leader ? p.handoffs : p.steals),
        static_cast<long long>(p.moves_after_balance), p.min_held, p.max_held);
    out << line;
    if (p.max_load_over_mean > 0) {
      out << "      most / least loaded worker over the mean load at the end of the phase: "
          << fixed(p.max_load_over_mean, 2) << " / " << fixed(p.min_load_over_mean, 2) << "\n";
    }
  }
  auto describe = [&](const char* title, const LeaseStoreStats& s, milliseconds over) {
    if (over.count() <= 0) return;
    double seconds = static_cast<double>(over.count()) / 1000.0;
    out << "  DynamoDB, " << title << " (" << fixed(seconds, 0) << " s):\n";
    out << "    scans " << s.scans << " (" << s.scan_pages
        << " Scan requests of <= 1 MB), items read by scans " << s.items_scanned << " ("
        << fixed(static_cast<double>(s.bytes_scanned) / 1e6, 1) << " MB), consistent gets "
        << s.gets << "\n";
    out << "    writes " << s.writes << ": renew " << s.renews << ", take " << s.takes
        << ", release " << s.evicts << ", checkpoint " << s.checkpoints << "; failed conditions "
        << s.failed_conditions << "\n";
    out << "    lease table per shard per minute: item reads "
        << fixed(per_shard_minute(s.items_scanned + s.gets, shards, over), 2) << ", read requests "
        << fixed(per_shard_minute(s.scan_pages + s.gets, shards, over), 3) << ", writes "
        << fixed(per_shard_minute(s.writes, shards, over), 2) << "\n";
    out << "    table totals: " << fixed(static_cast<double>(s.scan_pages + s.gets) / seconds, 1)
        << " read requests/s, " << fixed(static_cast<double>(s.writes) / seconds, 1)
        << " writes/s, est. " << fixed(s.read_units / seconds, 1) << " RCU/s, "
        << fixed(s.write_units / seconds, 1) << " WCU/s\n";
  };
  auto describe_coordination = [&](const char* title, const CoordinationStoreStats& c,
                                   const LeaseStoreStats& s, milliseconds over) {
    if (!leader || over.count() <= 0) return;
    out << "  coordination table, " << title << ": reads " << c.reads << " (" << c.items_read
        << " items), writes " << c.writes << " (heartbeats " << c.heartbeats << ", leader lock "
        << c.leader_writes << ", fences " << c.fences << ")\n";
    out << "    both tables per shard per minute: item reads "
        << fixed(per_shard_minute(s.items_scanned + s.gets + c.items_read, shards, over), 2)
        << ", writes " << fixed(per_shard_minute(s.writes + c.writes, shards, over), 2) << "\n";
    // Billed units (estimated from the items' sizes) and the on-demand price.
    const double minute = static_cast<double>(over.count()) / 60000.0 * shards;
    const double rc = c.read_units / minute, wc = c.write_units / minute;
    const double rl = s.read_units / minute, wl = s.write_units / minute;
    auto usd = [](double r, double w) {
      return (r * kReadUnitUsd + w * kWriteUnitUsd) * kMinutesPerMonth;
    };
    out << "    billed units per shard per minute: coordination table " << fixed(rc, 3)
        << " read / " << fixed(wc, 3) << " write, lease table " << fixed(rl, 3) << " read / "
        << fixed(wl, 3) << " write (checkpoints not simulated); $ per shard-month: "
        << "coordination table " << fixed(usd(rc, wc), 4) << ", both tables "
        << fixed(usd(rc + rl, wc + wl), 4) << "\n";
  };
  describe("whole run", stats, simulated);
  describe_coordination("whole run", coordination, stats, simulated);
  describe("steady state after the last balance", steady_stats, steady_duration);
  describe_coordination("steady state", steady_coordination, steady_stats, steady_duration);
  out << "  safety: expired leases taken while the old owner still held them: "
      << invariant_violations << "; bookkeeping mismatches: " << bookkeeping_mismatches << "\n";
  return out.str();
}

Result<SimulationReport> run_lease_simulation(const SimulationOptions& options) {
  Simulation sim(options);
  return sim.run();
}

}  // namespace kcl::leases
