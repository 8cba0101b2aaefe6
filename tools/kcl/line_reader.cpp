#include "line_reader.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kcl::cli {

LineReader::LineReader(int fd, std::size_t chunk_bytes, std::function<bool(int fd)> wait_readable,
                       std::size_t max_line_bytes)
    : fd_(fd),
      wait_readable_(std::move(wait_readable)),
      max_line_bytes_(max_line_bytes),
      buffer_(chunk_bytes) {}

bool LineReader::next(std::string_view& line) {
  overlong_ = 0;
  std::size_t let_go = 0;  // the bytes of this line already let go (it is too long)
  // Hands out [begin_, begin_ + size) and moves past it and `skip` more bytes (its '\n').
  auto hand_out = [&](std::size_t size, std::size_t skip) {
    const char* start = buffer_.data() + begin_;
    begin_ += size + skip;
    if (let_go + size > max_line_bytes_) {
      overlong_ = let_go + size;
      line = std::string_view();
    } else {
      line = std::string_view(start, size);
    }
    return true;
  };
  for (;;) {
    const char* start = buffer_.data() + begin_;
    if (const void* nl = std::memchr(start, '\n', end_ - begin_)) {
      return hand_out(static_cast<std::size_t>(static_cast<const char*>(nl) - start), 1);
    }
    if (end_ - begin_ > max_line_bytes_) {
      // Too long to be handed out whole: its bytes are counted, not kept.
      let_go += end_ - begin_;
      begin_ = end_;
    }
    if (at_end_) {
      if (begin_ == end_ && let_go == 0) return false;
      return hand_out(end_ - begin_, 0);
    }
    if (!fill()) at_end_ = true;
    // Stopped: the bytes after the last '\n' may be half a line; none is handed out.
    if (!error_.empty() || stopped_) return false;
  }
}

bool LineReader::fill() {
  // Keep the partial line at the front; a line that fills the buffer grows it.
  std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
  end_ -= begin_;
  begin_ = 0;
  if (end_ == buffer_.size()) buffer_.resize(buffer_.size() * 2);
  for (;;) {
    if (wait_readable_ && !wait_readable_(fd_)) {
      stopped_ = true;
      return false;
    }
    const ssize_t n = ::read(fd_, buffer_.data() + end_, buffer_.size() - end_);
    if (n > 0) {
      end_ += static_cast<std::size_t>(n);
      return true;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    error_ = std::string("read error: ") + std::strerror(errno);
    return false;
  }
}

}  // namespace kcl::cli
