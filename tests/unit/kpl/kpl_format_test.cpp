// The KPL framing (magic + MD5 trailer), against the independent builder of tests/support.
#include "kpl/kpl_format.h"

#include <gtest/gtest.h>

#include <string>

#include "support/kpl_builder.h"

namespace kcl::kpl {
namespace {

namespace t = kcl::testing;

TEST(KplFormatTest, MagicIsTheKplsFourBytes) {
  const std::string magic = t::kpl_magic();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(kMagic.data()), kMagic.size()), magic);
  EXPECT_TRUE(has_magic(magic));
  EXPECT_TRUE(has_magic(magic + "anything"));
  EXPECT_FALSE(has_magic(magic.substr(0, 3)));
  EXPECT_FALSE(has_magic(""));
  EXPECT_FALSE(has_magic("\xF3\x89\x9A\xC3"));
}

TEST(KplFormatTest, WrittenFramesMatchTheIndependentBuilder) {
  const std::string bodies[] = {std::string(), std::string("\x0A\x02pk", 4), std::string(300, 'x')};
  for (const std::string& body : bodies) {
    std::string out;
    append_magic(out);
    out += body;
    append_digest(out);
    EXPECT_EQ(out, t::frame(body));
    EXPECT_EQ(out.size(), framed_size(body.size()));
  }
}

TEST(KplFormatTest, OpenFrameChecksSizeAndDigest) {
  const std::string body = t::encode_protobuf(t::to_raw({{"pk", std::nullopt, "data", {}}}));
  const std::string good = t::frame(body);
  std::string_view got;
  ASSERT_EQ(open_frame(good, got), FrameCheck::kOk);
  EXPECT_EQ(got, body);

  std::string_view untouched = "unchanged";
  EXPECT_EQ(open_frame(t::with_bad_md5(good), untouched), FrameCheck::kMd5Mismatch);
  EXPECT_EQ(untouched, "unchanged");
  EXPECT_EQ(open_frame(good.substr(0, good.size() - 1), untouched), FrameCheck::kMd5Mismatch);
  EXPECT_EQ(open_frame(t::kpl_magic() + std::string(15, 'a'), untouched), FrameCheck::kTooShort);
  EXPECT_EQ(open_frame(t::kpl_magic() + std::string(16, 'a'), untouched), FrameCheck::kMd5Mismatch);
  // Magic + MD5("") is a valid frame of an empty body.
  ASSERT_EQ(open_frame(t::frame(""), got), FrameCheck::kOk);
  EXPECT_TRUE(got.empty());
}

}  // namespace
}  // namespace kcl::kpl
