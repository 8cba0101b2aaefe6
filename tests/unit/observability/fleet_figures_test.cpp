// The fleet view's pieces: a worker's own report survives serialisation (and reports with
// fields this version does not know, or without fields it knows, still read), the merge gives
// each shard its owner's figures (or the newest report that has it while a lease moves) and
// each worker its health or why it is unreachable, /proc/self/stat is read right, the
// advertised address is formed right (an endpoint on every interface publishes the host
// name), and per-shard figures are sampled from a registry.
#include "observability/fleet_figures.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>

#include "leases/in_memory_lease_store.h"
#include "observability/local_figures.h"
#include "observability/peer_fetch.h"
#include "observability/process_figures.h"
#include "observability/worker_endpoint.h"

namespace kcl::observability {
namespace {

using json = nlohmann::json;

LocalReport report(const std::string& worker, std::int64_t at,
                   std::vector<std::pair<std::string, double>> lags) {
  LocalReport r;
  r.generated_at_ms = at;
  r.worker.worker_id = worker;
  r.worker.version = "0.1.0";
  r.worker.ready = true;
  r.worker.process.cpu_seconds = 1.5;
  r.worker.process.cpu_percent = 12.5;
  r.worker.process.rss_bytes = 64 << 20;
  r.worker.process.threads = 17;
  for (const auto& [shard, lag] : lags) {
    ShardFigures f;
    f.shard_id = shard;
    f.millis_behind = lag;
    f.records_per_second = {1, 2, lag / 10};
    f.last_progress_ms = at - 100;
    f.consumer_state = "processing";
    r.shards.push_back(f);
  }
  return r;
}

Lease lease(const std::string& key, const std::string& owner) {
  Lease l;
  l.lease_key = key;
  if (!owner.empty()) l.lease_owner = owner;
  return l;
}

json by_id(const json& list, const char* field, const std::string& id) {
  for (const json& x : list) {
    if (x.value(field, "") == id) return x;
  }
  return json();
}

TEST(LocalReportJson, RoundTripsEveryField) {
  const LocalReport r = report("w1", 1000, {{"shard-1", 250}, {"shard-2", 0}});
  auto back = parse_local_report(json(r).dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->generated_at_ms, 1000);
  EXPECT_EQ(back->worker.worker_id, "w1");
  EXPECT_EQ(back->worker.version, "0.1.0");
  EXPECT_TRUE(back->worker.ready);
  EXPECT_EQ(back->worker.process.threads, 17);
  EXPECT_EQ(back->worker.process.rss_bytes, 64 << 20);
  ASSERT_TRUE(back->worker.process.cpu_percent.has_value());
  EXPECT_DOUBLE_EQ(*back->worker.process.cpu_percent, 12.5);
  ASSERT_EQ(back->shards.size(), 2u);
  EXPECT_EQ(back->shards[0].shard_id, "shard-1");
  EXPECT_EQ(back->shards[0].millis_behind, 250);
  EXPECT_EQ(back->shards[0].records_per_second, (std::vector<double>{1, 2, 25}));
  EXPECT_EQ(back->shards[0].last_progress_ms, 900);
  EXPECT_EQ(back->shards[0].consumer_state, "processing");
}

TEST(LocalReportJson, UnknownFieldsAreIgnoredAndMissingOnesKeepDefaults) {
  auto r = parse_local_report(
      R"({"scope":"local","generated_at_ms":5,"worker":{"worker_id":"w"},
          "shards":[{"shard_id":"s","millis_behind":null,"stalled":{"cause":"x"}}],
          "dead_lettered":3})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->worker.worker_id, "w");
  EXPECT_TRUE(r->worker.live);
  EXPECT_FALSE(r->worker.process.cpu_percent.has_value());
  ASSERT_EQ(r->shards.size(), 1u);
  EXPECT_FALSE(r->shards[0].millis_behind.has_value());
  EXPECT_TRUE(r->shards[0].records_per_second.empty());
}

TEST(LocalReportJson, BadReportsAreErrorsSayingWhat) {
  auto not_json = parse_local_report("<html>");
  ASSERT_FALSE(not_json.ok());
  EXPECT_NE(not_json.status().message().find("not a JSON object"), std::string::npos);
  auto fleet = parse_local_report(R"({"scope":"fleet","shards":[]})");
  ASSERT_FALSE(fleet.ok());
  EXPECT_NE(fleet.status().message().find("scope"), std::string::npos);
  auto wrong = parse_local_report(R"({"scope":"local","shards":[{"millis_behind":"fast"}]})");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("the peer's report"), std::string::npos)
      << wrong.status();
}

TEST(FleetJson, EveryShardGetsItsOwnersFiguresAndEveryWorkerItsHealth) {
  const FleetView view =
      fleet_view({lease("s1", "a"), lease("s2", "b"), lease("s3", "c"), lease("s4", "")});
  const LocalReport self = report("a", 10'000, {{"s1", 10}});
  std::vector<PeerReport> peers(3);
  peers[0] = {"a", "http://127.0.0.1:1", std::nullopt, ""};  // self, in the directory too
  peers[1] = {"b", "http://127.0.0.1:2", report("b", 9'000, {{"s2", 20}}), ""};
  peers[2] = {"c", "http://127.0.0.1:3", std::nullopt, "connection refused"};
  FleetSources src{"the coordination table", 10'500};
  const json out = fleet_json(view, "a", &self, peers, src);

  const json s1 = by_id(out["shards"], "shard_id", "s1");
  EXPECT_EQ(s1["millis_behind"], 10);
  EXPECT_EQ(s1["figures_from"], "a");
  EXPECT_EQ(s1["figures_age_ms"], 500);
  EXPECT_EQ(s1["consumer_state"], "processing");
  EXPECT_EQ(s1["owner"], "a");
  EXPECT_EQ(s1["state"], "reading");
  const json s2 = by_id(out["shards"], "shard_id", "s2");
  EXPECT_EQ(s2["millis_behind"], 20);
  EXPECT_EQ(s2["figures_from"], "b");
  EXPECT_EQ(s2["figures_age_ms"], 1500);
  EXPECT_EQ(s2["records_per_second"], json({1, 2, 2}));
  for (const char* none : {"s3", "s4"}) {
    const json s = by_id(out["shards"], "shard_id", none);
    EXPECT_TRUE(s["millis_behind"].is_null()) << none;
    EXPECT_TRUE(s["figures_from"].is_null()) << none;
    EXPECT_EQ(s["records_per_second"], json::array()) << none;
  }

  ASSERT_EQ(out["workers"].size(), 3u) << out["workers"].dump();
  const json a = by_id(out["workers"], "worker_id", "a");
  EXPECT_TRUE(a["self"].get<bool>());
  EXPECT_TRUE(a["reachable"].get<bool>());
  EXPECT_EQ(a["status_url"], "http://127.0.0.1:1");
  EXPECT_EQ(a["health"]["process"]["threads"], 17);
  const json b = by_id(out["workers"], "worker_id", "b");
  EXPECT_TRUE(b["reachable"].get<bool>());
  EXPECT_EQ(b["age_ms"], 1500);
  EXPECT_EQ(b["leases"], 1);
  const json c = by_id(out["workers"], "worker_id", "c");
  EXPECT_FALSE(c["reachable"].get<bool>());
  EXPECT_EQ(c["error"], "connection refused");
  EXPECT_TRUE(c["health"].is_null());

  EXPECT_EQ(out["fleet"]["workers"], 3);
  EXPECT_EQ(out["fleet"]["workers_reachable"], 2);
  EXPECT_EQ(out["fleet"]["shards"], 4);
  EXPECT_EQ(out["fleet"]["shards_with_figures"], 2);
  EXPECT_EQ(out["fleet"]["oldest_report_ms"], 1500);
  EXPECT_EQ(out["fleet"]["directory"], "the coordination table");
}

TEST(FleetJson, AMovingLeaseShowsTheNewestReportThatHasItAndIdlePeersAreListed) {
  // The table says c owns s1 already; c's report does not have it yet; a's (old) and b's
  // (newer) still do.
  const FleetView view = fleet_view({lease("s1", "c")});
  const LocalReport self = report("a", 1'000, {{"s1", 111}});
  std::vector<PeerReport> peers = {{"b", "u", report("b", 2'000, {{"s1", 222}}), ""},
                                   {"c", "u", report("c", 3'000, {}), ""},
                                   {"idle", "u", report("idle", 3'000, {}), ""}};
  const json out = fleet_json(view, "a", &self, peers, {"d", 3'000});
  const json s1 = by_id(out["shards"], "shard_id", "s1");
  EXPECT_EQ(s1["millis_behind"], 222);
  EXPECT_EQ(s1["figures_from"], "b");
  const json idle = by_id(out["workers"], "worker_id", "idle");
  ASSERT_TRUE(idle.is_object()) << out["workers"].dump();
  EXPECT_EQ(idle["leases"], 0);
  EXPECT_TRUE(idle["reachable"].get<bool>());
}

TEST(FleetJson, WithoutASelfReportOnlyPeersCount) {
  const FleetView view = fleet_view({lease("s1", "b")});
  std::vector<PeerReport> peers = {{"b", "u", report("b", 2'000, {{"s1", 5}}), ""}};
  const json out = fleet_json(view, "", nullptr, peers, {"d", 2'000});
  ASSERT_EQ(out["workers"].size(), 1u) << out["workers"].dump();
  EXPECT_EQ(out["workers"][0]["worker_id"], "b");
  EXPECT_FALSE(out["workers"][0]["self"].get<bool>());
  EXPECT_EQ(out["shards"][0]["millis_behind"], 5);
}

TEST(ProcStat, FieldsAreCountedFromTheLastParenthesis) {
  // comm "(a b) c)" holds spaces and parentheses; utime 300 + stime 100 ticks at 100/s,
  // 9 threads, 2500 pages of 4096 bytes.
  const std::string stat =
      "4242 ((a b) c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 300 100 0 0 20 0 9 0 12345 "
      "123456789 2500 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
  auto p = parse_proc_stat(stat, 100, 4096);
  ASSERT_TRUE(p.has_value());
  EXPECT_DOUBLE_EQ(p->cpu_seconds, 4.0);
  EXPECT_EQ(p->threads, 9);
  EXPECT_EQ(p->rss_bytes, 2500LL * 4096);
  EXPECT_FALSE(parse_proc_stat("garbage", 100, 4096).has_value());
  EXPECT_FALSE(parse_proc_stat("1 (x) S 1 2", 100, 4096).has_value());
}

TEST(ProcStat, TheSamplerReadsThisProcess) {
  ProcessSampler sampler;
  const ProcessFigures first = sampler.sample();
  EXPECT_GT(first.threads, 0);
  EXPECT_GT(first.rss_bytes, 0);
  EXPECT_FALSE(first.cpu_percent.has_value());
  volatile double sink = 0;
  for (int i = 0; i < 2'000'000; ++i) sink = sink + i * 0.5;
  const ProcessFigures second = sampler.sample();
  ASSERT_TRUE(second.cpu_percent.has_value());
  EXPECT_GE(*second.cpu_percent, 0);
  EXPECT_GE(second.cpu_seconds, first.cpu_seconds);
}

TEST(AdvertisedUrl, FormsAnUrlFromHostPortOrTheBoundOne) {
  EXPECT_EQ(advertised_url("", 9400, "http://127.0.0.1:9400"), "http://127.0.0.1:9400");
  EXPECT_EQ(advertised_url("10.1.2.3", 9400, "x"), "http://10.1.2.3:9400");
  EXPECT_EQ(advertised_url("worker-7.internal:9500", 9400, "x"), "http://worker-7.internal:9500");
  EXPECT_EQ(advertised_url("host:0", 9400, "x"), "http://host:9400");
  EXPECT_EQ(advertised_url("[fd00::1]:9500", 9400, "x"), "http://[fd00::1]:9500");
  EXPECT_EQ(advertised_url("http://lb.example:80/", 9400, "x"), "http://lb.example:80");
}

// An endpoint listening on every interface without an advertise address published
// http://127.0.0.1:PORT (0.0.0.0) or http://[::]:PORT (::): no peer on another host reaches
// either. It publishes this host's name, which answers (here too), and says no warning.
TEST(AdvertisedUrl, AnEndpointOnEveryInterfacePublishesTheHostName) {
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof name - 1), 0);
  const std::string host = name;
  if (host.empty() || host == "localhost") GTEST_SKIP() << "this host has no name to publish";
  for (const std::string address : {"0.0.0.0:0", "[::]:0"}) {
    WorkerEndpoint endpoint(address, nullptr);
    EndpointSources sources;
    sources.store = std::make_shared<leases::InMemoryLeaseStore>();
    sources.health = [] { return HealthState{}; };
    const Status started = endpoint.start(std::move(sources));
    if (!started.ok() && address.front() == '[') continue;  // no IPv6 here
    ASSERT_TRUE(started.ok()) << started;
    const std::string bound = endpoint.url();
    const std::string port = bound.substr(bound.rfind(':') + 1);
    EXPECT_EQ(endpoint.advertised(), "http://" + host + ":" + port) << address;
    EXPECT_EQ(endpoint.advertise_warning(), "") << address;
    auto live = http_get(endpoint.advertised(), "/healthz", std::chrono::seconds(5));
    EXPECT_TRUE(live.ok()) << address << ": " << live.status();
    auto local = http_get(bound, "/healthz", std::chrono::seconds(5));
    EXPECT_TRUE(local.ok()) << address << " at " << bound << ": " << local.status();
    endpoint.stop();
  }
}

TEST(AdvertisedUrl, TheHostNameIsPublishedOnlyForAWildcardAddressWithoutAnAdvertiseOne) {
  const std::string bound = "http://127.0.0.1:9400";
  EXPECT_EQ(published_url("0.0.0.0:9400", "", "worker-7", 9400, bound), "http://worker-7:9400");
  EXPECT_EQ(published_url("[::]:0", "", "worker-7", 9400, bound), "http://worker-7:9400");
  EXPECT_EQ(published_url("0.0.0.0:9400", "lb.example:80", "worker-7", 9400, bound),
            "http://lb.example:80");
  EXPECT_EQ(published_url("127.0.0.1:9400", "", "worker-7", 9400, bound), bound);
  EXPECT_EQ(published_url("9400", "", "worker-7", 9400, bound), bound);
  EXPECT_EQ(published_url("0.0.0.0:9400", "", "", 9400, bound), bound) << "no host name";
  EXPECT_EQ(wildcard_address_warning("0.0.0.0:9400", "", "http://worker-7:9400"), "");
}

// Listening on every interface with no advertise address and no host name to publish: the
// published http://127.0.0.1:PORT reaches each peer itself; said once at start (the worker
// logs it).
TEST(AdvertisedUrl, ListeningOnEveryInterfaceWithoutAnAdvertiseAddressIsWarnedOf) {
  const std::string published = "http://127.0.0.1:9400";
  for (const char* address : {"0.0.0.0:9400", "[::]:9400"}) {
    const std::string w = wildcard_address_warning(address, "", published);
    EXPECT_NE(w.find(address), std::string::npos) << w;
    EXPECT_NE(w.find(published), std::string::npos) << w;
    EXPECT_NE(w.find("http_advertise_address"), std::string::npos) << w;
  }
  EXPECT_EQ(wildcard_address_warning("0.0.0.0:9400", "10.1.2.3", published), "");
  EXPECT_EQ(wildcard_address_warning("127.0.0.1:9400", "", published), "");
  EXPECT_EQ(wildcard_address_warning("9400", "", published), "") << "a bare port: loopback";
  EXPECT_EQ(wildcard_address_warning("10.1.2.3:9400", "", "http://10.1.2.3:9400"), "");
}

TEST(LocalFiguresSampling, RatesLagAndLastProgressPerShard) {
  metrics::MetricsRegistry registry;
  LocalFigures figures(3);
  const std::array<MetricTag, 1> s1{{{"shard", "s1"}}};
  const std::array<MetricTag, 2> s2{{{"stream", "orders"}, {"shard", "s2"}}};
  const std::vector<OwnShard> own = {{"s1", "s1", "processing"},
                                     {"acct:orders:1:s2", "orders/s2", "initializing"},
                                     {"s3", "s3", ""}};
  const auto t0 = std::chrono::steady_clock::time_point(std::chrono::seconds(100));
  registry.count("consumer.records_processed", 10, s1);
  registry.gauge("consumer.millis_behind_latest", 700, s1);
  auto first = figures.sample(registry, own, t0, 50'000);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].millis_behind, 700);
  EXPECT_TRUE(first[0].records_per_second.empty());  // no rate from one sample
  EXPECT_EQ(first[0].last_progress_ms, 50'000);
  EXPECT_EQ(first[0].consumer_state, "processing");
  EXPECT_FALSE(first[1].last_progress_ms.has_value());

  registry.count("consumer.records_processed", 20, s1);
  registry.count("consumer.records_processed", 8, s2);
  auto second = figures.sample(registry, own, t0 + std::chrono::seconds(2), 52'000);
  EXPECT_EQ(second[0].records_per_second, (std::vector<double>{10}));
  EXPECT_EQ(second[1].shard_id, "acct:orders:1:s2");
  EXPECT_EQ(second[1].records_per_second, (std::vector<double>{4}));
  EXPECT_EQ(second[1].last_progress_ms, 52'000);
  EXPECT_FALSE(second[2].millis_behind.has_value());

  for (int i = 0; i < 5; ++i) {
    figures.sample(registry, own, t0 + std::chrono::seconds(4 + 2 * i), 54'000 + 2'000 * i);
  }
  auto later = figures.sample(registry, own, t0 + std::chrono::seconds(20), 70'000);
  EXPECT_EQ(later[0].records_per_second.size(), 3u);  // the history kept
  EXPECT_EQ(later[0].records_per_second.back(), 0);
  EXPECT_EQ(later[0].last_progress_ms, 52'000);  // nothing processed since
}

}  // namespace
}  // namespace kcl::observability
