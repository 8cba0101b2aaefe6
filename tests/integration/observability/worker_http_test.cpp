// The worker's HTTP endpoint against kinesalite + dynalite: a 2-worker fleet consumes N
// records; /metrics of both workers, parsed by python3-prometheus-client's parser, sums to N
// records and to the shard count in kcl_leases_held; health endpoints; bad requests (unknown
// path, oversize headers, a slow client) get clean answers and do not block others; the
// /status page rendered by headless Chromium shows every shard and worker, and follows a
// lease that moves.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "integration/observability/http_test_support.h"
#include "support/worker_test_support.h"

namespace kcl::worker_test {
namespace {

std::size_t rows_owned_by(const std::string& dom, const std::string& owner) {
  std::size_t n = 0;
  const std::string needle = "data-owner=\"" + owner + "\"";
  for (auto p = dom.find(needle); p != std::string::npos; p = dom.find(needle, p + 1)) ++n;
  return n;
}

class WorkerHttpTest : public WorkerTest {
 protected:
  WorkerConfig http_config(const std::string& id) const {
    WorkerConfig c = config(id);
    c.http_address = "127.0.0.1:0";
    return c;
  }
};

TEST_F(WorkerHttpTest, FleetMetricsHealthAbuseAndStatusPage) {
  constexpr int kShards = 4;
  constexpr std::size_t kRecords = 200;
  create_stream(kShards);
  const auto data = names("m", 0, kRecords);
  ASSERT_EQ(put(data).size(), kRecords);

  Worker a(http_config("A"), factory("A"));
  ASSERT_TRUE(a.start().ok());
  Worker b(http_config("B"), factory("B"));
  ASSERT_TRUE(b.start().ok());
  const std::string url_a = a.http_url();
  const std::string url_b = b.http_url();
  ASSERT_FALSE(url_a.empty());
  ASSERT_FALSE(url_b.empty());
  EXPECT_EQ(url_a.rfind("http://127.0.0.1:", 0), 0u) << url_a;

  ASSERT_TRUE(
      eventually([&] { return a.stats().leases_held == 2 && b.stats().leases_held == 2; }, 60s))
      << "A holds " << a.stats().leases_held << ", B holds " << b.stats().leases_held;
  ASSERT_TRUE(log_->wait_until(
      [&](const std::vector<Event>& ev) {
        for (const auto& d : data) {
          if (!EventLog::delivered(ev, d)) return false;
        }
        return true;
      },
      60s));

  // Every record counted once across the fleet (no duplicates in this run: nothing failed
  // over), and the leases add up to the shard count. The leases gauge is published by each
  // worker's lease threads, so wait for it to settle rather than read it once.
  // A lease stolen while the fleet balances may deliver a batch twice (the new owner resumes
  // from the last checkpoint); the counters count deliveries, so compare with the log's count,
  // which is N when nothing was delivered twice.
  std::string parsed;
  const std::size_t deliveries = EventLog::records(log_->events()).size();
  EXPECT_GE(deliveries, kRecords);
  const std::string want =
      "records=" + std::to_string(deliveries) + " leases=" + std::to_string(kShards) + "\n";
  EXPECT_TRUE(eventually(
      [&] {
        auto ma = get(url_a, "/metrics");
        auto mb = get(url_b, "/metrics");
        if (!ma || !mb || ma->status != 200 || mb->status != 200) return false;
        EXPECT_EQ(ma->get_header_value("Content-Type"), "text/plain; version=0.0.4");
        parsed = parse_fleet_metrics({ma->body, mb->body});
        return parsed == want;
      },
      30s))
      << parsed;
  {
    auto m = get(url_a, "/metrics");
    ASSERT_TRUE(m);
    for (const char* family :
         {"kcl_leases_taken_total", "kcl_processor_duration_seconds_bucket",
          "kcl_get_records_duration_seconds_count",
          "kcl_aws_requests_total{operation=\"GetRecords\",outcome=\"ok\","
          "service=\"Kinesis\"}",
          "kcl_millis_behind_latest{shard=", "kcl_bytes_processed_total{shard="}) {
      EXPECT_NE(m->body.find(family), std::string::npos) << family << " missing in\n" << m->body;
    }
  }

  // Health.
  for (const auto& url : {url_a, url_b}) {
    auto h = get(url, "/healthz");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    EXPECT_EQ(h->body, R"({"status":"live"})");
    auto r = get(url, "/readyz");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }

  // Abuse: an unknown path, oversize headers, a POST, a slow client.
  {
    auto r = get(url_a, "/nope");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404);
    EXPECT_NE(r->body.find("\"not found\""), std::string::npos) << r->body;
    auto big = get(url_a, "/metrics", {{"X-Big", std::string(20000, 'x')}});
    // Refused: an error status, or the connection closed without an answer.
    if (big) {
      EXPECT_GE(big->status, 400) << big->status;
    }
    Url u = split(url_a);
    httplib::Client c(u.host, u.port);
    auto post = c.Post("/metrics", "x", "text/plain");
    ASSERT_TRUE(post);
    EXPECT_EQ(post->status, 404);

    // Slow clients: half a request each, more of them than the server has threads; other
    // requests are still answered, and the worker keeps working.
    std::vector<int> slow;
    for (int i = 0; i < 12; ++i) {  // more than the 8 request threads
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<std::uint16_t>(u.port));
      ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
      ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
      const char partial[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
      ASSERT_GT(::send(fd, partial, sizeof partial - 1, 0), 0);
      slow.push_back(fd);
    }
    // The slow clients hold request threads until the server's timeouts (about 4 s); a request
    // queued behind them is answered once they are cut off, well within its own timeout.
    auto during = get(url_a, "/healthz");
    EXPECT_TRUE(during) << "a request queued behind slow clients was not answered";
    if (during) {
      EXPECT_EQ(during->status, 200);
    }
    const auto more = names("m", kRecords, 20);
    ASSERT_EQ(put(more).size(), more.size());
    EXPECT_TRUE(log_->wait_until(
        [&](const std::vector<Event>& ev) {
          for (const auto& d : more) {
            if (!EventLog::delivered(ev, d)) return false;
          }
          return true;
        },
        60s))
        << "records stopped flowing while slow clients held the endpoint";
    for (int fd : slow) ::close(fd);
  }

  // The page in a real browser: every shard and both workers.
  std::string dom;
  // The screenshot goes to the test's temporary folder (the one docs/ shows is the fleet
  // view's, fleet_view_test.cpp).
  const fs::path shot = fs::path(::testing::TempDir()) / "status-page.png";
  EXPECT_TRUE(eventually(
      [&] {
        dom = chromium_dom(url_a + "/status", shot.string());
        return rows_owned_by(dom, "A") == 2 && rows_owned_by(dom, "B") == 2;
      },
      60s))
      << dom;
  for (const auto& l : leases()) {
    EXPECT_NE(dom.find("data-shard=\"" + l.lease_key + "\""), std::string::npos) << l.lease_key;
  }
  EXPECT_NE(dom.find("data-worker=\"A\""), std::string::npos);
  EXPECT_NE(dom.find("data-worker=\"B\""), std::string::npos);
  EXPECT_NE(dom.find("A (this worker)"), std::string::npos);

  // A lease moves: B shuts down, hands its leases back, A takes them; the page follows.
  ASSERT_TRUE(b.shutdown().ok());
  ASSERT_TRUE(eventually([&] { return a.stats().leases_held == kShards; }, 60s));
  EXPECT_TRUE(eventually(
      [&] {
        dom = chromium_dom(url_a + "/status");
        return rows_owned_by(dom, "A") == kShards && rows_owned_by(dom, "B") == 0 &&
               dom.find("data-worker=\"B\"") == std::string::npos;
      },
      60s))
      << dom;
  ASSERT_TRUE(a.shutdown().ok());
}

}  // namespace
}  // namespace kcl::worker_test
