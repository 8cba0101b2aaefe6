// StatusServer without emulators: address parsing, the fleet view's shard states, and the
// endpoints' answers (readiness with a reason, 404 with the paths, status.json contents).
#include "observability/status_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <nlohmann/json.hpp>

namespace kcl::observability {
namespace {

Lease lease(std::string key, std::optional<std::string> owner, ExtendedSequenceNumber cp,
            std::vector<std::string> parents = {}) {
  Lease l;
  l.lease_key = std::move(key);
  l.lease_owner = std::move(owner);
  l.checkpoint = std::move(cp);
  l.parent_shard_ids = std::move(parents);
  return l;
}

// Sources serving `leases` for worker w1 of application "app" on stream "s".
StatusSources sources(std::shared_ptr<metrics::MetricsRegistry> registry, std::vector<Lease> leases,
                      std::function<HealthState()> health) {
  StatusSources src;
  src.application = "app";
  src.stream = "s";
  src.worker_id = "w1";
  src.registry = std::move(registry);
  src.list_leases = [leases = std::move(leases)] { return Result<std::vector<Lease>>(leases); };
  src.health = std::move(health);
  return src;
}

// A server on a free loopback port, started; null when it did not start.
std::unique_ptr<StatusServer> serving(StatusSources src) {
  StatusServerConfig cfg;
  cfg.address = "127.0.0.1:0";
  auto server = std::make_unique<StatusServer>(cfg, std::move(src));
  Status s = server->start();
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? std::move(server) : nullptr;
}

TEST(StatusServer, ParsesAddresses) {
  EXPECT_EQ(parse_http_address("9400").value(), std::make_pair(std::string("127.0.0.1"), 9400));
  EXPECT_EQ(parse_http_address(":9400").value(), std::make_pair(std::string("127.0.0.1"), 9400));
  EXPECT_EQ(parse_http_address("0.0.0.0:80").value(), std::make_pair(std::string("0.0.0.0"), 80));
  EXPECT_EQ(parse_http_address("[::1]:9400").value(), std::make_pair(std::string("::1"), 9400));
  EXPECT_FALSE(parse_http_address("").ok());
  EXPECT_FALSE(parse_http_address("host:").ok());
  EXPECT_FALSE(parse_http_address("host:70000").ok());
  EXPECT_FALSE(parse_http_address("[::1]9400").ok());
}

TEST(StatusServer, FleetViewStates) {
  std::vector<Lease> leases = {
      lease("p", std::nullopt, ExtendedSequenceNumber::shard_end()),
      lease("q", "w1", ExtendedSequenceNumber("123")),
      lease("c1", "w1", ExtendedSequenceNumber::trim_horizon(), {"p"}),
      lease("c2", "w2", ExtendedSequenceNumber::trim_horizon(), {"q"}),
      lease("free", std::nullopt, ExtendedSequenceNumber::latest()),
  };
  FleetView v = fleet_view(leases);
  std::map<std::string, std::string> state;
  for (const auto& s : v.shards) state[s.shard_id] = s.state;
  EXPECT_EQ(state["p"], "ended");
  EXPECT_EQ(state["q"], "reading");
  EXPECT_EQ(state["c1"], "reading");
  EXPECT_EQ(state["c2"], "waiting on parent");
  EXPECT_EQ(state["free"], "unassigned");
  EXPECT_EQ(v.workers["w1"], 2);
  EXPECT_EQ(v.workers["w2"], 1);
}

// Two streams through one table, with the same shard ids: a child waits on its own stream's
// parent, and each shard carries its stream and its key in this worker's metric series.
TEST(StatusServer, FleetViewOfAMultiStreamTable) {
  const std::string a = "123456789012:orders:1700000000:";
  const std::string b = "123456789012:audit:1700000001:";
  std::vector<Lease> leases = {
      lease(a + "shardId-0", std::nullopt, ExtendedSequenceNumber::shard_end()),
      lease(a + "shardId-1", "w1", ExtendedSequenceNumber::trim_horizon(), {"shardId-0"}),
      lease(b + "shardId-0", "w2", ExtendedSequenceNumber("5")),
      lease(b + "shardId-1", "w2", ExtendedSequenceNumber::trim_horizon(), {"shardId-0"}),
  };
  FleetView v = fleet_view(leases);
  std::map<std::string, const ShardView*> by_key;
  for (const auto& s : v.shards) by_key[s.shard_id] = &s;
  EXPECT_EQ(by_key.at(a + "shardId-1")->state, "reading");
  EXPECT_EQ(by_key.at(b + "shardId-1")->state, "waiting on parent");
  EXPECT_EQ(by_key.at(b + "shardId-1")->stream, "audit");
  EXPECT_EQ(by_key.at(b + "shardId-1")->series_key, "audit/shardId-1");
  EXPECT_EQ(by_key.at("123456789012:orders:1700000000:shardId-0")->stream, "orders");
}

// A stalled shard of this worker: /readyz 200 "degraded" naming it, and its `stalled` object
// in /status.json (null for the others).
TEST(StatusServer, StalledShardsDegradeReadinessAndShowInStatusJson) {
  auto registry = std::make_shared<metrics::MetricsRegistry>();
  StatusSources src = sources(
      registry,
      {lease("q", "w1", ExtendedSequenceNumber("123")),
       lease("r", "w1", ExtendedSequenceNumber("7")),
       lease("free", std::nullopt, ExtendedSequenceNumber::latest()),
       lease("done", std::nullopt, ExtendedSequenceNumber::shard_end())},
      [] {
        HealthState h;
        h.ready = true;
        h.stalled.push_back({"q", "processor_callback", "process_records running for 75 s", 1234});
        return h;
      });
  auto started = serving(src);
  ASSERT_TRUE(started);
  StatusServer& server = *started;
  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  auto ready = nlohmann::json::parse(r->body);
  EXPECT_EQ(ready["status"], "degraded");
  ASSERT_EQ(ready["stalled"].size(), 1u);
  EXPECT_EQ(ready["stalled"][0]["shard"], "q");
  EXPECT_EQ(ready["stalled"][0]["cause"], "processor_callback");
  EXPECT_EQ(ready["stalled"][0]["since_ms"], 1234);

  server.refresh();
  auto j = nlohmann::json::parse(server.status_json());
  std::map<std::string, nlohmann::json> stalled;
  for (const auto& s : j["shards"]) stalled[s["shard_id"]] = s["stalled"];
  EXPECT_EQ(stalled["q"], (nlohmann::json{{"cause", "processor_callback"},
                                          {"detail", "process_records running for 75 s"},
                                          {"since_ms", 1234}}));
  EXPECT_TRUE(stalled["r"].is_null());
  EXPECT_TRUE(stalled["free"].is_null());
  server.stop();
}

// A worker's endpoint reads the lease table only for a fleet view someone asked for: its own
// report comes from its consumers (shard_states) and registry. Refreshes with nobody looking
// read nothing; a request for the fleet view reads the table, and the local report names the
// worker's shards (a multi-stream key with its stream's series) without any read.
TEST(StatusServer, ReadsTheLeaseTableOnlyForAFleetViewSomeoneAskedFor) {
  auto registry = std::make_shared<metrics::MetricsRegistry>();
  const std::string ms = "123456789012:orders:1700000000:shardId-7";
  auto listed = std::make_shared<std::atomic<int>>(0);
  StatusSources src = sources(registry, {lease("q", "w1", ExtendedSequenceNumber("123"))}, [] {
    HealthState h;
    h.ready = true;
    return h;
  });
  src.list_leases = [listed] {
    listed->fetch_add(1);
    return Result<std::vector<Lease>>(
        std::vector<Lease>{lease("q", "w1", ExtendedSequenceNumber("1"))});
  };
  src.shard_states = [ms] {
    return std::map<std::string, std::string>{{"q", "processing"}, {ms, "processing"}};
  };
  auto started = serving(src);
  ASSERT_TRUE(started);
  StatusServer& server = *started;
  for (int i = 0; i < 3; ++i) server.refresh();
  EXPECT_EQ(listed->load(), 0);
  EXPECT_EQ(server.table_reads(), 0u);
  auto local = nlohmann::json::parse(server.local_json());
  std::map<std::string, std::string> states;
  for (const auto& s : local["shards"]) states[s["shard_id"]] = s["consumer_state"];
  EXPECT_EQ(states["q"], "processing");
  EXPECT_EQ(states[ms], "processing");

  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Get("/status.json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_GE(listed->load(), 1);
  auto fleet = nlohmann::json::parse(r->body);
  ASSERT_FALSE(fleet["shards"].empty()) << r->body;
  EXPECT_EQ(fleet["shards"][0]["shard_id"], "q");
  server.stop();
}

TEST(StatusServer, EndpointsAnswerFromSnapshots) {
  auto registry = std::make_shared<metrics::MetricsRegistry>();
  MetricTag tag{"shard", "q"};
  registry->count("consumer.records_processed", 42, MetricTags(&tag, 1));
  std::atomic<bool> ready{false};
  StatusSources src = sources(registry, {lease("q", "w1", ExtendedSequenceNumber("123"))}, [&] {
    HealthState h;
    h.ready = ready.load();
    if (!h.ready) h.ready_reason = "syncing shards";
    return h;
  });
  auto started = serving(src);
  ASSERT_TRUE(started);
  StatusServer& server = *started;
  httplib::Client c("127.0.0.1", server.port());

  auto r = c.Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, R"({"reason":"syncing shards","status":"not ready"})");
  ready = true;
  r = c.Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);

  r = c.Get("/no/such/path");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(r->body.find("/metrics"), std::string::npos);

  r = c.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("kcl_records_processed_total{shard=\"q\"} 42"), std::string::npos);

  server.refresh();
  auto j = nlohmann::json::parse(server.status_json());
  EXPECT_EQ(j["shards"][0]["shard_id"], "q");
  EXPECT_EQ(j["shards"][0]["state"], "reading");
  EXPECT_EQ(j["workers"][0]["worker_id"], "w1");
  EXPECT_EQ(j["workers"][0]["self"], true);

  // Headers beyond cpp-httplib's limit are refused, and the server goes on answering.
  auto big = c.Get("/metrics", {{"X-Big", std::string(20000, 'x')}});
  if (big) {
    EXPECT_GE(big->status, 400);
  }
  r = c.Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);

  r = c.Get("/status");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("<table id=\"shards\">"), std::string::npos);
  // Nothing loaded from elsewhere (the SVG namespace URI is a name, not a load).
  for (const char* ref : {"src=", "href=", "@import", "url("}) {
    EXPECT_EQ(r->body.find(ref), std::string::npos) << ref;
  }
}

}  // namespace
}  // namespace kcl::observability
