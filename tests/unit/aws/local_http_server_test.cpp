// Tests of the test helper itself, with a raw-socket client (no libcurl), so that failures
// of the curl transport tests can be told apart from failures of the server.
#include "support/local_http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace kcl::testing {
namespace {

class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() { ::close(fd_); }
  bool connected() const { return connected_; }
  bool send_all(const std::string& s) {
    return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // Reads one response with a Content-Length body; empty on EOF.
  std::string read_response() {
    for (;;) {
      std::size_t pos = buf_.find("\r\n\r\n");
      if (pos != std::string::npos) {
        std::size_t cl_pos = buf_.find("Content-Length: ");
        std::size_t len = 0;
        if (cl_pos != std::string::npos && cl_pos < pos) {
          len = std::stoul(buf_.substr(cl_pos + 16));
        }
        if (buf_.size() >= pos + 4 + len) {
          std::string out = buf_.substr(0, pos + 4 + len);
          buf_.erase(0, pos + 4 + len);
          return out;
        }
      }
      char tmp[4096];
      ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n <= 0) return {};
      buf_.append(tmp, static_cast<std::size_t>(n));
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
};

TEST(LocalHttpServerTest, ServesKeepAliveRequestsAndRecordsThem) {
  LocalHttpServer server([](const ServedRequest& r) {
    CannedResponse resp;
    resp.headers.emplace_back("X-Echo", r.header("X-Thing"));
    resp.body = "got:" + r.body;
    return resp;
  });
  ASSERT_GT(server.port(), 0);
  EXPECT_EQ(server.url(), "http://127.0.0.1:" + std::to_string(server.port()));
  RawClient c(server.port());
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 2; ++i) {
    std::string body = "hello" + std::to_string(i);
    ASSERT_TRUE(c.send_all("POST /a/b?x=1 HTTP/1.1\r\nHost: h\r\nX-Thing:  v" + std::to_string(i) +
                           " \r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                           body));
    std::string resp = c.read_response();
    EXPECT_NE(resp.find("HTTP/1.1 200 OK"), std::string::npos) << resp;
    EXPECT_NE(resp.find("X-Echo: v" + std::to_string(i)), std::string::npos) << resp;
    EXPECT_NE(resp.find("got:" + body), std::string::npos) << resp;
  }
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].target, "/a/b?x=1");
  EXPECT_EQ(reqs[0].header("x-thing"), "v0");
  EXPECT_EQ(reqs[0].header("X-THING"), "v0");
  EXPECT_EQ(reqs[1].body, "hello1");
  for (const auto& [k, v] : reqs[0].headers) {
    for (char ch : k) EXPECT_FALSE(ch >= 'A' && ch <= 'Z') << k;
  }
}

TEST(LocalHttpServerTest, ServesConcurrentConnections) {
  LocalHttpServer server([](const ServedRequest& r) {
    CannedResponse resp;
    resp.body = r.target;
    return resp;
  });
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      RawClient c(server.port());
      if (!c.connected()) return;
      std::string target = "/t" + std::to_string(i);
      c.send_all("GET " + target + " HTTP/1.1\r\nHost: h\r\n\r\n");
      std::string resp = c.read_response();
      if (resp.find("\r\n\r\n" + target) != std::string::npos) ++good;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), 8);
  EXPECT_EQ(server.requests().size(), 8u);
}

TEST(LocalHttpServerTest, CloseWithoutResponseClosesTheConnection) {
  LocalHttpServer server([](const ServedRequest&) {
    CannedResponse resp;
    resp.close_without_response = true;
    return resp;
  });
  RawClient c(server.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send_all("GET / HTTP/1.1\r\nHost: h\r\n\r\n"));
  EXPECT_EQ(c.read_response(), "");
}

TEST(LocalHttpServerTest, AnswersNonHttpBytesAtOnce) {
  LocalHttpServer server([](const ServedRequest&) { return CannedResponse{}; });
  RawClient c(server.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send_all(std::string("\x16\x03\x01\x02\x00", 5)));
  EXPECT_NE(c.read_response().find("400"), std::string::npos);
  EXPECT_TRUE(server.requests().empty());
}

TEST(LocalHttpServerTest, DestructorDoesNotWaitForIdleOrDelayedConnections) {
  auto server = std::make_unique<LocalHttpServer>([](const ServedRequest&) {
    CannedResponse resp;
    resp.delay = std::chrono::hours(1);
    return resp;
  });
  RawClient idle(server->port());
  RawClient waiting(server->port());
  ASSERT_TRUE(idle.connected());
  ASSERT_TRUE(waiting.connected());
  ASSERT_TRUE(waiting.send_all("GET / HTTP/1.1\r\nHost: h\r\n\r\n"));
  // Wait until the request is inside the handler's delay.
  while (server->requests().empty()) std::this_thread::yield();
  auto start = std::chrono::steady_clock::now();
  server.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace kcl::testing
