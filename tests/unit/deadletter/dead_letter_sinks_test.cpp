// The dead-letter sinks that need no service: the JSON envelope (every field, any bytes), the
// JSON-lines file (one parseable line per letter, appended, a clear error for a path that
// cannot be opened) and the callback sink.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aws/base64.h"
#include "deadletter/dead_letter_parts.h"
#include "kcl/dead_letter.h"

namespace kcl {
namespace {

DeadLetter letter(std::string data, std::string error) {
  Record::Fields f;
  f.shard_id = "shardId-000000000003";
  f.sequence_number = "49590338271490256608559692538361571095921575989136588850";
  f.sub_sequence_number = 2;
  f.partition_key = "customer-42";
  f.approximate_arrival_timestamp =
      std::chrono::system_clock::time_point(std::chrono::milliseconds(1764216000123));
  f.data = std::move(data);
  return DeadLetter{
      "orders",
      "shardId-000000000003",
      Record(std::move(f)),
      std::move(error),
      7,
      std::chrono::system_clock::time_point(std::chrono::milliseconds(1764216012345))};
}

TEST(DeadLetterJsonTest, CarriesThePositionTheErrorAndTheBytes) {
  const std::string bytes("\x00\xff\n{\"x", 5);
  auto j =
      nlohmann::json::parse(dead_letter_json(letter(bytes, "process_records threw: \xff bad")));
  EXPECT_EQ(j["stream"], "orders");
  EXPECT_EQ(j["shard_id"], "shardId-000000000003");
  EXPECT_EQ(j["sequence_number"], "49590338271490256608559692538361571095921575989136588850");
  EXPECT_EQ(j["sub_sequence_number"], 2);
  EXPECT_EQ(j["partition_key"], "customer-42");
  EXPECT_EQ(j["approximate_arrival_timestamp"], 1764216000123);
  EXPECT_EQ(j["dead_lettered_at"], 1764216012345);
  EXPECT_EQ(j["attempts"], 7);
  EXPECT_NE(j["error"].get<std::string>().find("bad"), std::string::npos)
      << "invalid UTF-8 in the error is replaced, not a throw";
  auto data = aws::base64_decode(j["data"].get<std::string>());
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, bytes);
  EXPECT_EQ(dead_letter_json(letter("x", "e")).find('\n'), std::string::npos) << "one line";
}

TEST(DeadLetterJsonTest, ALetterTooLargeForOneRecordIsCutIntoPartsThatJoinBack) {
  // 900 KB of bytes: 1.2 MB of base64, over a Kinesis record's 1 MiB.
  std::string bytes(900 * 1024, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 % 251);
  const DeadLetter big = letter(bytes, std::string(10000, 'e'));
  const std::size_t max = (std::size_t{1} << 20) - 11;  // the room a key of 11 bytes leaves
  const auto parts = deadletter::dead_letter_json_parts(big, max);
  ASSERT_EQ(parts.size(), 2u);
  std::string joined;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    EXPECT_LE(parts[i].size(), max);
    auto j = nlohmann::json::parse(parts[i]);
    EXPECT_EQ(j["part"], i + 1);
    EXPECT_EQ(j["parts"], 2);
    EXPECT_EQ(j["sequence_number"], "49590338271490256608559692538361571095921575989136588850");
    const std::string error = j["error"];
    EXPECT_EQ(error.rfind(std::string(4096, 'e') + "...", 0), 0u) << "a long error is cut";
    EXPECT_NE(error.find("10000 bytes"), std::string::npos) << "saying so: " << error.substr(4090);
    const std::string slice = j["data"];
    EXPECT_TRUE(aws::base64_decode(slice).ok()) << "each slice decodes alone";
    joined += slice;
  }
  auto data = aws::base64_decode(joined);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, bytes);
  // A letter that fits is the one object dead_letter_json makes.
  const DeadLetter small = letter("x", "e");
  EXPECT_EQ(deadletter::dead_letter_json_parts(small, max),
            std::vector<std::string>{dead_letter_json(small)});
}

// A letter over the room only because of its error (an exception quoting a whole payload)
// and with no data: one part, its error cut, saying so (it made no part at all, and the
// stream sink accepted it having written nothing).
TEST(DeadLetterJsonTest, ALetterTooLargeOnlyForItsErrorIsOnePartWithItsErrorCut) {
  const std::size_t error_bytes = std::size_t{2} << 20;
  const DeadLetter big = letter("", std::string(error_bytes, 'e'));
  const std::size_t max = (std::size_t{1} << 20) - 11;
  const auto parts = deadletter::dead_letter_json_parts(big, max);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_LE(parts[0].size(), max);
  auto j = nlohmann::json::parse(parts[0]);
  EXPECT_EQ(j["part"], 1);
  EXPECT_EQ(j["parts"], 1);
  EXPECT_EQ(j["data"], "");
  EXPECT_EQ(j["sequence_number"], "49590338271490256608559692538361571095921575989136588850");
  const std::string error = j["error"];
  EXPECT_EQ(error.rfind(std::string(4096, 'e'), 0), 0u) << "its first 4 KiB";
  EXPECT_NE(error.find(std::to_string(error_bytes) + " bytes"), std::string::npos)
      << "the cut is said: " << error.substr(4090);
}

TEST(FileDeadLetterSinkTest, AppendsOneLinePerLetter) {
  char tmpl[] = "/tmp/kcl-dead-letter-unit-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  { std::ofstream(tmpl) << "{\"earlier\":true}\n"; }
  auto sink = make_file_dead_letter_sink(tmpl);
  ASSERT_TRUE(sink.ok()) << sink.status();
  EXPECT_EQ((*sink)->name(), "file");
  ASSERT_TRUE((*sink)->accept(letter("one", "e1")).ok());
  ASSERT_TRUE((*sink)->accept(letter("two", "e2")).ok());
  std::ifstream in(tmpl);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ::unlink(tmpl);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(nlohmann::json::parse(lines[1])["error"], "e1");
  EXPECT_EQ(nlohmann::json::parse(lines[2])["error"], "e2");
}

// Every line of `path` that parses as JSON, by its "error".
std::vector<std::string> parsed_errors(const char* path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) {
    auto j = nlohmann::json::parse(l, nullptr, false);
    if (j.is_object() && j.contains("error")) out.push_back(j["error"]);
  }
  return out;
}

TEST(FileDeadLetterSinkTest, ALetterCutShortByAFullDiskIsWholeOnItsOwnLineWhenAskedAgain) {
  char tmpl[] = "/tmp/kcl-dead-letter-unit-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  auto sink = make_file_dead_letter_sink(tmpl);
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->accept(letter("one", "e1")).ok());
  // The disk fills 100 bytes further: the next letter's line is cut short and refused.
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &before), 0);
  struct stat st {};
  ASSERT_EQ(::stat(tmpl, &st), 0);
  rlimit full = before;
  full.rlim_cur = static_cast<rlim_t>(st.st_size) + 100;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &full), 0);
  const Status cut = (*sink)->accept(letter(std::string(4096, 'x'), "e2"));
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &before), 0);
  EXPECT_EQ(cut.code(), StatusCode::kUnavailable) << cut;
  // Room again: the letter asked again, and one more; then a new sink on the same file
  // after another piece was left (a process that stopped mid-write).
  ASSERT_TRUE((*sink)->accept(letter(std::string(4096, 'x'), "e2")).ok());
  ASSERT_TRUE((*sink)->accept(letter("three", "e3")).ok());
  { std::ofstream(tmpl, std::ios::app) << "{\"piece\":"; }
  auto again = make_file_dead_letter_sink(tmpl);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE((*again)->accept(letter("four", "e4")).ok());
  const std::vector<std::string> errors = parsed_errors(tmpl);
  ::unlink(tmpl);
  EXPECT_EQ(errors, (std::vector<std::string>{"e1", "e2", "e3", "e4"}));
}

// A file the sink creates (its directory entry flushed once, so the file that holds the
// letters survives a crash) takes letters as one that was there.
TEST(FileDeadLetterSinkTest, CreatesTheFileWhenItIsNotThere) {
  char dir[] = "/tmp/kcl-dead-letter-dir-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/poison.jsonl";
  auto sink = make_file_dead_letter_sink(path);
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->accept(letter("one", "e1")).ok());
  const std::vector<std::string> errors = parsed_errors(path.c_str());
  ::unlink(path.c_str());
  ::rmdir(dir);
  EXPECT_EQ(errors, std::vector<std::string>{"e1"});
}

// A file rotated away (renamed, as logrotate does) or deleted while the sink is open: the
// next letters go to a new file at the path, those before stay in the renamed one, and a
// directory that cannot take the new file is named in the refusal.
TEST(FileDeadLetterSinkTest, FollowsThePathWhenTheFileIsRotatedOrDeleted) {
  char dir[] = "/tmp/kcl-dead-letter-dir-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/poison.jsonl";
  const std::string rotated = path + ".1";
  auto sink = make_file_dead_letter_sink(path);
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->accept(letter("one", "e1")).ok());
  ASSERT_EQ(::rename(path.c_str(), rotated.c_str()), 0);
  ASSERT_TRUE((*sink)->accept(letter("two", "e2")).ok());
  ASSERT_TRUE((*sink)->accept(letter("three", "e3")).ok());
  EXPECT_EQ(parsed_errors(rotated.c_str()), std::vector<std::string>{"e1"});
  EXPECT_EQ(parsed_errors(path.c_str()), (std::vector<std::string>{"e2", "e3"}));

  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_TRUE((*sink)->accept(letter("four", "e4")).ok());
  EXPECT_EQ(parsed_errors(path.c_str()), std::vector<std::string>{"e4"});

  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::unlink(rotated.c_str()), 0);
  ASSERT_EQ(::rmdir(dir), 0);  // the directory is gone too: the letter is refused, by name
  const Status refused = (*sink)->accept(letter("five", "e5"));
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused;
  EXPECT_NE(refused.message().find(path), std::string::npos) << refused;
}

TEST(FileDeadLetterSinkTest, APathThatCannotBeOpenedIsNamed) {
  auto sink = make_file_dead_letter_sink("/nonexistent-dir/poison.jsonl");
  ASSERT_FALSE(sink.ok());
  EXPECT_EQ(sink.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(sink.status().message().find("/nonexistent-dir/poison.jsonl"), std::string::npos);
}

TEST(CallbackDeadLetterSinkTest, PassesTheLetterAndTheAnswer) {
  std::vector<std::string> seen;
  auto sink = make_callback_dead_letter_sink(
      [&](const DeadLetter& l) {
        seen.emplace_back(l.record.data());
        return seen.size() == 1 ? Status(StatusCode::kUnavailable, "down") : Status::Ok();
      },
      "audit-store");
  EXPECT_EQ(sink->name(), "audit-store");
  EXPECT_EQ(sink->accept(letter("a", "e")).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(sink->accept(letter("a", "e")).ok());
  EXPECT_EQ(seen.size(), 2u);
}

}  // namespace
}  // namespace kcl
