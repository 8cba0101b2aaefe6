// make_file_dead_letter_sink: one JSON line per letter, on disk before it is accepted.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include "base/status_macros.h"
#include "kcl/dead_letter.h"

namespace kcl {

namespace {

// The directory holding `path` ("." for a bare name).
std::string parent_directory(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Makes a new file's entry in its directory durable: fdatasync of the file keeps its lines,
// not its name, so after a crash the letters accepted could be in no file at all.
Status sync_parent_directory(const std::string& path) {
  const std::string dir = parent_directory(path);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return Status(StatusCode::kUnavailable, "dead-letter file " + path + " was created but " +
                                                "flushing its directory " + dir +
                                                " failed: " + std::strerror(err));
  }
  ::close(fd);
  return Status::Ok();
}

// Opens `path` for appending, creating it if needed; `created` tells whether it was.
int open_for_appending(const std::string& path, bool& created) {
  const int flags = O_WRONLY | O_APPEND | O_CLOEXEC;
  int fd = ::open(path.c_str(), flags | O_CREAT | O_EXCL, 0640);
  created = fd >= 0;
  if (fd < 0 && errno == EEXIST) fd = ::open(path.c_str(), flags);
  return fd;
}

// Whether the file at `path` ends inside a line (a write cut short by an earlier process).
bool ends_inside_a_line(const std::string& path) {
  bool torn = false;
  const int reader = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (reader >= 0) {
    const off_t size = ::lseek(reader, 0, SEEK_END);
    char last = '\n';
    if (size > 0 && ::pread(reader, &last, 1, size - 1) == 1) torn = last != '\n';
    ::close(reader);
  }
  return torn;
}

// Opens `path` for appending (see open_for_appending); a file it creates has its directory
// entry flushed. The descriptor, or what failed.
Result<int> open_sink_file(const std::string& path) {
  bool created = false;
  const int fd = open_for_appending(path, created);
  if (fd < 0) {
    return Status(StatusCode::kInvalidArgument, "cannot open the dead-letter file " + path +
                                                    " for appending: " + std::strerror(errno));
  }
  if (created) {
    if (Status synced = sync_parent_directory(path); !synced.ok()) {
      ::close(fd);
      return synced;
    }
  }
  return fd;
}

class FileSink final : public DeadLetterSink {
 public:
  // `torn`: the file does not end with a line end (a write cut short before this process).
  FileSink(std::string path, int fd, bool torn) : path_(std::move(path)), fd_(fd), torn_(torn) {}
  ~FileSink() override { ::close(fd_); }
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  // One write() of the whole line (O_APPEND: lines of concurrent shards never interleave),
  // then fdatasync. A line cut short by a failed write (a full disk) is ended before the next
  // one, which starts a line of its own: the letter asked again is whole on its line, and a
  // reader skips the piece, which does not parse.
  Status accept(const DeadLetter& letter) override {
    std::lock_guard<std::mutex> lock(mu_);
    KCL_RETURN_IF_ERROR(follow_path());
    const std::string line = (torn_ ? "\n" : "") + dead_letter_json(letter) + "\n";
    std::size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (done > 0) torn_ = true;
        // write() of a regular file that returns 0 sets no errno: say what happened.
        return n == 0 ? failed("writing to", "write() wrote nothing") : failed("writing to");
      }
      done += static_cast<std::size_t>(n);
      torn_ = false;  // the piece before was ended by the line end this one starts with
    }
    if (::fdatasync(fd_) != 0) return failed("flushing");
    return Status::Ok();
  }
  std::string name() const override { return "file"; }

 private:
  // A file rotated away (renamed by logrotate, say) or deleted since it was opened: the
  // letters go to a new file at the path, as a log's writer reopens its log; those written
  // before stay in the old one. Without this they went on into the renamed file (compressed
  // or deleted later: letters lost) while the path stayed empty. Guarded by mu_.
  Status follow_path() {
    struct stat at_path {};
    struct stat held {};
    if (::stat(path_.c_str(), &at_path) == 0 && ::fstat(fd_, &held) == 0 &&
        at_path.st_dev == held.st_dev && at_path.st_ino == held.st_ino) {
      return Status::Ok();
    }
    auto fd = open_sink_file(path_);
    if (!fd.ok()) {
      return Status(StatusCode::kUnavailable,
                    "dead-letter file: the file was moved or deleted and reopening it failed: " +
                        fd.status().message());
    }
    ::close(fd_);
    fd_ = *fd;
    torn_ = ends_inside_a_line(path_);
    return Status::Ok();
  }

  Status failed(const char* what) const { return failed(what, std::strerror(errno)); }
  Status failed(const char* what, const std::string& why) const {
    return Status(StatusCode::kUnavailable,
                  std::string("dead-letter file: ") + what + " " + path_ + " failed: " + why);
  }

  const std::string path_;
  std::mutex mu_;
  int fd_;     // guarded by mu_
  bool torn_;  // guarded by mu_: the file's last line is a piece of one
};

}  // namespace

Result<std::shared_ptr<DeadLetterSink>> make_file_dead_letter_sink(const std::string& path) {
  auto fd = open_sink_file(path);
  if (!fd.ok()) return fd.status();
  return std::shared_ptr<DeadLetterSink>(
      std::make_shared<FileSink>(path, *fd, ends_inside_a_line(path)));
}

}  // namespace kcl
