// make_file_dead_letter_sink: one JSON line per letter, on disk before it is accepted.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "kcl/dead_letter.h"

namespace kcl {

namespace {

class FileSink final : public DeadLetterSink {
 public:
  FileSink(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~FileSink() override { ::close(fd_); }
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  // One write() of the whole line (O_APPEND: lines of concurrent shards never interleave),
  // then fdatasync. A line cut short by a failed write is followed by the whole line when the
  // letter is asked again, so a reader skips lines that do not parse.
  Status accept(const DeadLetter& letter) override {
    const std::string line = dead_letter_json(letter) + "\n";
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return failed("writing to");
      done += static_cast<std::size_t>(n);
    }
    if (::fdatasync(fd_) != 0) return failed("flushing");
    return Status::Ok();
  }
  std::string name() const override { return "file"; }

 private:
  Status failed(const char* what) const {
    return Status(StatusCode::kUnavailable, std::string("dead-letter file: ") + what + " " + path_ +
                                                " failed: " + std::strerror(errno));
  }

  const std::string path_;
  const int fd_;
  std::mutex mu_;
};

}  // namespace

Result<std::shared_ptr<DeadLetterSink>> make_file_dead_letter_sink(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) {
    return Status(StatusCode::kInvalidArgument, "cannot open the dead-letter file " + path +
                                                    " for appending: " + std::strerror(errno));
  }
  return std::shared_ptr<DeadLetterSink>(std::make_shared<FileSink>(path, fd));
}

}  // namespace kcl
