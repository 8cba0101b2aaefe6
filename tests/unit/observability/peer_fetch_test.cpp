// The fleet view's fetch of the peers' reports against scripted local servers: a peer that
// trickles its answer a byte at a time (no read ever waits long) is cut off at the deadline,
// a peer whose answer is larger than the cap is not read, and peers whose turn does not come
// before the gather's deadline are not asked; each error names the peer, and the other peers'
// reports are still there.
#include "observability/peer_fetch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/local_http_server.h"

namespace kcl::observability {
namespace {

using namespace std::chrono_literals;
using testing::CannedResponse;
using testing::LocalHttpServer;
using testing::ServedRequest;

// Worker `id`'s own report, as its endpoint serves it.
std::string report_of(const std::string& id) {
  LocalReport r;
  r.generated_at_ms = 1000;
  r.worker.worker_id = id;
  r.worker.version = "0.1.0";
  r.worker.ready = true;
  ShardFigures f;
  f.shard_id = "shardId-000000000001";
  f.millis_behind = 250;
  f.consumer_state = "processing";
  r.shards.push_back(f);
  return nlohmann::json(r).dump();
}

// A peer answering `id`'s report at once.
LocalHttpServer quick_peer(const std::string& id) {
  return LocalHttpServer([id](const ServedRequest&) {
    CannedResponse r;
    r.headers = {{"Content-Type", "application/json"}};
    r.body = report_of(id);
    return r;
  });
}

std::chrono::milliseconds since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

// A peer sending its report a byte every 20 ms: each read waits less than the timeout, so
// the fetch went on for the whole answer (about 10 s here; a bigger report, longer), and the
// fleet view with it. Now it ends at 2 x timeout, naming the peer; the quick peer's report is
// there.
TEST(PeerFetch, APeerThatTricklesItsAnswerIsCutOffAtTheDeadline) {
  LocalHttpServer slow([](const ServedRequest&) {
    CannedResponse r;
    r.headers = {{"Content-Type", "application/json"}};
    r.body = report_of("B");
    r.trickle = 20ms;
    return r;
  });
  LocalHttpServer quick = quick_peer("C");
  const auto start = std::chrono::steady_clock::now();
  const auto reports = fetch_peer_reports({{"B", slow.url()}, {"C", quick.url()}}, 200ms);
  const auto took = since(start);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_LT(took, 2000ms) << "the gather took " << took.count() << " ms";
  EXPECT_FALSE(reports[0].report.has_value()) << "a trickled report was read whole";
  EXPECT_NE(reports[0].error.find("worker 'B'"), std::string::npos) << reports[0].error;
  EXPECT_NE(reports[0].error.find("no complete answer within"), std::string::npos)
      << reports[0].error;
  ASSERT_TRUE(reports[1].report.has_value()) << reports[1].error;
  EXPECT_EQ(reports[1].report->worker.worker_id, "C");
}

// A peer answering 9 MiB (a valid report, padded): it was read whole, and kept in the view.
// Now the answer is cut off at the cap (8 MiB) and the peer named.
TEST(PeerFetch, APeerAnsweringMoreThanTheCapIsNotRead) {
  LocalHttpServer huge([](const ServedRequest&) {
    CannedResponse r;
    r.headers = {{"Content-Type", "application/json"}};
    r.body = report_of("B") + std::string(std::size_t{9} << 20, ' ');
    return r;
  });
  LocalHttpServer quick = quick_peer("C");
  const auto reports = fetch_peer_reports({{"B", huge.url()}, {"C", quick.url()}}, 1000ms);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_FALSE(reports[0].report.has_value()) << "a 9 MiB report was read";
  EXPECT_NE(reports[0].error.find("worker 'B'"), std::string::npos) << reports[0].error;
  EXPECT_NE(reports[0].error.find("larger than the cap of 8388608 bytes"), std::string::npos)
      << reports[0].error;
  ASSERT_TRUE(reports[1].report.has_value()) << reports[1].error;
}

// Three peers that never answer, fetched one at a time: each waited out its own timeout, so
// the gather took 3 of them (and N for N such peers). Now the gather ends at 2 x timeout:
// the first is cut off, the others are not asked, each error naming its peer.
TEST(PeerFetch, TheGatherEndsByItsDeadlineAndNamesThePeersNotAsked) {
  LocalHttpServer silent([](const ServedRequest&) {
    CannedResponse r;
    r.delay = 60s;  // ends when the server stops
    return r;
  });
  const std::vector<PeerAddress> peers = {
      {"B", silent.url()}, {"C", silent.url()}, {"D", silent.url()}};
  const auto start = std::chrono::steady_clock::now();
  const auto reports = fetch_peer_reports(peers, 300ms, /*parallel=*/1);
  const auto took = since(start);
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_LT(took, 1500ms) << "the gather took " << took.count() << " ms";
  for (std::size_t i = 0; i < reports.size(); ++i) {
    EXPECT_FALSE(reports[i].report.has_value());
    EXPECT_NE(reports[i].error.find("worker '" + peers[i].worker_id + "'"), std::string::npos)
        << reports[i].error;
  }
  EXPECT_NE(reports[0].error.find("no complete answer within"), std::string::npos)
      << reports[0].error;
  for (std::size_t i = 1; i < reports.size(); ++i) {
    EXPECT_NE(reports[i].error.find("not asked"), std::string::npos) << reports[i].error;
  }
}

}  // namespace
}  // namespace kcl::observability
