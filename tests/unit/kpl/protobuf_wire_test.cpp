#include "kpl/protobuf_wire.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "support/kpl_builder.h"

namespace kcl::kpl::pb {
namespace {

namespace t = kcl::testing;

// The reader borrows its bytes; tests keep them alive in a holder next to it.
struct Bytes {
  explicit Bytes(std::string b) : bytes(std::move(b)), reader(bytes) {}
  Bytes(const Bytes&) = delete;
  Bytes& operator=(const Bytes&) = delete;
  std::string bytes;
  WireReader reader;
};

TEST(KplProtobufWireTest, VarintsRoundTripAndMatchTheIndependentEncoder) {
  const std::uint64_t values[] = {0,          1,
                                  127,        128,
                                  300,        16383,
                                  16384,      (1ull << 32) - 1,
                                  1ull << 32, (1ull << 63) - 1,
                                  1ull << 63, std::numeric_limits<std::uint64_t>::max()};
  for (std::uint64_t v : values) {
    std::string mine;
    append_varint(mine, v);
    EXPECT_EQ(mine, t::varint(v)) << v;
    EXPECT_EQ(varint_size(v), mine.size()) << v;
    WireReader r(mine);
    std::uint64_t got = 0;
    ASSERT_TRUE(r.read_varint(got)) << v;
    EXPECT_EQ(got, v);
    EXPECT_TRUE(r.at_end());
  }
  EXPECT_EQ(t::to_hex(t::varint(300)), "ac02");  // the protobuf docs' example
}

TEST(KplProtobufWireTest, WritersMatchTheIndependentEncoder) {
  std::string mine;
  append_varint_field(mine, 1, 150);
  append_bytes_field(mine, 2, "testing");
  append_fixed32_field(mine, 15, 0xDEADBEEF);
  append_fixed64_field(mine, 16, 0x0102030405060708ull);
  append_bytes_field(mine, kMaxFieldNumber, "");
  const std::string theirs =
      t::varint_field(1, 150) + t::bytes_field(2, "testing") + t::fixed32_field(15, 0xDEADBEEF) +
      t::fixed64_field(16, 0x0102030405060708ull) + t::bytes_field(kMaxFieldNumber, "");
  EXPECT_EQ(t::to_hex(mine), t::to_hex(theirs));
  EXPECT_EQ(t::to_hex(t::varint_field(1, 150)), "089601");  // protobuf docs
  EXPECT_EQ(t::to_hex(t::bytes_field(2, "testing")), "120774657374696e67");
}

TEST(KplProtobufWireTest, ReadsEveryWireTypeAndSkipsThem) {
  const std::string bytes = t::varint_field(1, 150) + t::fixed64_field(2, 0x1122334455667788ull) +
                            t::bytes_field(3, "abc") + t::fixed32_field(4, 0x99AABBCCu);
  {
    WireReader r(bytes);
    std::uint32_t f = 0;
    WireType w{};
    std::uint64_t v = 0;
    std::uint32_t v32 = 0;
    std::string_view s;
    ASSERT_TRUE(r.read_key(f, w));
    EXPECT_EQ(f, 1u);
    EXPECT_EQ(w, WireType::kVarint);
    ASSERT_TRUE(r.read_varint(v));
    EXPECT_EQ(v, 150u);
    ASSERT_TRUE(r.read_key(f, w));
    EXPECT_EQ(w, WireType::kFixed64);
    ASSERT_TRUE(r.read_fixed64(v));
    EXPECT_EQ(v, 0x1122334455667788ull);
    ASSERT_TRUE(r.read_key(f, w));
    EXPECT_EQ(w, WireType::kLengthDelimited);
    ASSERT_TRUE(r.read_length_delimited(s));
    EXPECT_EQ(s, "abc");
    ASSERT_TRUE(r.read_key(f, w));
    EXPECT_EQ(f, 4u);
    EXPECT_EQ(w, WireType::kFixed32);
    ASSERT_TRUE(r.read_fixed32(v32));
    EXPECT_EQ(v32, 0x99AABBCCu);
    EXPECT_TRUE(r.at_end());
  }
  {
    WireReader r(bytes);
    int fields = 0;
    while (!r.at_end()) {
      std::uint32_t f = 0;
      WireType w{};
      ASSERT_TRUE(r.read_key(f, w));
      ASSERT_TRUE(r.skip(w));
      ++fields;
    }
    EXPECT_EQ(fields, 4);
    EXPECT_FALSE(r.failed());
  }
}

TEST(KplProtobufWireTest, TenByteVarintLimit) {
  std::uint64_t v = 0;
  {  // 2^64-1: nine 0xFF then 0x01
    Bytes b(t::from_hex("ffffffffffffffffff01"));
    WireReader& r = b.reader;
    ASSERT_TRUE(r.read_varint(v));
    EXPECT_EQ(v, std::numeric_limits<std::uint64_t>::max());
  }
  {  // the 10th byte carries bit 64
    Bytes b(t::from_hex("ffffffffffffffffff02"));
    WireReader& r = b.reader;
    EXPECT_FALSE(r.read_varint(v));
    EXPECT_STREQ(r.error(), "varint overflows 64 bits");
  }
  {  // 11 bytes
    Bytes b(t::from_hex("ffffffffffffffffff8100"));
    WireReader& r = b.reader;
    EXPECT_FALSE(r.read_varint(v));
  }
  {  // overlong but in range: accepted, as libprotobuf does
    Bytes b(t::from_hex("8000"));
    WireReader& r = b.reader;
    ASSERT_TRUE(r.read_varint(v));
    EXPECT_EQ(v, 0u);
  }
}

TEST(KplProtobufWireTest, TruncationsAreErrors) {
  std::uint64_t v = 0;
  std::uint32_t v32 = 0;
  std::string_view s;
  EXPECT_FALSE(WireReader(std::string_view()).read_varint(v));
  EXPECT_FALSE(Bytes(t::from_hex("80")).reader.read_varint(v));
  EXPECT_FALSE(Bytes(t::from_hex("ffffffff")).reader.read_varint(v));
  EXPECT_FALSE(Bytes(t::from_hex("010203")).reader.read_fixed32(v32));
  EXPECT_FALSE(Bytes(t::from_hex("01020304050607")).reader.read_fixed64(v));
  EXPECT_FALSE(Bytes(t::from_hex("0561626364")).reader.read_length_delimited(s));  // 5 > 4 left
  Bytes ok(t::from_hex("0461626364"));
  EXPECT_TRUE(ok.reader.read_length_delimited(s));
  EXPECT_EQ(s, "abcd");
}

TEST(KplProtobufWireTest, HugeLengthsAreErrorsNotAllocations) {
  std::string_view s;
  for (std::uint64_t len :
       {std::uint64_t{1} << 31, std::uint64_t{1} << 32, std::uint64_t{1} << 62,
        std::numeric_limits<std::uint64_t>::max(), std::numeric_limits<std::uint64_t>::max() - 3}) {
    Bytes b(t::varint(len) + "abc");
    WireReader& r = b.reader;
    EXPECT_FALSE(r.read_length_delimited(s)) << len;
    EXPECT_STREQ(r.error(), "length-delimited field longer than the bytes left");
  }
}

TEST(KplProtobufWireTest, BadKeysAreErrors) {
  std::uint32_t f = 0;
  WireType w{};
  EXPECT_FALSE(Bytes(t::from_hex("00")).reader.read_key(f, w));  // field 0
  EXPECT_FALSE(Bytes(t::from_hex("02")).reader.read_key(f, w));  // field 0, wire type 2
  EXPECT_FALSE(Bytes(t::from_hex("0e")).reader.read_key(f, w));  // field 1, wire type 6
  EXPECT_FALSE(Bytes(t::from_hex("0f")).reader.read_key(f, w));  // field 1, wire type 7
  EXPECT_FALSE(Bytes(t::key(kMaxFieldNumber + 1, 0)).reader.read_key(f, w));
  EXPECT_FALSE(Bytes(t::varint(std::uint64_t{1} << 40)).reader.read_key(f, w));
  ASSERT_TRUE(Bytes(t::key(kMaxFieldNumber, 5)).reader.read_key(f, w));
  EXPECT_EQ(f, kMaxFieldNumber);
  EXPECT_EQ(w, WireType::kFixed32);
}

TEST(KplProtobufWireTest, GroupsAreRefused) {
  for (unsigned wt : {3u, 4u}) {
    Bytes b(t::key(7, wt) + t::varint_field(1, 1) + t::key(7, 4));
    WireReader& r = b.reader;
    std::uint32_t f = 0;
    WireType w{};
    ASSERT_TRUE(r.read_key(f, w));
    EXPECT_FALSE(r.skip(w));
    EXPECT_TRUE(r.failed());
  }
}

TEST(KplProtobufWireTest, FirstErrorSticks) {
  Bytes b(t::from_hex("80"));
  WireReader& r = b.reader;
  std::uint64_t v = 0;
  EXPECT_FALSE(r.read_varint(v));
  const char* first = r.error();
  std::string_view s;
  EXPECT_FALSE(r.read_length_delimited(s));
  EXPECT_FALSE(r.skip(WireType::kVarint));
  EXPECT_EQ(r.error(), first);
  EXPECT_FALSE(r.at_end());
}

TEST(KplProtobufWireTest, RandomBytesNeverCrashAndAlwaysTerminate) {
  std::mt19937_64 rng(12345);
  for (int iter = 0; iter < 20000; ++iter) {
    std::string bytes(rng() % 64, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    WireReader r(bytes);
    std::size_t steps = 0;
    while (!r.at_end() && !r.failed()) {
      std::uint32_t f = 0;
      WireType w{};
      if (!r.read_key(f, w)) break;
      if (!r.skip(w)) break;
      ASSERT_LE(r.position(), bytes.size());
      ASSERT_LT(++steps, bytes.size() + 1);  // every field consumes at least one byte
    }
  }
}

}  // namespace
}  // namespace kcl::kpl::pb
