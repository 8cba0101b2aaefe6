// LineReader over a pipe: lines split across chunks, a line longer than the buffer (which
// grows), empty lines, a '\r' kept as std::getline keeps it, a last line without '\n', an
// empty input, and a stop (wait_readable) that ends the input without half a line.
#include "line_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

namespace kcl::cli {
namespace {

// The lines LineReader (with a buffer of `chunk` bytes) reads from `input` sent down a pipe.
std::vector<std::string> read_lines(const std::string& input, std::size_t chunk) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  std::thread writer([&] {
    std::size_t at = 0;
    while (at < input.size()) {
      const ssize_t n =
          ::write(fds[1], input.data() + at, std::min<std::size_t>(5, input.size() - at));
      if (n <= 0) break;
      at += static_cast<std::size_t>(n);
    }
    ::close(fds[1]);
  });
  LineReader reader(fds[0], chunk);
  std::vector<std::string> lines;
  std::string_view line;
  while (reader.next(line)) lines.emplace_back(line);
  EXPECT_EQ(reader.error(), "");
  writer.join();
  ::close(fds[0]);
  return lines;
}

TEST(LineReaderTest, LinesAcrossChunksLongLinesAndTheLastLineWithoutNewline) {
  const std::string long_line(100, 'L');
  const std::string input = "one\n\ntwo\r\n" + long_line + "\nthree\nlast";
  const std::vector<std::string> expected = {"one", "", "two\r", long_line, "three", "last"};
  for (std::size_t chunk : {1u, 3u, 8u, 64u, 4096u}) {
    EXPECT_EQ(read_lines(input, chunk), expected) << "chunk " << chunk;
  }
  EXPECT_EQ(read_lines("a\nb\n", 4), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(read_lines("", 16).empty());
}

// A stop signal during `kcl put`: the lines read whole are handed out, the half line after
// them is not, and stopped() says why the input ended.
TEST(LineReaderTest, AStopEndsTheInputWithoutItsHalfLine) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "one\ntwo\nhal", 12), 12);
  int reads = 0;
  LineReader reader(fds[0], 64, [&](int) { return ++reads == 1; });
  std::vector<std::string> lines;
  std::string_view line;
  while (reader.next(line)) lines.emplace_back(line);
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two"}));
  EXPECT_TRUE(reader.stopped());
  EXPECT_EQ(reader.error(), "");
  ::close(fds[1]);
  ::close(fds[0]);
}

// A line longer than max_line_bytes (a file without a newline, in `kcl put`) is let go as it is
// read: the buffer stays near the chunk size plus the bound, the line comes out empty with its
// length, and the lines around it come out whole.
TEST(LineReaderTest, ALineOverTheBoundIsLetGoAndCounted) {
  const std::string huge(1u << 20, 'H');
  const std::string input = "one\n" + huge + "\n" + std::string(16, 'x') + "\n" + huge;
  for (std::size_t chunk : {1u, 7u, 64u, 4096u}) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    std::thread writer([&] {
      std::size_t at = 0;
      while (at < input.size()) {
        const ssize_t n = ::write(fds[1], input.data() + at,
                                  std::min<std::size_t>(chunk * 3 + 1, input.size() - at));
        if (n <= 0) break;
        at += static_cast<std::size_t>(n);
      }
      ::close(fds[1]);
    });
    LineReader reader(fds[0], chunk, {}, /*max_line_bytes=*/16);
    std::vector<std::pair<std::string, std::size_t>> lines;
    std::string_view line;
    while (reader.next(line)) lines.emplace_back(std::string(line), reader.overlong());
    writer.join();
    ::close(fds[0]);
    const std::vector<std::pair<std::string, std::size_t>> expected = {
        {"one", 0}, {"", huge.size()}, {std::string(16, 'x'), 0}, {"", huge.size()}};
    EXPECT_EQ(lines, expected) << "chunk " << chunk;
    EXPECT_EQ(reader.error(), "");
  }
}

TEST(LineReaderTest, AReadErrorIsReported) {
  LineReader reader(-1, 16);
  std::string_view line;
  EXPECT_FALSE(reader.next(line));
  EXPECT_NE(reader.error().find("read error"), std::string::npos);
}

}  // namespace
}  // namespace kcl::cli
