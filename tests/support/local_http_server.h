// LocalHttpServer: a tiny HTTP/1.1 server on 127.0.0.1 for tests.
//
// Binds a free port (port 0), accepts connections on its own thread and serves each
// connection on a thread of its own (keep-alive, Content-Length bodies; chunked request
// bodies are also accepted). Every request is recorded and answered by the handler's
// CannedResponse. The destructor stops accepting, shuts down open connections and joins
// every thread; it never waits for a client to hang up.
//
// Thread safety: port(), url() and requests() may be called from any thread. The handler is
// called from the server's connection threads, possibly concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "aws/http_transport.h"

namespace kcl::testing {

struct ServedRequest {
  std::string method;
  std::string target;    // path + query, as sent
  aws::Headers headers;  // names lower-cased, values trimmed
  std::string body;
  // First value of a header (name compared case-insensitively); empty when absent.
  std::string header(std::string_view name) const;
};

struct CannedResponse {
  int status = 200;
  // Content-Length is added by the server unless present or Transfer-Encoding is set (then
  // the body must already be encoded accordingly).
  aws::Headers headers;
  std::string body;
  // Close the connection after reading the request, without sending anything.
  bool close_without_response = false;
  // Wait this long before answering (the wait ends early when the server stops).
  std::chrono::milliseconds delay{0};
  // Send the answer a byte at a time, with this pause after each (a slow peer that never
  // lets a read wait long); the pauses end early when the server stops.
  std::chrono::milliseconds trickle{0};
};

class LocalHttpServer {
 public:
  using Handler = std::function<CannedResponse(const ServedRequest&)>;

  explicit LocalHttpServer(Handler handler);
  ~LocalHttpServer();

  LocalHttpServer(const LocalHttpServer&) = delete;
  LocalHttpServer& operator=(const LocalHttpServer&) = delete;

  int port() const { return port_; }
  std::string url() const;  // "http://127.0.0.1:<port>"
  std::vector<ServedRequest> requests() const;
  // TCP connections accepted so far (to check keep-alive reuse).
  int connections_accepted() const { return accepted_.load(); }

 private:
  void accept_loop();
  void serve(int fd);
  bool stopping() const { return stop_.load(); }
  // Waits up to `d`, returning early when the server stops. Returns false when stopped.
  bool wait_for(std::chrono::milliseconds d);

  Handler handler_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};  // written on stop to wake poll()
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};

  mutable std::mutex mu_;
  std::vector<ServedRequest> requests_;
  std::vector<std::thread> threads_;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;

  std::thread acceptor_;
};

}  // namespace kcl::testing
