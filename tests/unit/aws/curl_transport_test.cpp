// The libcurl transport against LocalHttpServer: round trips, keep-alive, concurrency and
// every failure the header comment promises (codes and messages).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "aws/http_transport.h"
#include "aws_test_util.h"
#include "support/local_http_server.h"

namespace kcl::aws {
namespace {

using kcl::testing::CannedResponse;
using kcl::testing::LocalHttpServer;
using kcl::testing::ServedRequest;
using test::contains;

HttpConfig test_config() {
  HttpConfig c;
  c.connect_timeout = std::chrono::milliseconds(2000);
  c.request_timeout = std::chrono::milliseconds(10000);
  return c;
}

TEST(CurlTransportTest, PostRoundTripWithLowerCasedResponseHeaders) {
  LocalHttpServer server([](const ServedRequest& r) {
    CannedResponse resp;
    resp.status = 200;
    resp.headers = {{"X-Amzn-RequestId", "req-1"}, {"Content-Type", "application/json"}};
    resp.body = "echo:" + r.body;
    return resp;
  });
  auto transport = make_curl_transport(test_config());
  HttpRequest req;
  req.url = server.url() + "/";
  req.headers = {{"Content-Type", "application/x-amz-json-1.1"},
                 {"X-Amz-Target", "Kinesis_20131202.ListShards"},
                 {"X-Empty", ""}};
  req.body = R"({"StreamName":"s"})";
  auto resp = transport->send(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->status, 200);
  EXPECT_EQ(resp->body, "echo:" + req.body);
  EXPECT_EQ(resp->header("X-AMZN-REQUESTID"), "req-1");
  EXPECT_EQ(resp->header("content-type"), "application/json");
  for (const auto& [k, v] : resp->headers) {
    for (char c : k) EXPECT_FALSE(c >= 'A' && c <= 'Z') << k;
  }
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].target, "/");
  EXPECT_EQ(reqs[0].header("content-type"), "application/x-amz-json-1.1");
  EXPECT_EQ(reqs[0].header("x-amz-target"), "Kinesis_20131202.ListShards");
  EXPECT_EQ(reqs[0].header("expect"), "");
  EXPECT_EQ(reqs[0].body, req.body);
  bool saw_empty = false;
  for (const auto& [k, v] : reqs[0].headers) saw_empty |= (k == "x-empty" && v.empty());
  EXPECT_TRUE(saw_empty);
}

TEST(CurlTransportTest, GetAndPutMethods) {
  LocalHttpServer server([](const ServedRequest& r) {
    CannedResponse resp;
    resp.body = r.method + " " + r.target + " " + r.body;
    return resp;
  });
  auto transport = make_curl_transport(test_config());
  HttpRequest get;
  get.method = "GET";
  get.url = server.url() + "/latest/meta-data?x=1";
  auto r1 = transport->send(get);
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(r1->body, "GET /latest/meta-data?x=1 ");
  HttpRequest put;
  put.method = "PUT";
  put.url = server.url() + "/latest/api/token";
  put.body = "b";
  auto r2 = transport->send(put);
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->body, "PUT /latest/api/token b");
}

TEST(CurlTransportTest, NonSuccessStatusIsAResponseNotAnError) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.status = 503;
    resp.body = "busy";
    return resp;
  });
  auto transport = make_curl_transport(test_config());
  auto r = transport->send(HttpRequest{"POST", server.url() + "/", {}, "{}", {}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, "busy");
}

TEST(CurlTransportTest, ReusesConnections) {
  LocalHttpServer server([](const ServedRequest&) { return CannedResponse{}; });
  auto transport = make_curl_transport(test_config());
  for (int i = 0; i < 10; ++i) {
    auto r = transport->send(HttpRequest{"POST", server.url() + "/", {}, "{}", {}});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_EQ(server.requests().size(), 10u);
  EXPECT_EQ(server.connections_accepted(), 1);
}

TEST(CurlTransportTest, ConcurrentSends) {
  LocalHttpServer server([](const ServedRequest& r) {
    CannedResponse resp;
    resp.body = r.body;
    return resp;
  });
  auto transport = make_curl_transport(test_config());
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        std::string body = std::to_string(t) + ":" + std::to_string(i);
        auto r = transport->send(HttpRequest{"POST", server.url() + "/", {}, body, {}});
        if (r.ok() && r->status == 200 && r->body == body) ++good;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 160);
  EXPECT_LE(server.connections_accepted(), 8 + 2);
}

TEST(CurlTransportTest, LargeBodiesBothWays) {
  LocalHttpServer server([](const ServedRequest& r) {
    CannedResponse resp;
    resp.body = std::string(3u << 20, 'y');
    resp.headers = {{"X-Got", std::to_string(r.body.size())}};
    return resp;
  });
  auto transport = make_curl_transport(test_config());
  auto r =
      transport->send(HttpRequest{"POST", server.url() + "/", {}, std::string(5u << 20, 'x'), {}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.size(), 3u << 20);
  EXPECT_EQ(r->header("x-got"), std::to_string(5u << 20));
}

TEST(CurlTransportTest, ALargeBodyIsReceivedIntoABufferGivenBack) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.body = std::string(1u << 20, 'z');
    return resp;
  });
  auto& recycler = response_body_recycler();
  recycler.trim();
  std::string spare = recycler.take((1u << 20) + (1u << 19));  // within twice the body
  const char* memory = spare.data();
  recycler.give(std::move(spare));

  auto transport = make_curl_transport(test_config());
  auto r = transport->send(HttpRequest{"POST", server.url() + "/", {}, "{}", {}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, std::string(1u << 20, 'z'));
  EXPECT_EQ(r->body.data(), memory) << "the announced length fits the kept buffer";
  EXPECT_GE(r->body.capacity(), r->body.size() + HttpResponse::kBodySlack);

  // A small body does not take it.
  LocalHttpServer small_server([](const ServedRequest&) {
    CannedResponse resp;
    resp.body = "small";
    return resp;
  });
  std::string back = std::move(r->body);
  recycler.give(std::move(back));
  auto small = transport->send(HttpRequest{"POST", small_server.url() + "/", {}, "{}", {}});
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->body, "small");
  EXPECT_EQ(recycler.counts().kept_blocks, 1u);
}

TEST(CurlTransportTest, ConnectionRefusedIsUnavailable) {
  int port = 0;
  {
    LocalHttpServer server([](const ServedRequest&) { return CannedResponse{}; });
    port = server.port();
  }
  auto transport = make_curl_transport(test_config());
  auto r = transport->send(
      HttpRequest{"POST", "http://127.0.0.1:" + std::to_string(port) + "/?secret=1", {}, "{}", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();
  EXPECT_TRUE(r.status().retryable());
  const std::string text = r.status().to_string();
  EXPECT_TRUE(contains(text, "http://127.0.0.1:" + std::to_string(port) + "/")) << text;
  EXPECT_TRUE(contains(text, "connection failed")) << text;
  EXPECT_FALSE(contains(text, "secret=1")) << text;
}

TEST(CurlTransportTest, RequestTimeoutIsUnavailableAndOverridable) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.delay = std::chrono::minutes(5);  // cut short when the server stops
    return resp;
  });
  auto transport = make_curl_transport(test_config());
  HttpRequest req{"POST", server.url() + "/", {}, "{}", std::chrono::milliseconds(200)};
  auto start = std::chrono::steady_clock::now();
  auto r = transport->send(req);
  ASSERT_FALSE(r.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "timed out")) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "200 ms")) << r.status();
}

TEST(CurlTransportTest, ServerClosingWithoutResponseIsUnavailable) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.close_without_response = true;
    return resp;
  });
  auto transport = make_curl_transport(test_config());
  auto r = transport->send(HttpRequest{"POST", server.url() + "/", {}, "{}", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();
}

TEST(CurlTransportTest, TlsToAPlainHttpServerIsAClearTlsError) {
  LocalHttpServer server([](const ServedRequest&) { return CannedResponse{}; });
  auto transport = make_curl_transport(test_config());
  std::string url = "https://127.0.0.1:" + std::to_string(server.port()) + "/";
  auto r = transport->send(HttpRequest{"POST", url, {{"Authorization", "SIG-SECRET"}}, "{}", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "TLS")) << r.status();
  EXPECT_TRUE(contains(r.status().message(), url)) << r.status();
  EXPECT_FALSE(contains(r.status().to_string(), "SIG-SECRET"));
}

// A listener on loopback that takes each connection's first bytes (a TLS ClientHello) and
// then closes it: with a reset (as a load balancer dropping it) or an orderly close.
class DroppingListener {
 public:
  explicit DroppingListener(bool reset) : reset_(reset) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 8) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        char buf[4096];
        (void)::recv(c, buf, sizeof buf, 0);
        if (reset_) {
          linger l{1, 0};
          ::setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        }
        ::close(c);
      }
    });
  }
  ~DroppingListener() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }

 private:
  bool reset_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

TEST(CurlTransportTest, AConnectionDroppedDuringTheTlsHandshakeIsRetryable) {
  for (bool reset : {true, false}) {
    DroppingListener listener(reset);
    ASSERT_GT(listener.port(), 0);
    auto transport = make_curl_transport(test_config());
    const std::string url = "https://127.0.0.1:" + std::to_string(listener.port()) + "/";
    auto r = transport->send(HttpRequest{"POST", url, {}, "{}", {}});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable)
        << (reset ? "reset: " : "closed: ") << r.status();
    EXPECT_TRUE(contains(r.status().message(), "closed during the TLS handshake")) << r.status();
  }
}

TEST(CurlTransportTest, MalformedUrlAndUnsupportedSchemeAreInvalidArgument) {
  auto transport = make_curl_transport(test_config());
  auto r1 = transport->send(HttpRequest{"POST", "http://exa mple .com:99999/", {}, "{}", {}});
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().code(), StatusCode::kInvalidArgument) << r1.status();
  auto r2 = transport->send(HttpRequest{"POST", "ftp://127.0.0.1/", {}, "{}", {}});
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().code(), StatusCode::kInvalidArgument) << r2.status();
  EXPECT_TRUE(contains(r2.status().message(), "scheme")) << r2.status();
  auto r3 = transport->send(HttpRequest{"POST", "", {}, "{}", {}});
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.status().code(), StatusCode::kInvalidArgument) << r3.status();
}

TEST(CurlTransportTest, ResponseOverTheCapIsInternalNamingTheCap) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.body = std::string((1u << 20) + 1, 'z');
    return resp;
  });
  HttpConfig config = test_config();
  config.max_response_bytes = 1u << 20;
  auto transport = make_curl_transport(config);
  auto r = transport->send(HttpRequest{"POST", server.url() + "/", {}, "{}", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "1048576")) << r.status();
  // The transport still works afterwards.
  LocalHttpServer small([](const ServedRequest&) { return CannedResponse{}; });
  EXPECT_TRUE(transport->send(HttpRequest{"POST", small.url() + "/", {}, "{}", {}}).ok());
}

// A request's own cap, below the transport's: a larger answer is aborted and the message
// says whose cap it was; the next request has the transport's cap again.
TEST(CurlTransportTest, ARequestsOwnCapAbortsALargerAnswer) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.body = std::string(2000, 'z');
    return resp;
  });
  auto transport = make_curl_transport(test_config());
  HttpRequest capped{"GET", server.url() + "/", {}, "", {}};
  capped.max_response_bytes = 1000;
  auto r = transport->send(capped);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "cap of 1000 bytes (the request's own)"))
      << r.status();
  auto whole = transport->send(HttpRequest{"GET", server.url() + "/", {}, "", {}});
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->body.size(), 2000u);
}

TEST(CurlTransportTest, ChunkedResponseOverTheCapIsAbortedToo) {
  // No Content-Length: the cap is enforced while the body streams in.
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.headers = {{"Transfer-Encoding", "chunked"}};
    std::string chunk(64 * 1024, 'c');
    for (int i = 0; i < 20; ++i) resp.body += "10000\r\n" + chunk + "\r\n";
    resp.body += "0\r\n\r\n";
    return resp;
  });
  HttpConfig config = test_config();
  config.max_response_bytes = 1u << 20;
  auto transport = make_curl_transport(config);
  auto r = transport->send(HttpRequest{"POST", server.url() + "/", {}, "{}", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal) << r.status();
  EXPECT_TRUE(contains(r.status().message(), "cap")) << r.status();
}

}  // namespace
}  // namespace kcl::aws
