// The operations kit against real parts: two `kcl consume` workers (kinesalite + dynalite)
// on a 2-shard stream of one record a shard, every processor held (--hold-while-exists) so
// both shards stall.
//  - a real Prometheus server (Debian's prometheus; loopback, a temporary directory, 1 s
//    scrape and evaluation intervals) scraping both workers with docs/prometheus/
//    kcl-alerts.yml loaded: KclShardStalled fires for each shard, cause
//    processor_callback (read from /api/v1/alerts);
//  - docs/grafana/kcl-dashboard.json: every metric its queries name is served by the
//    workers' /metrics once the shards stalled and, the hold lifted, records were
//    processed and checkpointed (the counters of a dead-lettered record and of a processor
//    that threw excepted: a worker serves them once that happened).
// The Prometheus part is skipped, with the reason, when prometheus is not installed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "support/httplib_client.h"
#include "support/kcl_process.h"

namespace kcl::cli {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

// Metrics a dashboard may name that a worker serves only once something went wrong (a record
// dead-lettered, a processor callback that threw), which this test does not provoke.
const std::set<std::string> kOnlyAfterAnEvent = {"kcl_records_dead_lettered_total",
                                                 "kcl_processor_failures_total"};

// HTTP GET on 127.0.0.1:port; empty when no answer.
std::optional<std::string> get(int port, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(10, 0);
  c.set_connection_timeout(2, 0);
  auto r = c.Get(path.c_str());
  if (!r || r->status != 200) return std::nullopt;
  return r->body;
}

// A port free right now on 127.0.0.1 (for a server that cannot pick its own and say which).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

bool on_path(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

// Sample names (with _bucket, _sum, _count, _total as exposed) of a /metrics text.
std::set<std::string> sample_names(const std::string& text) {
  std::set<std::string> names;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    names.insert(line.substr(0, line.find_first_of("{ ")));
  }
  return names;
}

class OperationsKitTest : public CliTest {
 protected:
  void SetUp() override {
    make_stream("ops", 2);
    auto listed = kinesis_->list_shards(stream_);
    ASSERT_TRUE(listed.ok()) << listed.status();
    for (const auto& shard : *listed) shards_.push_back(shard.shard_id);
    dir_ = ::testing::TempDir() + "/" + testing::unique_name("ops");
    fs::create_directories(dir_);
    hold_ = dir_ + "/hold";
    std::ofstream(hold_) << "held until removed";
    // One record on each shard: hash key 0 on the first, 2^127 on the second.
    ASSERT_TRUE(
        kinesis_
            ->put_records(stream_, {{"a", "pk-a", "0"},
                                    {"b", "pk-b", "170141183460469231731687303715884105728"}})
            .ok());
    app_ = testing::unique_name("ops-app");
    for (const char* id : {"w1", "w2"}) start_worker(id);
  }

  void TearDown() override {
    std::error_code ec;
    fs::remove(hold_, ec);  // let a held processor go, so the workers stop gracefully
    for (auto& w : workers_) w->stop();
  }

  void start_worker(const std::string& id) {
    const std::string err = dir_ + "/" + id + ".err";
    workers_.push_back(std::make_unique<KclProcess>(
        aws_,
        std::vector<std::string>{"consume", "--stream", stream_, "--app", app_, "--worker-id", id,
                                 "--from", "trim-horizon", "--http", "127.0.0.1:0",
                                 "--stall-threshold-ms", "2000", "--failover-ms", "3000",
                                 "--hold-while-exists", hold_},
        dir_ + "/" + id + ".out", err));
    ASSERT_TRUE(workers_.back()->started());
    int port = 0;
    ASSERT_TRUE(eventually(
        [&] {
          std::ifstream in(err);
          static const std::regex url("status page http://127\\.0\\.0\\.1:([0-9]+)/status");
          std::smatch m;
          for (std::string line; std::getline(in, line);) {
            if (std::regex_search(line, m, url)) port = std::stoi(m[1]);
          }
          return port > 0;
        },
        30s))
        << "worker " << id << " did not say where it serves";
    ports_.push_back(port);
  }

  std::string dir_, hold_, app_;
  std::vector<std::string> shards_;
  std::vector<std::unique_ptr<KclProcess>> workers_;
  std::vector<int> ports_;
};

TEST_F(OperationsKitTest, PrometheusFiresTheStallAlertForAHeldProcessor) {
  if (!on_path("prometheus")) {
    GTEST_SKIP() << "prometheus is not installed (Debian package prometheus; "
                    "scripts/install-deps.sh installs it)";
  }
  const int port = free_port();
  ASSERT_GT(port, 0);
  std::ofstream(dir_ + "/prometheus.yml")
      << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
      << "rule_files:\n  - " << KCL_SOURCE_DIR << "/docs/prometheus/kcl-alerts.yml\n"
      << "scrape_configs:\n  - job_name: kcl\n    static_configs:\n      - targets: ['127.0.0.1:"
      << ports_[0] << "', '127.0.0.1:" << ports_[1] << "']\n";
  testing::ChildProcess prometheus(
      {"/usr/bin/env", "prometheus", "--config.file=" + dir_ + "/prometheus.yml",
       "--storage.tsdb.path=" + dir_ + "/tsdb",
       "--web.listen-address=127.0.0.1:" + std::to_string(port), "--log.level=warn"},
      {std::string("PATH=") + (std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin")},
      dir_ + "/prometheus.out", dir_ + "/prometheus.err");
  ASSERT_TRUE(prometheus.started());
  const auto began = std::chrono::steady_clock::now();
  // Both shards' processors are held: an alert fires for each, cause processor_callback.
  std::map<std::string, json> firing;  // by shard
  const bool fired = eventually(
      [&] {
        auto body = get(port, "/api/v1/alerts");
        if (!body) return false;
        json j = json::parse(*body, nullptr, false);
        if (!j.is_object() || !j.contains("data")) return false;
        for (const auto& a : j["data"]["alerts"]) {
          if (a["labels"].value("alertname", "") == "KclShardStalled" &&
              a.value("state", "") == "firing") {
            firing[a["labels"].value("shard", "")] = a;
          }
        }
        return firing.size() == shards_.size();
      },
      90s);
  ASSERT_TRUE(fired) << firing.size() << " KclShardStalled firing; see " << dir_
                     << "/prometheus.err";
  std::printf("[ note ] KclShardStalled firing for %zu shards %.1f s after Prometheus started\n",
              firing.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  for (const auto& shard : shards_) {
    ASSERT_TRUE(firing.count(shard)) << shard;
    const json& labels = firing[shard]["labels"];
    EXPECT_EQ(labels["cause"], "processor_callback") << firing[shard].dump();
    EXPECT_EQ(labels["severity"], "warning");
    EXPECT_EQ(firing[shard]["annotations"]["summary"],
              "Shard " + shard + " stalled (processor_callback)");
  }
}

TEST_F(OperationsKitTest, TheGrafanaDashboardNamesOnlyMetricsTheWorkersServe) {
  std::ifstream in(KCL_SOURCE_DIR "/docs/grafana/kcl-dashboard.json");
  json dashboard = json::parse(in, nullptr, false);
  ASSERT_TRUE(dashboard.is_object()) << "docs/grafana/kcl-dashboard.json is not JSON";
  std::vector<std::string> exprs;
  for (const auto& panel : dashboard["panels"]) {
    for (const auto& t : panel["targets"]) exprs.push_back(t.value("expr", ""));
  }
  for (const auto& v : dashboard["templating"]["list"]) {
    if (v.contains("definition")) exprs.push_back(v.value("definition", ""));
  }
  ASSERT_GE(exprs.size(), 10u);
  std::set<std::string> named;
  static const std::regex metric("kcl_[a-z0-9_]+");
  for (const auto& e : exprs) {
    for (auto it = std::sregex_iterator(e.begin(), e.end(), metric); it != std::sregex_iterator();
         ++it) {
      named.insert(it->str());
    }
  }
  EXPECT_TRUE(named.count("kcl_shard_stalled"));
  // Some are served only once something happened: the shards stalled, then (the hold
  // lifted) records processed and checkpointed. Wait for each in turn.
  std::set<std::string> served, missing;
  auto read_served = [&] {
    for (int port : ports_) {
      if (auto text = get(port, "/metrics")) {
        auto names = sample_names(*text);
        served.insert(names.begin(), names.end());
      }
    }
  };
  ASSERT_TRUE(eventually(
      [&] {
        read_served();
        return served.count("kcl_shard_stalled") > 0;
      },
      60s));
  fs::remove(hold_);
  eventually(
      [&] {
        read_served();
        missing.clear();
        for (const auto& name : named) {
          if (!served.count(name) && !kOnlyAfterAnEvent.count(name)) missing.insert(name);
        }
        return missing.empty();
      },
      60s);
  for (const auto& name : missing) {
    ADD_FAILURE() << name << " is named by the dashboard but no worker serves it";
  }
  std::printf("[ note ] the dashboard names %zu metrics; the workers serve %zu sample names\n",
              named.size(), served.size());
}

}  // namespace
}  // namespace kcl::cli
