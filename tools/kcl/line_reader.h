// LineReader: the lines of a file descriptor, read a chunk at a time (64 KiB by default) so
// that `kcl put` streams its input: memory holds a chunk, not the input. A line is handed out
// as a view into the chunk, without its '\n' (a '\r' before it stays, as with std::getline);
// a last line without '\n' counts too. A line longer than the buffer grows the buffer, up to
// `max_line_bytes`: a longer line is let go as it is read (memory stays bounded whatever the
// input, a file without a newline too) and handed out empty, overlong() giving its length.
// `wait_readable` (optional) is asked before each read(): false ends the input there (a stop
// signal; a line read only in part is not handed out), and stopped() then says so.
//
// Thread safety: one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kcl::cli {

class LineReader {
 public:
  explicit LineReader(int fd, std::size_t chunk_bytes = 64 * 1024,
                      std::function<bool(int fd)> wait_readable = {},
                      std::size_t max_line_bytes = SIZE_MAX);

  // The next line (valid until the next call); false at the end of the input or on a read
  // error (then error() says which).
  bool next(std::string_view& line);
  // Empty unless reading failed: "read error: <strerror>".
  const std::string& error() const { return error_; }
  // True when wait_readable ended the input (what was read before it was handed out).
  bool stopped() const { return stopped_; }
  // The length in bytes of the line next() handed out when it was longer than max_line_bytes
  // (the line was handed out empty); 0 otherwise.
  std::size_t overlong() const { return overlong_; }

 private:
  // Reads more after the bytes kept; false at the end of the input or on an error.
  bool fill();

  int fd_;
  std::function<bool(int fd)> wait_readable_;
  std::size_t max_line_bytes_;
  std::size_t overlong_ = 0;
  std::vector<char> buffer_;
  std::size_t begin_ = 0;  // the first byte not handed out yet
  std::size_t end_ = 0;    // the end of the bytes read
  bool at_end_ = false;
  bool stopped_ = false;
  std::string error_;
};

}  // namespace kcl::cli
