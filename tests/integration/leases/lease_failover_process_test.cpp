// Several workers as separate processes share a lease table in dynalite; one is killed with
// SIGKILL and its leases are taken by the survivors within failover time + one take
// interval; another shuts down gracefully and its leases are taken on the next pass.
//
// The worker processes are this test binary run again (/proc/self/exe) with KCL_LEASE_WORKER
// set: a static initializer below then runs a lease worker (WorkerTakesAssignment over
// DynamoDbLeaseStore) instead of the tests, prints the leases it
// holds whenever they change, hands its leases back on SIGTERM, and exits. Nothing else in
// the binary runs in that mode.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "assignment/worker_takes_assignment.h"
#include "aws/aws_json_client.h"
#include "dynamodb/dynamodb_client.h"
#include "leases/dynamodb_lease_store.h"
#include "support/emulators.h"

extern char** environ;

namespace kcl::leases {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

constexpr auto kFailover = 2000ms;
constexpr auto kTakeInterval = 1000ms;
constexpr int kShards = 12;

// --- the worker process ---

std::atomic<bool> g_stop{false};
void on_term(int) { g_stop.store(true); }

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, sep)) out.push_back(part);
  return out;
}

// KCL_LEASE_WORKER = "<dynamodb endpoint>|<table>|<worker id>"
[[noreturn]] void run_worker_process(const std::string& spec) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
  signal(SIGTERM, on_term);
  auto parts = split(spec, '|');
  if (parts.size() != 3) {
    std::fprintf(stderr, "bad KCL_LEASE_WORKER: %s\n", spec.c_str());
    std::_Exit(2);
  }
  AwsConfig aws;
  aws.region = "us-east-1";
  aws.dynamodb_endpoint_url = parts[0];
  aws.credentials = StaticCredentials{"AKIDKCLTESTEXAMPLE", "kcl-test-fake-secret-key", ""};
  aws.http.verify_tls = false;
  aws.http.connect_timeout = 2000ms;
  aws.http.request_timeout = 5000ms;
  auto raw = aws::make_aws_json_client(aws::dynamodb_service(), aws);
  if (!raw.ok()) {
    std::fprintf(stderr, "%s\n", raw.status().to_string().c_str());
    std::_Exit(3);
  }
  auto client = std::make_shared<dynamodb::DynamoDbClient>(
      std::shared_ptr<aws::AwsJsonClient>(std::move(raw).value()));
  LeaseConfig config;
  config.application_name = parts[1];
  config.worker_id = parts[2];
  config.assignment = LeaseAssignment::kWorkerTakes;
  config.failover_time = kFailover;
  config.take_interval = kTakeInterval;
  DynamoDbLeaseStore store(client, config);
  assignment::AssignmentParts assignment_parts;
  assignment_parts.store = &store;
  assignment_parts.clock = &SystemClock::instance();
  assignment_parts.metrics = &NoopMetricsSink::instance();
  assignment_parts.seed = std::random_device{}();
  assignment::WorkerTakesAssignment runner(config, assignment_parts);
  leases::HeldLeases& coordinator = runner.held();
  runner.start();
  std::string last;
  while (!g_stop.load()) {
    std::string now;
    for (const auto& l : coordinator.held_leases()) now += (now.empty() ? "" : ",") + l.lease_key;
    if (now != last) {
      std::printf("HELD %s %zu [%s]\n", config.worker_id.c_str(), coordinator.held_leases().size(),
                  now.c_str());
      std::fflush(stdout);
      last = now;
    }
    std::this_thread::sleep_for(50ms);
  }
  // Graceful shutdown: stop taking, hand everything back, stop the threads.
  runner.drain();
  Status released = coordinator.release_all();
  runner.stop();
  std::printf("RELEASED %s %s\n", config.worker_id.c_str(), released.to_string().c_str());
  std::fflush(stdout);
  std::_Exit(released.ok() ? 0 : 4);
}

// Runs before main() in the worker processes only.
[[maybe_unused]] const bool g_worker_mode = [] {
  if (const char* spec = std::getenv("KCL_LEASE_WORKER")) run_worker_process(spec);
  return false;
}();

// --- the test ---

pid_t spawn_worker(const std::string& endpoint, const std::string& table, const std::string& id,
                   const std::string& log_path) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  env.push_back("KCL_LEASE_WORKER=" + endpoint + "|" + table + "|" + id);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe";
  char* argv[] = {self.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(rc, 0) << "posix_spawn: " << rc;
  return pid;
}

std::string slurp(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

class LeaseFailoverProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& emulators = kcl::testing::shared_emulators();
    endpoint_ = emulators.dynamodb_url();
    auto raw = aws::make_aws_json_client(aws::dynamodb_service(), emulators.aws_config());
    ASSERT_TRUE(raw.ok()) << raw.status();
    client_ = std::make_shared<dynamodb::DynamoDbClient>(
        std::shared_ptr<aws::AwsJsonClient>(std::move(raw).value()));
    table_ = kcl::testing::unique_name("failover");
    LeaseConfig c;
    c.application_name = table_;
    c.worker_id = "test";
    store_ = std::make_unique<DynamoDbLeaseStore>(client_, c);
    ASSERT_TRUE(store_->create_table_if_not_exists().ok());
    for (int i = 0; i < kShards; ++i) {
      Lease l;
      char key[32];
      std::snprintf(key, sizeof key, "shardId-%012d", i);
      l.lease_key = key;
      ASSERT_TRUE(store_->create_lease_if_not_exists(l).ok());
    }
  }

  void TearDown() override {
    for (auto& [id, pid] : pids_) {
      if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
    if (HasFailure()) {
      for (auto& [id, path] : logs_)
        std::fprintf(stderr, "--- %s:\n%s", id.c_str(), slurp(path).c_str());
    }
    for (auto& [id, path] : logs_) std::remove(path.c_str());
    (void)client_->delete_table(table_);
  }

  void start(const std::string& id) {
    std::string log = "/tmp/" + table_ + "-" + id + ".log";
    logs_[id] = log;
    pids_[id] = spawn_worker(endpoint_, table_, id, log);
  }

  std::map<std::string, int> owners() {
    std::map<std::string, int> counts;
    auto leases = store_->list_leases();
    EXPECT_TRUE(leases.ok()) << leases.status();
    if (!leases.ok()) return counts;
    for (const auto& l : *leases) counts[l.lease_owner.value_or("")]++;
    return counts;
  }

  // Polls the table until `pred(owner counts)` holds; false after `deadline`.
  template <typename Pred>
  bool wait_for(Pred pred, std::chrono::milliseconds deadline) {
    auto until = Steady::now() + deadline;
    while (Steady::now() < until) {
      if (pred(owners())) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  static bool balanced_among(const std::map<std::string, int>& counts,
                             const std::set<std::string>& workers) {
    int total = 0, lo = kShards, hi = 0;
    for (const auto& w : workers) {
      auto it = counts.find(w);
      int n = it == counts.end() ? 0 : it->second;
      total += n;
      lo = std::min(lo, n);
      hi = std::max(hi, n);
    }
    return total == kShards && hi - lo <= 1;
  }

  std::string endpoint_;
  std::string table_;
  std::shared_ptr<dynamodb::DynamoDbClient> client_;
  std::unique_ptr<DynamoDbLeaseStore> store_;
  std::map<std::string, pid_t> pids_;
  std::map<std::string, std::string> logs_;
};

TEST_F(LeaseFailoverProcessTest, KilledWorkersLeasesAreTakenWithinFailoverPlusTwoTakeIntervals) {
  start("w0");
  start("w1");
  start("w2");
  ASSERT_TRUE(wait_for(
      [](const auto& c) {
        return balanced_among(c, {"w0", "w1", "w2"});
      },
      60s))
      << "the three workers never split the 12 leases";
  ASSERT_EQ(owners()["w0"], 4);

  // SIGKILL: no hand-back, no last renewal.
  const auto killed_at = Steady::now();
  ASSERT_EQ(kill(pids_["w0"], SIGKILL), 0);
  waitpid(pids_["w0"], nullptr, 0);
  pids_["w0"] = -1;
  ASSERT_TRUE(wait_for([](const auto& c) { return !c.count("w0") && !c.count(""); }, 30s))
      << "w0's leases were never taken";
  const auto taken_after = Steady::now() - killed_at;
  std::printf(
      "w0's leases were taken %lld ms after SIGKILL (failover %lld ms, take interval %lld ms)\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(taken_after).count()),
      static_cast<long long>(kFailover.count()), static_cast<long long>(kTakeInterval.count()));
  // Not before the failover time could have run out (w0 renewed at most a renew interval
  // before it died). At the latest: a taker learns of w0's last renewal at its next take pass
  // (up to one take interval later), judges the lease expired failover_time after that, and
  // takes it at the pass after (one more take interval): failover + two take intervals after
  // a renewal just before the kill (+ slack for the emulator and the 10% interval jitter).
  // Seen once at 4,001 ms in a full run of the suite on a 2-core machine.
  EXPECT_GE(taken_after, kFailover - kFailover / 3 - 100ms);
  EXPECT_LE(taken_after, kFailover + 2 * kTakeInterval + 700ms);
  EXPECT_TRUE(wait_for([](const auto& c) { return balanced_among(c, {"w1", "w2"}); }, 10s));

  // Graceful shutdown of w1: it hands its leases back and w2 takes them on its next pass,
  // without waiting out the failover time.
  const auto term_at = Steady::now();
  ASSERT_EQ(kill(pids_["w1"], SIGTERM), 0);
  int status = 0;
  waitpid(pids_["w1"], &status, 0);
  pids_["w1"] = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "w1 did not release cleanly";
  ASSERT_TRUE(wait_for([](const auto& c) { return c.size() == 1 && c.count("w2"); }, 30s));
  const auto handed_after = Steady::now() - term_at;
  std::printf("w1's handed-back leases were taken %lld ms after SIGTERM\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(handed_after).count()));
  EXPECT_LE(handed_after, kTakeInterval + 700ms) << "hand-back must not wait for the failover time";
}

}  // namespace
}  // namespace kcl::leases
