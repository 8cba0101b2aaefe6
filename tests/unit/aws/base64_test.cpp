#include "aws/base64.h"

#include <gtest/gtest.h>

#include <random>

namespace kcl::aws {
namespace {

TEST(Base64Test, Rfc4648Vectors) {
  const std::pair<std::string, std::string> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(plain), encoded);
    auto d = base64_decode(encoded);
    ASSERT_TRUE(d.ok()) << encoded;
    EXPECT_EQ(*d, plain);
  }
}

TEST(Base64Test, RoundTripsRandomBytes) {
  std::mt19937 rng(7);
  for (int len = 0; len < 300; ++len) {
    std::string s(static_cast<std::size_t>(len), '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    auto d = base64_decode(base64_encode(s));
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, s);
  }
}

TEST(Base64Test, RejectsInvalidInput) {
  for (std::string bad : {"Zg=", "Zm9v!A==", "Z===", "Zh==", "Zm9=", "====", "Zm 9"}) {
    EXPECT_FALSE(base64_decode(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace kcl::aws
