// base/digest.h against published test vectors (FIPS 180-2 for SHA-256, RFC 4231 for
// HMAC-SHA-256, RFC 1321 for MD5, also for base/md5.h's MD5 without OpenSSL, which must give
// OpenSSL's digest at every length around the padding edges), and with the per-thread contexts in
// use from several threads and switching algorithms on one thread; HmacSha256Key (a key
// prepared once) gives the same MACs, reused, after other keys, and from several threads.
#include "base/digest.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/md5.h"

namespace kcl::base {
namespace {

template <std::size_t N>
std::string hex(const std::array<unsigned char, N>& d) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : d) {
    out += kDigits[c >> 4];
    out += kDigits[c & 0xf];
  }
  return out;
}

std::string sha256_of(std::string_view s) {
  Sha256Digest d{};
  EXPECT_TRUE(sha256(s, d));
  return hex(d);
}

std::string hmac_of(std::string_view key, std::string_view s) {
  Sha256Digest d{};
  EXPECT_TRUE(hmac_sha256(key, s, d));
  return hex(d);
}

std::string md5_of(std::string_view s) {
  Md5Digest d{};
  if (!md5(s, d)) return "unavailable";  // a FIPS-only OpenSSL
  return hex(d);
}

TEST(DigestTest, Sha256MatchesFips180Vectors) {
  EXPECT_EQ(sha256_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(DigestTest, HmacSha256MatchesRfc4231Vectors) {
  // Test case 1: a 20-byte key of 0x0b.
  EXPECT_EQ(hmac_of(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Test case 2: a key shorter than the block.
  EXPECT_EQ(hmac_of("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 6: a key longer than the block (131 bytes of 0xaa), hashed first.
  EXPECT_EQ(
      hmac_of(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  // An empty key is a key (not "the previous call's key").
  EXPECT_EQ(hmac_of("", ""), "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST(DigestTest, Md5MatchesRfc1321Vectors) {
  const std::string abc = md5_of("abc");
  if (abc == "unavailable") GTEST_SKIP() << "this OpenSSL has no MD5";
  EXPECT_EQ(abc, "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5_of(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5_of("message digest"), "f96b697d7cb7938d525a2f31aaf161d0");
}

// One thread's context serves SHA-256 and MD5 in turn, and keys change from call to call.
TEST(DigestTest, AlgorithmsAndKeysAlternatingOnOneThreadDoNotMix) {
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(sha256_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const std::string m = md5_of("abc");
    if (m != "unavailable") {
      EXPECT_EQ(m, "900150983cd24fb0d6963f7d28e17f72");
    }
    EXPECT_EQ(hmac_of("Jefe", "what do ya want for nothing?"),
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    EXPECT_EQ(hmac_of(std::string(20, '\x0b'), "Hi There"),
              "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  }
}

TEST(DigestTest, ThreadsComputingAtOnceEachGetTheRightDigests) {
  std::vector<std::thread> threads;
  std::vector<int> wrong(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &wrong] {
      const std::string key = "key-" + std::to_string(t);
      const std::string first = hmac_of(key, "payload");
      for (int i = 0; i < 500; ++i) {
        if (sha256_of("abc") !=
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") {
          ++wrong[t];
        }
        if (hmac_of(key, "payload") != first) ++wrong[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  // Each thread's key gave its own MAC.
  EXPECT_NE(hmac_of("key-0", "payload"), hmac_of("key-1", "payload"));
}

std::string mac_of(const HmacSha256Key& key, std::string_view s) {
  Sha256Digest d{};
  EXPECT_TRUE(key.mac(s, d));
  return hex(d);
}

// A prepared key gives RFC 4231's MACs on its first use and on its later ones (restarted from
// the pads it left in the thread's context), also when other keys were used on the thread in
// between (the context then set up with the key again).
TEST(HmacSha256KeyTest, SameMacsAsHmacSha256WhenReusedAndAfterOtherKeys) {
  const HmacSha256Key jefe("Jefe");
  const HmacSha256Key tc1(std::string(20, '\x0b'));
  const HmacSha256Key long_key(std::string(131, '\xaa'));
  const HmacSha256Key empty("");
  const std::string jefe_mac = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
  const std::string tc1_mac = "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(mac_of(jefe, "what do ya want for nothing?"), jefe_mac);
    EXPECT_EQ(mac_of(jefe, "what do ya want for nothing?"), jefe_mac);  // reused
    EXPECT_EQ(mac_of(tc1, "Hi There"), tc1_mac);                        // another key
    EXPECT_EQ(hmac_of("Jefe", "what do ya want for nothing?"), jefe_mac);
    EXPECT_EQ(mac_of(tc1, "Hi There"), tc1_mac);  // after an ad-hoc key
    EXPECT_EQ(mac_of(long_key, "Test Using Larger Than Block-Size Key - Hash Key First"),
              "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    EXPECT_EQ(mac_of(empty, ""),
              "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
    EXPECT_EQ(sha256_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  }
  // A key made after another was freed is not taken for it, even at the same address.
  auto first = std::make_unique<HmacSha256Key>("Jefe");
  EXPECT_EQ(mac_of(*first, "what do ya want for nothing?"), jefe_mac);
  first.reset();
  auto second = std::make_unique<HmacSha256Key>(std::string(20, '\x0b'));
  EXPECT_EQ(mac_of(*second, "Hi There"), tc1_mac);
}

TEST(HmacSha256KeyTest, OneKeySharedByThreadsGivesEachTheSameMac) {
  const HmacSha256Key key("shared");
  const std::string want = hmac_of("shared", "payload");
  std::vector<std::thread> threads;
  std::vector<int> wrong(6, 0);
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([t, &key, &want, &wrong] {
      const HmacSha256Key own("own-" + std::to_string(t));
      const std::string own_mac = hmac_of("own-" + std::to_string(t), "payload");
      for (int i = 0; i < 300; ++i) {
        if (mac_of(key, "payload") != want) ++wrong[t];
        if (i % 3 == 0 && mac_of(own, "payload") != own_mac) ++wrong[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 6; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
}

// base/md5.h: MD5 without OpenSSL, the same digests.
TEST(Md5DirectTest, Rfc1321TestSuite) {
  EXPECT_EQ(hex(md5_direct("")), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(hex(md5_direct("a")), "0cc175b9c0f1b6a831c399e269772661");
  EXPECT_EQ(hex(md5_direct("abc")), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(hex(md5_direct("message digest")), "f96b697d7cb7938d525a2f31aaf161d0");
  EXPECT_EQ(hex(md5_direct("abcdefghijklmnopqrstuvwxyz")), "c3fcd3d76192e4007dfb496cca67e13b");
  EXPECT_EQ(hex(md5_direct("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")),
            "d174ab98d277d9f5a5611c2c9f419d9f");
  EXPECT_EQ(hex(md5_direct("1234567890123456789012345678901234567890123456789012345678901234567"
                           "8901234567890")),
            "57edf4a22be3c955ac49da2e2107b67a");
}

TEST(Md5DirectTest, SameAsOpenSslForEveryLengthUpTo300Bytes) {
  Md5Digest probe{};
  if (!md5("", probe)) GTEST_SKIP() << "OpenSSL has no MD5 here (FIPS-only)";
  std::string s;
  for (int n = 0; n <= 300; ++n) {
    Md5Digest theirs{};
    ASSERT_TRUE(md5(s, theirs));
    EXPECT_EQ(hex(md5_direct(s)), hex(theirs)) << "length " << n;
    s.push_back(static_cast<char>(n * 37 + 11));  // every byte value appears
  }
}

TEST(DigestTest, WipeZeroesEveryCharacterAndKeepsTheLength) {
  std::string secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  const std::size_t size = secret.size();
  wipe(secret);
  EXPECT_EQ(secret, std::string(size, '\0'));
}

}  // namespace
}  // namespace kcl::base
