// The event-stream decoder: AWS's test vectors (../shared/data/aws-eventstream-test-suite;
// skipped when absent), round trips of every header type, and a fuzz-style test with fixed
// seeds (random messages, random splits, random corruptions, huge length prefixes) that must
// never crash, never buffer from an unchecked length, and always give either the right
// messages or a clear error.
#include "eventstream/event_stream.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "aws/base64.h"

namespace kcl::eventstream {
namespace {

namespace fs = std::filesystem;

const fs::path kSuite = KCL_EVENTSTREAM_SUITE_DIR;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Decodes `bytes` fed `step` bytes at a time (0 = all at once).
Status decode(const std::string& bytes, std::size_t step, std::vector<Message>& out) {
  Decoder d;
  if (step == 0) return d.feed(bytes, out);
  for (std::size_t i = 0; i < bytes.size(); i += step) {
    Status s = d.feed(std::string_view(bytes).substr(i, step), out);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

void expect_matches(const Message& m, const nlohmann::json& want, const std::string& name) {
  ASSERT_EQ(m.headers.size(), want["headers"].size()) << name;
  for (std::size_t i = 0; i < m.headers.size(); ++i) {
    const Header& h = m.headers[i];
    const auto& w = want["headers"][i];
    SCOPED_TRACE(name + " header " + h.name);
    EXPECT_EQ(h.name, w["name"].get<std::string>());
    EXPECT_EQ(static_cast<int>(h.value.type), w["type"].get<int>());
    switch (h.value.type) {
      case HeaderType::kBoolTrue:
      case HeaderType::kBoolFalse:
        EXPECT_EQ(h.value.boolean, w["value"].get<bool>());
        break;
      case HeaderType::kBytes:
      case HeaderType::kString:
      case HeaderType::kUuid: {
        auto bytes = aws::base64_decode(w["value"].get<std::string>());
        ASSERT_TRUE(bytes.ok());
        EXPECT_EQ(h.value.bytes, *bytes);
        break;
      }
      default:
        EXPECT_EQ(h.value.integer, w["value"].get<std::int64_t>());
    }
  }
  auto payload = aws::base64_decode(want["payload"].get<std::string>());
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(m.payload(), *payload) << name;
}

TEST(EventStreamVectorsTest, PositiveVectorsDecodeToWhatTheSuiteSays) {
  if (!fs::exists(kSuite)) GTEST_SKIP() << "no test vectors at " << kSuite;
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(kSuite / "encoded" / "positive")) {
    const std::string name = entry.path().filename().string();
    const std::string bytes = read_file(entry.path());
    const auto want = nlohmann::json::parse(read_file(kSuite / "decoded" / "positive" / name));
    EXPECT_EQ(bytes.size(), want["total_length"].get<std::size_t>()) << name;
    for (std::size_t step : {0, 1, 7}) {
      std::vector<Message> out;
      Status s = decode(bytes, step, out);
      ASSERT_TRUE(s.ok()) << name << ": " << s;
      ASSERT_EQ(out.size(), 1u) << name;
      expect_matches(out[0], want, name);
    }
    // The encoder writes the same bytes back.
    std::vector<Message> out;
    ASSERT_TRUE(decode(bytes, 0, out).ok());
    EXPECT_EQ(encode(out[0]), bytes) << name;
    ++cases;
  }
  EXPECT_GE(cases, 5);
}

TEST(EventStreamVectorsTest, NegativeVectorsAreRefusedWithTheirReason) {
  if (!fs::exists(kSuite)) GTEST_SKIP() << "no test vectors at " << kSuite;
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(kSuite / "encoded" / "negative")) {
    const std::string name = entry.path().filename().string();
    std::string reason = read_file(kSuite / "decoded" / "negative" / name);
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == '\r')) reason.pop_back();
    std::vector<Message> out;
    Status s = decode(read_file(entry.path()), 0, out);
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_TRUE(out.empty()) << name;
    EXPECT_NE(lower(s.message()).find(lower(reason)), std::string::npos)
        << name << ": " << s << " (expected: " << reason << ")";
    EXPECT_NE(s.message().find("byte 0"), std::string::npos) << "names where: " << s;
    ++cases;
  }
  EXPECT_GE(cases, 4);
}

Message sample(std::mt19937& rng, int headers, std::size_t payload) {
  Message m;
  for (int i = 0; i < headers; ++i) {
    Header h;
    h.name = "h" + std::to_string(i);
    const auto type = static_cast<HeaderType>(rng() % 10);
    h.value.type = type;
    switch (type) {
      case HeaderType::kBoolTrue:
        h.value.boolean = true;
        break;
      case HeaderType::kBoolFalse:
        h.value.boolean = false;
        break;
      case HeaderType::kByte:
        h.value.integer = static_cast<std::int8_t>(rng());
        break;
      case HeaderType::kShort:
        h.value.integer = static_cast<std::int16_t>(rng());
        break;
      case HeaderType::kInt:
        h.value.integer = static_cast<std::int32_t>(rng());
        break;
      case HeaderType::kLong:
      case HeaderType::kTimestamp:
        h.value.integer = static_cast<std::int64_t>((std::uint64_t{rng()} << 32) | rng());
        break;
      case HeaderType::kBytes:
      case HeaderType::kString:
        h.value.bytes = std::string(rng() % 40, static_cast<char>('a' + rng() % 26));
        break;
      case HeaderType::kUuid:
        h.value.bytes = std::string(16, static_cast<char>(rng()));
        break;
    }
    m.headers.push_back(std::move(h));
  }
  std::string bytes(payload, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  m.set_payload(std::move(bytes));
  return m;
}

bool same(const Message& a, const Message& b) {
  if (a.payload() != b.payload() || a.headers.size() != b.headers.size()) return false;
  for (std::size_t i = 0; i < a.headers.size(); ++i) {
    const auto& x = a.headers[i];
    const auto& y = b.headers[i];
    if (x.name != y.name || x.value.type != y.value.type || x.value.integer != y.value.integer ||
        x.value.bytes != y.value.bytes || x.value.boolean != y.value.boolean) {
      return false;
    }
  }
  return true;
}

TEST(EventStreamDecoderTest, EveryHeaderTypeRoundTripsThroughAnySplit) {
  std::mt19937 rng(1);
  for (int round = 0; round < 50; ++round) {
    std::vector<Message> sent;
    std::string stream;
    for (int i = 0; i < 5; ++i) {
      sent.push_back(sample(rng, static_cast<int>(rng() % 12), rng() % 3000));
      stream += encode(sent.back());
    }
    Decoder d;
    std::vector<Message> got;
    std::size_t at = 0;
    while (at < stream.size()) {
      const std::size_t n = 1 + rng() % 700;
      ASSERT_TRUE(d.feed(std::string_view(stream).substr(at, n), got).ok());
      at += n;
    }
    ASSERT_EQ(got.size(), sent.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same(got[i], sent[i])) << i;
    EXPECT_EQ(d.buffered(), 0u);
  }
}

TEST(EventStreamDecoderTest, CrcMatchesZlibForAnyLengthAndAnySplit) {
  std::mt19937 rng(7);
  std::string bytes(70000, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  for (std::size_t len : {0, 1, 3, 15, 16, 63, 64, 65, 255, 256, 4095, 65536, 70000}) {
    const auto want = static_cast<std::uint32_t>(
        ::crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(len)));
    EXPECT_EQ(eventstream::crc32(0, std::string_view(bytes).substr(0, len)), want) << len;
    // Continued over two pieces, as the decoder takes it piece by piece.
    const std::size_t cut = len ? rng() % len : 0;
    const std::uint32_t first = eventstream::crc32(0, std::string_view(bytes).substr(0, cut));
    EXPECT_EQ(eventstream::crc32(first, std::string_view(bytes).substr(cut, len - cut)), want)
        << len << " cut at " << cut;
  }
}

TEST(EventStreamDecoderTest, APayloadIsAViewIntoItsFrameWithRoomForAParserToReadAhead) {
  std::mt19937 rng(3);
  const Message sent = sample(rng, 3, 5000);
  const std::string bytes = encode(sent);
  for (std::size_t step : {0, 1, 100, 4999}) {
    std::vector<Message> got;
    ASSERT_TRUE(decode(bytes, step, got).ok());
    ASSERT_EQ(got.size(), 1u);
    const Message& m = got[0];
    EXPECT_EQ(m.frame, bytes) << "the frame is the message as it came";
    EXPECT_EQ(m.payload(), sent.payload());
    EXPECT_EQ(m.payload().data(), m.frame.data() + m.payload_offset);
    EXPECT_GE(m.frame.capacity(), m.frame.size() + Message::kPayloadSlack) << step;
  }
}

TEST(EventStreamDecoderTest, LargeFramesComeFromTheRecyclerGivenAndSmallOnesDoNot) {
  base::CapacityRecycler<std::string> buffers(4, 16u << 20);
  std::string kept;
  kept.reserve(400000);
  buffers.give(std::move(kept));
  std::mt19937 rng(5);
  const Message big = sample(rng, 2, 300000);
  const Message small = sample(rng, 2, 1000);
  const std::string stream = encode(small) + encode(big) + encode(big);
  Decoder d(Decoder::kDefaultMaxMessageBytes, &buffers);
  std::vector<Message> got;
  for (std::size_t at = 0; at < stream.size(); at += 16384) {
    ASSERT_TRUE(d.feed(std::string_view(stream).substr(at, 16384), got).ok());
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(same(got[0], small));
  EXPECT_TRUE(same(got[1], big));
  EXPECT_TRUE(same(got[2], big));
  const auto counts = buffers.counts();
  EXPECT_EQ(counts.reused, 1u) << "the first large frame went into the kept buffer";
  EXPECT_EQ(counts.fresh, 1u) << "the second needed a new one; the small frame is not counted";
  EXPECT_GE(got[1].frame.capacity(), 400000u);
}

// A 12-byte prelude with a correct CRC over the given lengths.
std::string prelude(std::uint32_t total, std::uint32_t headers) {
  std::string p;
  for (std::uint32_t v : {total, headers}) {
    for (int sh = 24; sh >= 0; sh -= 8) p.push_back(static_cast<char>((v >> sh) & 0xff));
  }
  const auto crc = static_cast<std::uint32_t>(
      ::crc32(0L, reinterpret_cast<const Bytef*>(p.data()), static_cast<uInt>(p.size())));
  for (int sh = 24; sh >= 0; sh -= 8) p.push_back(static_cast<char>((crc >> sh) & 0xff));
  return p;
}

TEST(EventStreamDecoderTest, BadLengthsAreRefusedAtThePreludeWithoutBuffering) {
  struct Case {
    std::uint32_t total, headers;
    const char* why;
  };
  for (const Case& c : {Case{0x7ffffff0u, 0, "above the maximum"}, Case{8, 0, "below 16"},
                        Case{100, 90, "headers length past the message"}}) {
    Decoder d(1024);
    std::vector<Message> out;
    Status s = d.feed(prelude(c.total, c.headers), out);
    ASSERT_FALSE(s.ok()) << c.why;
    EXPECT_NE(s.message().find(c.why), std::string::npos) << s;
    EXPECT_LE(d.buffered(), 12u) << "nothing waits for (or allocates) the claimed length";
    EXPECT_TRUE(d.failed());
    EXPECT_FALSE(d.feed("more", out).ok()) << "stays failed";
  }
}

TEST(EventStreamDecoderTest, RandomCorruptionsNeverCrashAndNeverDeliverGarbage) {
  for (unsigned seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    std::vector<Message> sent;
    std::string stream;
    for (int i = 0; i < 4; ++i) {
      sent.push_back(sample(rng, static_cast<int>(rng() % 6), rng() % 500));
      stream += encode(sent.back());
    }
    std::string bad = stream;
    switch (rng() % 3) {
      case 0:  // flip a bit somewhere
        bad[rng() % bad.size()] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:  // cut it short
        bad.resize(rng() % bad.size());
        break;
      case 2:  // garbage in the middle
        for (int k = 0; k < 8; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
        break;
    }
    Decoder d(64 * 1024);
    std::vector<Message> got;
    Status s;
    std::size_t at = 0;
    while (at < bad.size() && s.ok()) {
      const std::size_t n = 1 + rng() % 300;
      s = d.feed(std::string_view(bad).substr(at, n), got);
      at += n;
      ASSERT_LE(d.buffered(), 64u * 1024 + 300) << "seed " << seed;
    }
    // Whatever was delivered is exactly a prefix of what was sent (CRCs catch the rest).
    ASSERT_LE(got.size(), sent.size()) << "seed " << seed;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(same(got[i], sent[i])) << "seed " << seed << " message " << i;
    }
    if (!s.ok()) {
      EXPECT_NE(s.message().find("at byte"), std::string::npos) << s;
    }
  }
}

}  // namespace
}  // namespace kcl::eventstream
