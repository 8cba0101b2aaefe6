// The stderr logger's two formats, read back from a file standing in for stderr.
#include "kcl/logging.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kcl {
namespace {

// Runs `f` with stderr redirected to a file; the lines written.
template <typename F>
std::vector<std::string> capture_stderr(F f) {
  const std::string path = ::testing::TempDir() + "/logging-" + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int saved = ::dup(2);
  ::dup2(fd, 2);
  f();
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

TEST(LoggingTest, JsonLinesEscapeEverythingAndKeepOneObjectPerLine) {
  auto logger = make_stderr_logger(LogLevel::kInfo, LogFormat::kJson);
  const std::string message = "lease \"shardId-1\" lost\nsecond line\ttab \\ and \x01";
  auto lines = capture_stderr([&] {
    logger->log(LogLevel::kWarn, "worker w-1", message);
    logger->log(LogLevel::kDebug, "worker w-1", "below the threshold");
  });
  ASSERT_EQ(lines.size(), 1u);
  auto doc = nlohmann::json::parse(lines[0], nullptr, false);
  ASSERT_TRUE(doc.is_object()) << lines[0];
  EXPECT_EQ(doc["level"], "WARN");
  EXPECT_EQ(doc["component"], "worker w-1");
  EXPECT_EQ(doc["message"], message);
  const std::string time = doc["time"];
  EXPECT_EQ(time.size(), 24u) << time;
  EXPECT_EQ(time.back(), 'Z');
}

TEST(LoggingTest, TextLinesAsBefore) {
  auto logger = make_stderr_logger(LogLevel::kInfo);
  auto lines = capture_stderr([&] { logger->log(LogLevel::kInfo, "lease", "taken"); });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(" INFO  [lease] taken"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace kcl
