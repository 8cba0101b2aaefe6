// Two status servers on loopback (in-memory sources, real HTTP between them): worker A's
// /status.json shows worker B's shard figures and health, fetched from B's
// /status.json?scope=local; a peer that cannot be reached is listed with the error while the
// rest of the view is served; a change of B's figures shows on A's view within a few refreshes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "observability/peer_fetch.h"
#include "observability/status_server.h"

namespace kcl::observability {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

Lease owned_lease(const std::string& key, const std::string& owner) {
  Lease l;
  l.lease_key = key;
  l.lease_owner = owner;
  return l;
}

// A port nothing listens on: bound, then closed.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return 1;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct Node {
  std::shared_ptr<metrics::MetricsRegistry> registry = std::make_shared<metrics::MetricsRegistry>();
  std::unique_ptr<StatusServer> server;
};

class FleetServers : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<Lease> leases = {owned_lease("s1", "A"), owned_lease("s2", "A"),
                                       owned_lease("s3", "B"), owned_lease("s4", "B")};
    for (const char* id : {"A", "B"}) {
      Node& n = nodes_[id];
      StatusServerConfig config;
      config.address = "127.0.0.1:0";
      config.refresh_interval = 100ms;
      config.peer_timeout = 500ms;
      StatusSources src;
      src.application = "app";
      src.stream = "orders";
      src.worker_id = id;
      src.registry = n.registry;
      src.list_leases = [leases]() -> Result<std::vector<Lease>> { return leases; };
      src.health = [] {
        HealthState h;
        h.ready = true;
        return h;
      };
      src.peers = [this]() -> Result<std::vector<PeerAddress>> { return directory_; };
      src.peers_note = "test directory";
      n.server = std::make_unique<StatusServer>(config, std::move(src));
      ASSERT_TRUE(n.server->start().ok());
    }
    directory_ = {{"A", nodes_["A"].server->url()},
                  {"B", nodes_["B"].server->url()},
                  {"C", "http://127.0.0.1:" + std::to_string(closed_port())}};
  }

  void set_lag(const std::string& node, const std::string& shard, double lag) {
    const std::array<MetricTag, 1> tags{{{"shard", shard}}};
    nodes_[node].registry->gauge("consumer.millis_behind_latest", lag, tags);
  }

  json get(const std::string& node, const std::string& path) {
    auto body = http_get(nodes_[node].server->url(), path, 5000ms);
    EXPECT_TRUE(body.ok()) << body.status();
    return body.ok() ? json::parse(*body, nullptr, false) : json();
  }

  static json find(const json& list, const char* field, const std::string& id) {
    for (const json& x : list) {
      if (x.value(field, "") == id) return x;
    }
    return json();
  }

  std::map<std::string, Node> nodes_;
  std::vector<PeerAddress> directory_;
};

// Text shown on the page that is not UTF-8 (a processor's bad checkpoint argument in a
// stall's detail, a warning quoting it) is served with U+FFFD in its place; the refresh
// thread threw, which ended the worker.
TEST(StatusServerText, BytesThatAreNotUtf8AreServedNotFatal) {
  StatusServerConfig config;
  config.address = "127.0.0.1:0";
  config.refresh_interval = 100ms;
  StatusSources src;
  src.application = "app";
  src.stream = "orders";
  src.worker_id = "A";
  src.registry = std::make_shared<metrics::MetricsRegistry>();
  src.list_leases = []() -> Result<std::vector<Lease>> { return std::vector<Lease>{}; };
  src.health = [] {
    HealthState h;
    h.ready = true;
    h.warnings = {"checkpoint rejected: sequence number \"\xff\xfe\" is not a number"};
    return h;
  };
  StatusServer server(config, std::move(src));
  ASSERT_TRUE(server.start().ok());
  auto body = http_get(server.url(), "/status.json?scope=local", 5000ms);
  ASSERT_TRUE(body.ok()) << body.status();
  const json j = json::parse(*body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << *body;
  const std::string warning = j["health"]["warnings"][0];
  EXPECT_NE(warning.find("\xef\xbf\xbd"), std::string::npos) << warning;
}

TEST_F(FleetServers, AnyWorkerShowsEveryShardsFiguresAndEveryWorkersHealth) {
  set_lag("A", "s1", 100);
  set_lag("B", "s3", 300);
  set_lag("B", "s4", 400);
  // B's own report: its shards only, its process figures.
  const json local = get("B", "/status.json?scope=local");
  EXPECT_EQ(local["scope"], "local");
  EXPECT_EQ(local["worker"]["worker_id"], "B");
  EXPECT_GT(local["worker"]["process"]["threads"].get<int>(), 0);
  ASSERT_EQ(local["shards"].size(), 2u) << local.dump();

  // A's fleet view, once B's figures have been sampled and fetched.
  json fleet;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    fleet = get("A", "/status.json");
    if (find(fleet["shards"], "shard_id", "s4")["millis_behind"] == 400) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(fleet["scope"], "fleet");
  EXPECT_EQ(find(fleet["shards"], "shard_id", "s1")["millis_behind"], 100);
  EXPECT_EQ(find(fleet["shards"], "shard_id", "s3")["millis_behind"], 300);
  EXPECT_EQ(find(fleet["shards"], "shard_id", "s3")["figures_from"], "B");
  EXPECT_EQ(find(fleet["shards"], "shard_id", "s4")["millis_behind"], 400);
  const json b = find(fleet["workers"], "worker_id", "B");
  EXPECT_TRUE(b["reachable"].get<bool>()) << b.dump();
  EXPECT_EQ(b["health"]["version"], local["worker"]["version"]);
  EXPECT_GT(b["health"]["process"]["rss_bytes"].get<long long>(), 0);
  EXPECT_EQ(find(fleet["workers"], "worker_id", "A")["status_url"], directory_[0].url);
  const json c = find(fleet["workers"], "worker_id", "C");
  EXPECT_FALSE(c["reachable"].get<bool>()) << c.dump();
  EXPECT_NE(c["error"].get<std::string>().find("127.0.0.1"), std::string::npos) << c.dump();
  EXPECT_NE(c["error"].get<std::string>().find("worker 'C'"), std::string::npos) << c.dump();
  EXPECT_NE(c["error"].get<std::string>().find("connection failed"), std::string::npos) << c.dump();
  EXPECT_EQ(fleet["fleet"]["workers"], 3);
  EXPECT_EQ(fleet["fleet"]["workers_reachable"], 2);
  EXPECT_EQ(fleet["fleet"]["shards_with_figures"], 4);
  EXPECT_EQ(fleet["fleet"]["directory"], "test directory");

  // A change on B reaches A's view within a few refreshes.
  set_lag("B", "s3", 900);
  const auto changed = std::chrono::steady_clock::now();
  bool seen = false;
  while (!seen && std::chrono::steady_clock::now() < changed + 10s) {
    seen = find(get("A", "/status.json")["shards"], "shard_id", "s3")["millis_behind"] == 900;
    if (!seen) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(seen) << "B's new lag never reached A's view";
  std::printf("note: a change on B showed on A's view after %lld ms (refresh 100 ms)\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - changed)
                                         .count()));
}

// Workers listening on 0.0.0.0 without an advertise address all publish
// http://127.0.0.1:PORT: B's address here is A's own endpoint. A's view took its own report
// for B's and showed A's figures and health under B's name; now B is unreachable, with an
// error naming both workers.
TEST_F(FleetServers, APeerWhoseAddressAnswersWithAnotherWorkersReportIsUnreachable) {
  directory_ = {{"A", nodes_["A"].server->url()}, {"B", nodes_["A"].server->url()}};
  set_lag("A", "s1", 100);
  json fleet, b;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    fleet = get("A", "/status.json");
    b = find(fleet["workers"], "worker_id", "B");
    if (b.contains("reachable") && fleet["fleet"]["workers"] == 2) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(b.contains("reachable")) << fleet.dump();
  EXPECT_FALSE(b["reachable"].get<bool>()) << b.dump();
  const std::string error = b.value("error", "");
  EXPECT_NE(error.find("report of worker 'A'"), std::string::npos) << b.dump();
  EXPECT_NE(error.find("not of 'B'"), std::string::npos) << b.dump();
  EXPECT_NE(error.find(nodes_["A"].server->url()), std::string::npos) << b.dump();
  EXPECT_EQ(fleet["fleet"]["workers_reachable"], 1);
  EXPECT_EQ(find(fleet["shards"], "shard_id", "s1")["millis_behind"], 100);
  EXPECT_TRUE(find(fleet["shards"], "shard_id", "s3")["millis_behind"].is_null());

  // B's own view, with the same directory: A's address is A's, so A is shown.
  const auto b_deadline = std::chrono::steady_clock::now() + 10s;
  json a;
  while (std::chrono::steady_clock::now() < b_deadline) {
    a = find(get("B", "/status.json")["workers"], "worker_id", "A");
    if (a.value("reachable", false)) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(a.value("reachable", false)) << a.dump();
}

TEST_F(FleetServers, WithoutADirectoryTheViewSaysWhyAndKeepsItsOwnFigures) {
  StatusServerConfig config;
  config.address = "127.0.0.1:0";
  config.refresh_interval = 100ms;
  StatusSources src;
  src.worker_id = "solo";
  src.registry = std::make_shared<metrics::MetricsRegistry>();
  src.list_leases = []() -> Result<std::vector<Lease>> {
    return std::vector<Lease>{owned_lease("s1", "solo"), owned_lease("s2", "other")};
  };
  src.health = [] { return HealthState{}; };
  src.peers_note = "none: no directory here";
  const std::array<MetricTag, 1> tags{{{"shard", "s1"}}};
  src.registry->gauge("consumer.millis_behind_latest", 42, tags);
  StatusServer server(config, std::move(src));
  ASSERT_TRUE(server.start().ok());
  auto body = http_get(server.url(), "/status.json", 5000ms);
  ASSERT_TRUE(body.ok()) << body.status();
  const json fleet = json::parse(*body);
  EXPECT_EQ(fleet["fleet"]["directory"], "none: no directory here");
  EXPECT_EQ(find(fleet["shards"], "shard_id", "s1")["millis_behind"], 42);
  EXPECT_TRUE(find(fleet["shards"], "shard_id", "s2")["millis_behind"].is_null());
  const json other = find(fleet["workers"], "worker_id", "other");
  EXPECT_FALSE(other["reachable"].get<bool>());
  EXPECT_EQ(other["error"], "no status endpoint known for this worker");
}

}  // namespace
}  // namespace kcl::observability
