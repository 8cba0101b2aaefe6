// bench_lease_simulation: plans the lease table at scale with the deterministic simulation
// (bench/simulation/lease_simulation.h): N workers, M shards, joins, crashes, graceful leaves
// and a pause on a fake clock, counting the DynamoDB operations of the real lease code, in
// either assignment mode:
//  --mode leader  (default) leader-based assignment: one heartbeat per worker, one leader
//                 reading the worker entries and, now and then, the lease table;
//  --mode takes   every worker scans the whole table each take interval and renews every
//                 lease every failover/3 (the Java KCL 2.x design);
//  --mode both    the two, one after the other.
//
//   bench_lease_simulation                       # 200 workers x 10,000 shards, the scenario
//   bench_lease_simulation --workers 10 --shards 100 --minutes 30
//   bench_lease_simulation --ramp 0              # no start-up ramp (the Java KCL's behaviour)
//   bench_lease_simulation --take-ms 60000       # scan every minute instead of every 20 s
//   bench_lease_simulation --hot 10              # shard 0 carries 10x the traffic: by load
//   bench_lease_simulation --micro               # Google Benchmark: CPU of one take pass
//
// Scenario (times scale with --minutes, default 40): cold start of all workers spread over
// --spread-ms (default 2 s: a fleet deployed at once); at 25% +10% workers join; at 45% 10% crash;
// at 65% 10% leave gracefully; at 80% one worker pauses for 6 x failover (its leases are taken
// meanwhile); then steady state to the end.
#include "simulation/lease_simulation.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "assignment/worker_takes_assignment.h"
#include "kcl/clock.h"
#include "leases/in_memory_lease_store.h"

namespace {

using namespace std::chrono_literals;
using kcl::leases::SimulationEvent;
using Kind = SimulationEvent::Kind;

struct Args {
  int workers = 200;
  int shards = 10000;
  int minutes = 40;
  std::uint64_t seed = 1;
  long failover_ms = 10000;
  long take_ms = 0;
  int ramp = 10;
  int steal = 1;
  bool events = true;
  bool micro = false;
  std::string mode = "leader";
  long spread_ms = 2000;
  double hot = 0;  // > 0: every shard carries 100 KB/s, shard 0 this many times that
};

void usage() {
  std::fprintf(stderr,
               "usage: bench_lease_simulation [--workers N] [--shards M] [--minutes T] "
               "[--seed S] [--failover-ms F] [--take-ms T] [--ramp R] [--steal K] "
               "[--no-events] [--mode leader|takes|both] [--spread-ms S] [--hot FACTOR] "
               "[--micro [benchmark flags]]\n");
}

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (k == "--micro") {
      a.micro = true;
      return true;
    } else if (k == "--no-events") {
      a.events = false;
    } else if ((v = next()) == nullptr) {
      return false;
    } else if (k == "--workers") {
      a.workers = std::atoi(v);
    } else if (k == "--shards") {
      a.shards = std::atoi(v);
    } else if (k == "--minutes") {
      a.minutes = std::atoi(v);
    } else if (k == "--seed") {
      a.seed = std::strtoull(v, nullptr, 10);
    } else if (k == "--failover-ms") {
      a.failover_ms = std::atol(v);
    } else if (k == "--take-ms") {
      a.take_ms = std::atol(v);
    } else if (k == "--ramp") {
      a.ramp = std::atoi(v);
    } else if (k == "--steal") {
      a.steal = std::atoi(v);
    } else if (k == "--hot") {
      a.hot = std::atof(v);
    } else if (k == "--spread-ms") {
      a.spread_ms = std::atol(v);
    } else if (k == "--mode") {
      a.mode = v;
      if (a.mode != "leader" && a.mode != "takes" && a.mode != "both") return false;
    } else {
      return false;
    }
  }
  return true;
}

// CPU cost of one take pass of one worker over a table of `shards` leases held by others.
void BM_TakePass(benchmark::State& state) {
  const int shards = static_cast<int>(state.range(0));
  kcl::ManualClock clock;
  kcl::leases::InMemoryLeaseStore store;
  for (int i = 0; i < shards; ++i) {
    kcl::Lease l;
    l.lease_key = "shardId-" + std::to_string(100000000000 + i);
    l.lease_owner = "worker-" + std::to_string(i % 200);
    l.lease_counter = 100 + i;
    l.checkpoint =
        kcl::ExtendedSequenceNumber("49590338271490256608559692538361571095921575989136588898");
    store.put(l);
  }
  kcl::LeaseConfig config;
  config.application_name = "bench";
  config.worker_id = "worker-x";
  config.assignment = kcl::LeaseAssignment::kWorkerTakes;
  kcl::assignment::AssignmentParts parts;
  parts.store = &store;
  parts.clock = &clock;
  parts.metrics = &kcl::NoopMetricsSink::instance();
  parts.seed = 1;
  kcl::assignment::WorkerTakesAssignment c(config, parts);
  for (auto _ : state) {
    auto r = c.taker().run_take_pass();
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * shards);
}
BENCHMARK(BM_TakePass)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, a)) {
    usage();
    return 2;
  }
  if (a.micro) {
    int bargc = 1;
    std::vector<char*> bargv = {argv[0]};
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--micro") != 0) {
        bargv.push_back(argv[i]);
        ++bargc;
      }
    }
    benchmark::Initialize(&bargc, bargv.data());
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
  }

  kcl::leases::SimulationOptions o;
  o.workers = a.workers;
  o.shards = a.shards;
  o.seed = a.seed;
  o.duration = std::chrono::minutes(a.minutes);
  o.lease.application_name = "simulation";
  o.lease.failover_time = std::chrono::milliseconds(a.failover_ms);
  o.lease.take_interval = std::chrono::milliseconds(a.take_ms);
  o.lease.take_ramp_floor = a.ramp;
  o.lease.max_leases_to_steal_at_once = a.steal;
  o.start_spread = std::chrono::milliseconds(a.spread_ms);
  if (a.hot > 0) {
    o.shard_kbps.assign(static_cast<std::size_t>(a.shards), 100.0);
    if (!o.shard_kbps.empty()) o.shard_kbps[0] = 100.0 * a.hot;
  }
  if (a.events) {
    const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(o.duration);
    const int tenth = std::max(1, a.workers / 10);
    o.events = {
        {d * 25 / 100, Kind::kJoin, tenth, 0ms},
        {d * 45 / 100, Kind::kCrash, tenth, 0ms},
        {d * 65 / 100, Kind::kLeave, tenth, 0ms},
        {d * 80 / 100, Kind::kPause, 1, o.lease.failover_time * 6},
    };
  }
  std::vector<kcl::LeaseAssignment> modes;
  if (a.mode != "takes") modes.push_back(kcl::LeaseAssignment::kLeader);
  if (a.mode != "leader") modes.push_back(kcl::LeaseAssignment::kWorkerTakes);
  int exit_code = 0;
  for (kcl::LeaseAssignment mode : modes) {
    o.lease.assignment = mode;
    auto started = std::chrono::steady_clock::now();
    auto report = kcl::leases::run_lease_simulation(o);
    auto took = std::chrono::steady_clock::now() - started;
    if (!report.ok()) {
      std::fprintf(stderr, "%s\n", report.status().to_string().c_str());
      return 1;
    }
    std::printf("%s", report->to_text().c_str());
    std::printf(
        "  steady state, both tables: %.2f items read and %.2f writes per shard per "
        "minute\n",
        report->steady_items_read_per_shard_minute(), report->steady_writes_per_shard_minute());
    std::printf("  (the simulation took %.1f s of wall time on this machine)\n\n",
                std::chrono::duration<double>(took).count());
    if (report->invariant_violations != 0 || report->bookkeeping_mismatches != 0) exit_code = 1;
  }
  return exit_code;
}
