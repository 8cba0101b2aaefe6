#include "support/local_http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace kcl::testing {
namespace {

constexpr std::size_t kMaxHeaderBytes = 64 * 1024;

char lower_ascii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower_ascii(c);
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower_ascii(a[i]) != lower_ascii(b[i])) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Status";
  }
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// Reads and writes on a non-blocking socket, giving up when the server's wake pipe fires.
class Conn {
 public:
  Conn(int fd, int wake_fd) : fd_(fd), wake_fd_(wake_fd) {}

  // Appends what is available to buf_. False on EOF, error or stop.
  bool fill() {
    for (;;) {
      pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      int rc = ::poll(fds, 2, -1);
      if (rc < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      if (fds[1].revents != 0) return false;
      if (fds[0].revents == 0) continue;
      char tmp[16 * 1024];
      ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n > 0) {
        buf_.append(tmp, static_cast<std::size_t>(n));
        return true;
      }
      if (n == 0) return false;
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return false;
    }
  }

  bool write_all(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n > 0) {
        data.remove_prefix(static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd fds[2] = {{fd_, POLLOUT, 0}, {wake_fd_, POLLIN, 0}};
        int rc = ::poll(fds, 2, -1);
        if (rc < 0 && errno != EINTR) return false;
        if (fds[1].revents != 0) return false;
        if ((fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return false;
        continue;
      }
      return false;
    }
    return true;
  }

  // Reads up to and including "\r\n\r\n"; returns the header block without it.
  // nullopt on EOF/stop; sets *too_big or *garbage for unusable input.
  std::optional<std::string> read_head(bool* too_big, bool* garbage) {
    for (;;) {
      std::size_t pos = buf_.find("\r\n\r\n");
      if (pos != std::string::npos) {
        std::string head = buf_.substr(0, pos);
        buf_.erase(0, pos + 4);
        return head;
      }
      // A request line starts with an upper-case token; anything else (a TLS ClientHello,
      // binary noise) is answered at once rather than waited on.
      if (!buf_.empty() && !(buf_[0] >= 'A' && buf_[0] <= 'Z')) {
        *garbage = true;
        return std::nullopt;
      }
      if (buf_.size() > kMaxHeaderBytes) {
        *too_big = true;
        return std::nullopt;
      }
      if (!fill()) return std::nullopt;
    }
  }

  bool read_exact(std::size_t n, std::string& out) {
    while (buf_.size() < n) {
      if (!fill()) return false;
    }
    out.append(buf_, 0, n);
    buf_.erase(0, n);
    return true;
  }

  bool read_line(std::string& line) {
    for (;;) {
      std::size_t pos = buf_.find("\r\n");
      if (pos != std::string::npos) {
        line = buf_.substr(0, pos);
        buf_.erase(0, pos + 2);
        return true;
      }
      if (buf_.size() > kMaxHeaderBytes) return false;
      if (!fill()) return false;
    }
  }

  bool read_chunked(std::string& out) {
    for (;;) {
      std::string line;
      if (!read_line(line)) return false;
      std::size_t size = 0;
      try {
        size = std::stoul(line, nullptr, 16);
      } catch (const std::exception&) {
        return false;
      }
      if (size == 0) {
        // Trailers until an empty line.
        for (;;) {
          if (!read_line(line)) return false;
          if (line.empty()) return true;
        }
      }
      if (!read_exact(size, out)) return false;
      if (!read_line(line) || !line.empty()) return false;
    }
  }

 private:
  int fd_;
  int wake_fd_;
  std::string buf_;
};

}  // namespace

std::string ServedRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (iequals(k, name)) return v;
  }
  return {};
}

LocalHttpServer::LocalHttpServer(Handler handler) : handler_(std::move(handler)) {
  if (::pipe(wake_pipe_) != 0) throw std::runtime_error("LocalHttpServer: pipe failed");
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("LocalHttpServer: socket failed");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 128) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error(std::string("LocalHttpServer: bind/listen failed: ") +
                             std::strerror(errno));
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  set_nonblocking(listen_fd_);
  acceptor_ = std::thread([this] { accept_loop(); });
}

LocalHttpServer::~LocalHttpServer() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_.store(true);
  }
  stop_cv_.notify_all();
  // The pipe is never drained, so every poll() that includes it wakes from now on.
  char b = 'x';
  [[maybe_unused]] ssize_t w = ::write(wake_pipe_[1], &b, 1);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

std::string LocalHttpServer::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::vector<ServedRequest> LocalHttpServer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

bool LocalHttpServer::wait_for(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(stop_mu_);
  return !stop_cv_.wait_for(lock, d, [this] { return stop_.load(); });
}

void LocalHttpServer::accept_loop() {
  while (!stopping()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    int rc = ::poll(fds, 2, -1);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping()) {
      ::close(fd);
      return;
    }
    ++accepted_;
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

void LocalHttpServer::serve(int fd) {
  Conn conn(fd, wake_pipe_[0]);
  while (!stopping()) {
    bool too_big = false;
    bool garbage = false;
    std::optional<std::string> head = conn.read_head(&too_big, &garbage);
    if (!head) {
      if (too_big) {
        conn.write_all(
            "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
            "Connection: close\r\n\r\n");
      } else if (garbage) {
        conn.write_all(
            "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
            "Connection: close\r\n\r\n");
      }
      break;
    }

    ServedRequest req;
    std::string_view rest(*head);
    std::size_t eol = rest.find("\r\n");
    std::string_view request_line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 2);
    std::size_t sp1 = request_line.find(' ');
    std::size_t sp2 = request_line.rfind(' ');
    if (sp1 == std::string_view::npos || sp2 == sp1) {
      conn.write_all("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      break;
    }
    req.method = std::string(request_line.substr(0, sp1));
    req.target = std::string(request_line.substr(sp1 + 1, sp2 - sp1 - 1));
    while (!rest.empty()) {
      eol = rest.find("\r\n");
      std::string_view line = rest.substr(0, eol);
      rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 2);
      std::size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      req.headers.emplace_back(to_lower(trim(line.substr(0, colon))),
                               std::string(trim(line.substr(colon + 1))));
    }

    bool ok = true;
    if (iequals(req.header("expect"), "100-continue")) {
      if (!conn.write_all("HTTP/1.1 100 Continue\r\n\r\n")) break;
    }
    if (iequals(req.header("transfer-encoding"), "chunked")) {
      ok = conn.read_chunked(req.body);
    } else if (std::string cl = req.header("content-length"); !cl.empty()) {
      std::size_t n = 0;
      try {
        n = std::stoul(cl);
      } catch (const std::exception&) {
        ok = false;
      }
      if (ok) ok = conn.read_exact(n, req.body);
    }
    if (!ok) break;
    bool client_close = iequals(req.header("connection"), "close");

    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(req);
    }

    CannedResponse resp;
    try {
      resp = handler_(req);
    } catch (const std::exception& e) {
      resp = CannedResponse{};
      resp.status = 500;
      resp.body = std::string("handler threw: ") + e.what();
    }
    if (resp.delay.count() > 0 && !wait_for(resp.delay)) break;
    if (resp.close_without_response) break;

    std::string out = "HTTP/1.1 " + std::to_string(resp.status) + " " +
                      std::string(reason_phrase(resp.status)) + "\r\n";
    bool has_length = false;
    bool server_close = false;
    for (const auto& [k, v] : resp.headers) {
      if (iequals(k, "content-length") || iequals(k, "transfer-encoding")) has_length = true;
      if (iequals(k, "connection") && iequals(v, "close")) server_close = true;
      out += k + ": " + v + "\r\n";
    }
    if (!has_length) out += "Content-Length: " + std::to_string(resp.body.size()) + "\r\n";
    out += "\r\n";
    out += resp.body;
    if (resp.trickle.count() > 0) {
      bool sent = true;
      for (std::size_t i = 0; sent && i < out.size(); ++i) {
        sent = conn.write_all(out.substr(i, 1)) && wait_for(resp.trickle);
      }
      if (!sent) break;
    } else if (!conn.write_all(out)) {
      break;
    }
    if (client_close || server_close) break;
  }
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

}  // namespace kcl::testing
