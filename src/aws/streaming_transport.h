// aws/streaming_transport.h: long-lived streaming HTTP/2 responses (SubscribeToShard's event
// streams), many at once over one connection per endpoint.
//
// One libcurl multi handle with HTTP/2 multiplexing (nghttp2), driven by one thread of the
// transport: every stream of a worker shares it, never a thread or a connection per shard.
// https:// endpoints negotiate h2 through ALPN and multiplex every stream over one connection;
// http:// endpoints (local servers) speak h2c with prior knowledge, one connection per stream
// (libcurl 7.88 fails a second stream multiplexed on a prior-knowledge connection).
//
// Flow control: a handler that cannot take more bytes returns false from on_data(); the
// stream is paused (the bytes are offered again after resume()), libcurl stops reading that
// stream, and HTTP/2 flow control stops the server once the stream's window is full. Other
// streams on the connection go on. So a slow consumer bounds memory (to the window) instead of
// buffering without limit.
//
// A connection whose peer stops acknowledging (a dead host, a network partition) is closed
// by the kernel within 30 s of the first unacknowledged byte or keepalive probe
// (TCP_USER_TIMEOUT; keepalive probes from 10 s of silence), failing its streams, rather than
// after the kernel's retransmissions give up (about 15 minutes).
//
// Handlers are called on the transport's thread, one call at a time, and must return quickly
// (no blocking, no calls back into the transport other than resume()/cancel()).
//
// Thread safety: open(), resume() and cancel() may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>

#include "aws/http_transport.h"
#include "kcl/aws_config.h"
#include "kcl/status.h"

namespace kcl::aws {

class StreamHandler {
 public:
  virtual ~StreamHandler() = default;
  // The response's status line and headers arrived (names lower-cased).
  virtual void on_response(int status, const Headers& headers) = 0;
  // Body bytes as they arrive, in order. Return false to pause the stream without taking
  // them: they are offered again after resume().
  virtual bool on_data(std::string_view bytes) = 0;
  // The stream ended: OK when the server ended it; kUnavailable when the connection was
  // lost or reset, or the stream was refused; kCancelled after cancel(). Called exactly once
  // per opened stream; nothing is called after it.
  virtual void on_close(const Status& status) = 0;
};

class StreamingTransport {
 public:
  using StreamId = std::uint64_t;

  explicit StreamingTransport(HttpConfig config);
  // Cancels every open stream (their on_close(kCancelled)) and joins the thread.
  ~StreamingTransport();
  StreamingTransport(const StreamingTransport&) = delete;
  StreamingTransport& operator=(const StreamingTransport&) = delete;

  // Starts a request whose response is streamed to `handler`. `fresh_connection`: on a new
  // connection, not one the transport already has (after a stream went silent: its
  // connection may be dead although its socket looks alive, and would take the new stream
  // into the same silence).
  StreamId open(HttpRequest request, std::shared_ptr<StreamHandler> handler,
                bool fresh_connection = false);
  // Takes up a paused stream again.
  void resume(StreamId id);
  // Ends a stream; its on_close(kCancelled) follows unless it had already closed.
  void cancel(StreamId id);

  // Streams open now (for tests and the status page).
  std::size_t open_streams() const;

  struct Stream;  // one request and its response (internal)

 private:
  struct Command {
    enum class Kind { kOpen, kResume, kCancel } kind;
    StreamId id = 0;
  };
  void run();
  void start_locked_out(Stream& s);
  void finish(StreamId id, const Status& status);
  void apply_commands();

  const HttpConfig config_;
  void* multi_ = nullptr;  // CURLM*
  mutable std::mutex mu_;
  std::deque<Command> commands_;
  std::map<StreamId, std::unique_ptr<Stream>> pending_;  // opened, not started yet
  std::map<StreamId, std::unique_ptr<Stream>> streams_;  // owned by the thread
  std::size_t open_count_ = 0;
  StreamId next_id_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kcl::aws
