#include "aws/streaming_transport.h"

#include <curl/curl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cctype>
#include <cstring>
#include <vector>

#include "base/thread_name.h"

namespace kcl::aws {

struct StreamingTransport::Stream {
  StreamId id = 0;
  HttpRequest request;
  std::shared_ptr<StreamHandler> handler;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  int status = 0;
  Headers response_headers;
  bool response_reported = false;
  bool paused = false;
  bool fresh_connection = false;
  char errbuf[CURL_ERROR_SIZE] = {};

  ~Stream() {
    if (easy) curl_easy_cleanup(easy);
    if (headers) curl_slist_free_all(headers);
  }
};

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

// libcurl callbacks (C linkage not needed: plain function pointers of the right type).
static std::size_t stream_header_cb(char* data, std::size_t size, std::size_t n, void* user) {
  auto* s = static_cast<StreamingTransport::Stream*>(user);
  const std::string_view line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    // A status line (a new response, e.g. after an interim 100): start over.
    s->response_headers.clear();
    const std::size_t sp = line.find(' ');
    s->status =
        sp == std::string_view::npos ? 0 : std::atoi(std::string(line.substr(sp + 1, 3)).c_str());
    return size * n;
  }
  const std::size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    s->response_headers.emplace_back(lower(trim(line.substr(0, colon))),
                                     std::string(trim(line.substr(colon + 1))));
  }
  return size * n;
}

// A connection whose peer stops acknowledging is closed 30 s after the first byte (or
// keepalive probe) it left unacknowledged.
static int set_user_timeout(void*, curl_socket_t fd, curlsocktype purpose) {
  if (purpose == CURLSOCKTYPE_IPCXN) {
    const unsigned int ms = 30000;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
  }
  return CURL_SOCKOPT_OK;
}

static std::size_t stream_write_cb(char* data, std::size_t size, std::size_t n, void* user) {
  auto* s = static_cast<StreamingTransport::Stream*>(user);
  if (!s->response_reported) {
    s->response_reported = true;
    s->handler->on_response(s->status, s->response_headers);
  }
  if (!s->handler->on_data(std::string_view(data, size * n))) {
    s->paused = true;
    return CURL_WRITEFUNC_PAUSE;
  }
  return size * n;
}

StreamingTransport::StreamingTransport(HttpConfig config) : config_(std::move(config)) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  CURLM* multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_PIPELINING, static_cast<long>(CURLPIPE_MULTIPLEX));
  // Streams per connection before a second connection is opened.
  curl_multi_setopt(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, 500L);
  multi_ = multi;
  thread_ = base::named_thread("kcl-fanout-io", [this] { run(); });
}

StreamingTransport::~StreamingTransport() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  curl_multi_wakeup(static_cast<CURLM*>(multi_));
  if (thread_.joinable()) thread_.join();
  curl_multi_cleanup(static_cast<CURLM*>(multi_));
}

StreamingTransport::StreamId StreamingTransport::open(HttpRequest request,
                                                      std::shared_ptr<StreamHandler> handler,
                                                      bool fresh_connection) {
  auto s = std::make_unique<Stream>();
  s->request = std::move(request);
  s->handler = std::move(handler);
  s->fresh_connection = fresh_connection;
  StreamId id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    s->id = id;
    pending_.emplace(id, std::move(s));
    commands_.push_back({Command::Kind::kOpen, id});
    ++open_count_;
  }
  curl_multi_wakeup(static_cast<CURLM*>(multi_));
  return id;
}

void StreamingTransport::resume(StreamId id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back({Command::Kind::kResume, id});
  }
  curl_multi_wakeup(static_cast<CURLM*>(multi_));
}

void StreamingTransport::cancel(StreamId id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back({Command::Kind::kCancel, id});
  }
  curl_multi_wakeup(static_cast<CURLM*>(multi_));
}

std::size_t StreamingTransport::open_streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_count_;
}

void StreamingTransport::start_locked_out(Stream& s) {
  CURL* h = curl_easy_init();
  s.easy = h;
  const bool tls = s.request.url.rfind("https://", 0) == 0;
  curl_easy_setopt(h, CURLOPT_URL, s.request.url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, s.errbuf);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(config_.connect_timeout.count()));
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 10L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 5L);
  curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, set_user_timeout);
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, static_cast<long>(config_.receive_buffer_bytes));
  curl_easy_setopt(
      h, CURLOPT_HTTP_VERSION,
      static_cast<long>(tls ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE));
  if (tls) {
    // Wait for the connection to an endpoint to be able to multiplex rather than opening one
    // per stream.
    curl_easy_setopt(h, CURLOPT_PIPEWAIT, 1L);
    if (s.fresh_connection) curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
  } else {
    // h2c with prior knowledge: libcurl 7.88 fails a second stream on such a connection
    // (CURLE_HTTP2), so each stream to a plain-HTTP endpoint gets a connection of its own.
    curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
  }
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, config_.verify_tls ? 1L : 0L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, config_.verify_tls ? 2L : 0L);
  if (!config_.ca_bundle.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, config_.ca_bundle.c_str());
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, stream_write_cb);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, stream_header_cb);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &s);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(s.request.body.size()));
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, s.request.body.data());
  bool has_user_agent = false;
  for (const auto& [name, value] : s.request.headers) {
    if (lower(name) == "user-agent") has_user_agent = true;
    s.headers = curl_slist_append(s.headers, (name + ": " + value).c_str());
  }
  s.headers = curl_slist_append(s.headers, "Expect:");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, s.headers);
  if (!has_user_agent) curl_easy_setopt(h, CURLOPT_USERAGENT, "kcl-cpp");
  curl_easy_setopt(h, CURLOPT_PRIVATE, &s);
  curl_multi_add_handle(static_cast<CURLM*>(multi_), h);
}

void StreamingTransport::finish(StreamId id, const Status& status) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  std::unique_ptr<Stream> s = std::move(it->second);
  streams_.erase(it);
  if (s->easy) curl_multi_remove_handle(static_cast<CURLM*>(multi_), s->easy);
  if (!s->response_reported && status.ok()) {
    // A response without a body (e.g. an error with no content).
    s->response_reported = true;
    s->handler->on_response(s->status, s->response_headers);
  }
  s->handler->on_close(status);
  std::lock_guard<std::mutex> lock(mu_);
  --open_count_;
}

void StreamingTransport::apply_commands() {
  std::deque<Command> commands;
  std::vector<std::unique_ptr<Stream>> to_start;
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands.swap(commands_);
    for (const Command& c : commands) {
      if (c.kind != Command::Kind::kOpen) continue;
      auto it = pending_.find(c.id);
      if (it != pending_.end()) {
        to_start.push_back(std::move(it->second));
        pending_.erase(it);
      }
    }
  }
  for (auto& s : to_start) {
    Stream& ref = *s;
    streams_.emplace(ref.id, std::move(s));
    start_locked_out(ref);
  }
  for (const Command& c : commands) {
    auto it = streams_.find(c.id);
    if (it == streams_.end()) continue;  // already closed
    Stream& s = *it->second;
    if (c.kind == Command::Kind::kResume && s.paused) {
      s.paused = false;
      // May call the write callback at once with the bytes held back (and pause again).
      curl_easy_pause(s.easy, CURLPAUSE_CONT);
    } else if (c.kind == Command::Kind::kCancel) {
      finish(c.id, Status(StatusCode::kCancelled, "the stream was cancelled"));
    }
  }
}

void StreamingTransport::run() {
  CURLM* multi = static_cast<CURLM*>(multi_);
  for (;;) {
    apply_commands();
    bool stopping;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping = stopping_;
    }
    if (stopping) {
      std::vector<StreamId> ids;
      for (const auto& [id, s] : streams_) ids.push_back(id);
      for (StreamId id : ids) finish(id, Status(StatusCode::kCancelled, "the transport stopped"));
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, s] : pending_) {
        s->handler->on_close(Status(StatusCode::kCancelled, "the transport stopped"));
      }
      pending_.clear();
      return;
    }
    int running = 0;
    curl_multi_perform(multi, &running);
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Stream* s = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &s);
      if (!s) continue;
      Status st;
      if (msg->data.result != CURLE_OK) {
        std::string why = s->errbuf[0] ? std::string(s->errbuf)
                                       : std::string(curl_easy_strerror(msg->data.result));
        // The URL without its query (it carries no secrets here, but keep messages short).
        st = Status(StatusCode::kUnavailable, "stream to " + s->request.url + " ended: " + why);
      }
      finish(s->id, st);
    }
    curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
  }
}

}  // namespace kcl::aws
