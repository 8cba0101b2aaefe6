// A named pipe as a command's standard output, read by the test as `| head` would read it:
// the pipe is made at `path` and its read end opened first (non-blocking, so the command's
// open for writing does not wait; not inherited, or the command would hold its own reader).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "support/eventually.h"

namespace kcl::testing {

class FifoReader {
 public:
  explicit FifoReader(std::string path) : path_(std::move(path)) {
    ::unlink(path_.c_str());
    if (::mkfifo(path_.c_str(), 0600) != 0) {
      ADD_FAILURE() << "mkfifo " << path_ << ": " << std::strerror(errno);
      return;
    }
    fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) ADD_FAILURE() << "open " << path_ << ": " << std::strerror(errno);
  }
  FifoReader(const FifoReader&) = delete;
  FifoReader& operator=(const FifoReader&) = delete;
  ~FifoReader() {
    close();
    ::unlink(path_.c_str());
  }

  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  // Reads until `lines` lines arrived (true) or `timeout` passed; text() has what was read.
  bool read_lines(std::size_t lines, std::chrono::seconds timeout) {
    return eventually(
        [&] {
          char buf[256];
          const ssize_t n = ::read(fd_, buf, sizeof buf);
          if (n > 0) text_.append(buf, static_cast<std::size_t>(n));
          return static_cast<std::size_t>(std::count(text_.begin(), text_.end(), '\n')) >= lines;
        },
        timeout);
  }
  const std::string& text() const { return text_; }
  // The reader goes away, as `head` exits.
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::string text_;
};

}  // namespace kcl::testing
