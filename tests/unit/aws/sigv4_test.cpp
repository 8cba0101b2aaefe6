// SigV4 against AWS's published signing vectors (header signing cases), plus the key cache.
#include "aws/sigv4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace kcl::aws {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::chrono::system_clock::time_point parse_iso8601(const std::string& s) {
  std::tm tm{};
  std::istringstream is(s);
  is >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

struct ParsedRequest {
  std::string method;
  std::string path;
  std::string query;
  Headers headers;
  std::string body;
};

// request.txt: "METHOD TARGET HTTP/1.1", header lines ("Name:value", folded lines start with
// whitespace), an empty line, the body. Targets may hold raw spaces and UTF-8.
ParsedRequest parse_request(const std::string& text) {
  ParsedRequest r;
  std::vector<std::string> lines;
  std::size_t start = 0;
  std::size_t body_start = std::string::npos;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() && !lines.empty()) {
      body_start = end + 1;
      break;
    }
    lines.push_back(line);
    start = end + 1;
  }
  if (body_start != std::string::npos && body_start <= text.size()) {
    r.body = text.substr(body_start);
  }
  const std::string& first = lines.at(0);
  std::size_t sp = first.find(' ');
  std::size_t ver = first.rfind(" HTTP/");
  r.method = first.substr(0, sp);
  std::string target = first.substr(sp + 1, ver - sp - 1);
  std::size_t q = target.find('?');
  r.path = target.substr(0, q);
  if (q != std::string::npos) r.query = target.substr(q + 1);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (!line.empty() && (line[0] == ' ' || line[0] == '\t') && !r.headers.empty()) {
      r.headers.back().second += "\n" + line;
      continue;
    }
    std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    r.headers.emplace_back(line.substr(0, colon), line.substr(colon + 1));
  }
  return r;
}

// The lines of header-signed-request.txt that sign() must produce.
std::vector<std::pair<std::string, std::string>> expected_added_headers(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) {
    if (line.empty()) break;
    std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    std::string lname = name;
    for (char& c : lname) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lname == "authorization" || lname == "x-amz-date" || lname == "x-amz-security-token" ||
        lname == "x-amz-content-sha256") {
      out.emplace_back(lname, line.substr(colon + 1));
    }
  }
  return out;
}

std::string header_value(const Headers& headers, std::string_view lname) {
  for (const auto& [k, v] : headers) {
    std::string l = k;
    for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (l == lname) return v;
  }
  return "<absent>";
}

SigningInput input_for_case(const fs::path& dir) {
  nlohmann::json ctx = nlohmann::json::parse(read_text(dir / "context.json"));
  ParsedRequest req = parse_request(read_text(dir / "request.txt"));
  SigningInput in;
  in.method = req.method;
  in.path = req.path;
  in.query = req.query;
  in.headers = req.headers;
  in.region = ctx.at("region").get<std::string>();
  in.service = ctx.at("service").get<std::string>();
  in.credentials.access_key_id = ctx.at("credentials").at("access_key_id").get<std::string>();
  in.credentials.secret_access_key =
      ctx.at("credentials").at("secret_access_key").get<std::string>();
  if (ctx.at("credentials").contains("token")) {
    in.credentials.session_token = ctx.at("credentials").at("token").get<std::string>();
  }
  in.time = parse_iso8601(ctx.at("timestamp").get<std::string>());
  in.normalize_path = ctx.value("normalize", true);
  in.add_content_sha256 = ctx.value("sign_body", false);
  in.sign_session_token = !ctx.value("omit_session_token", false);
  return in;
}

TEST(SigV4SuiteTest, AllHeaderSigningCases) {
  fs::path suite(KCL_SIGV4_SUITE_DIR);
  if (!fs::is_directory(suite)) GTEST_SKIP() << "SigV4 test suite not found at " << suite;
  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(suite)) {
    if (entry.is_directory() && fs::exists(entry.path() / "header-signature.txt")) {
      cases.push_back(entry.path());
    }
  }
  std::sort(cases.begin(), cases.end());
  ASSERT_FALSE(cases.empty());
  int passed = 0;
  SigV4Signer signer;
  for (const auto& dir : cases) {
    SCOPED_TRACE(dir.filename().string());
    SigningInput in = input_for_case(dir);
    ParsedRequest req = parse_request(read_text(dir / "request.txt"));
    in.payload = req.body;
    SigningResult r = signer.sign(in);
    bool ok = true;
    auto check = [&](const std::string& got, const std::string& want, const char* what) {
      EXPECT_EQ(got, want) << what;
      if (got != want) ok = false;
    };
    check(r.canonical_request, read_text(dir / "header-canonical-request.txt"),
          "canonical request");
    check(r.string_to_sign, read_text(dir / "header-string-to-sign.txt"), "string to sign");
    check(r.signature, read_text(dir / "header-signature.txt"), "signature");
    check(canonical_request(in), r.canonical_request, "canonical_request()");
    check(string_to_sign(in), r.string_to_sign, "string_to_sign()");
    check(sign(in).signature, r.signature, "uncached sign()");
    for (const auto& [lname, value] :
         expected_added_headers(read_text(dir / "header-signed-request.txt"))) {
      check(header_value(r.headers_to_add, lname), value, lname.c_str());
    }
    if (in.credentials.session_token.empty()) {
      check(header_value(r.headers_to_add, "x-amz-security-token"), "<absent>", "no token");
    }
    if (ok) ++passed;
  }
  std::cout << "[ SigV4    ] " << passed << " of " << cases.size()
            << " header-signing cases passed\n";
  EXPECT_EQ(passed, static_cast<int>(cases.size()));
  EXPECT_GE(cases.size(), 30u);
}

TEST(SigV4Test, KnownDerivedKey) {
  // The example from the SigV4 documentation (secret, 20150830, us-east-1, iam).
  std::string key = derive_signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830",
                                       "us-east-1", "iam");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  std::string hex_key;
  static constexpr char kDigits[] = "0123456789abcdef";
  for (unsigned char c : key) {
    hex_key += kDigits[c >> 4];
    hex_key += kDigits[c & 0xf];
  }
  EXPECT_EQ(hex_key, "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9");
}

TEST(SigV4Test, FormatsAmzDate) {
  auto t = std::chrono::system_clock::from_time_t(1440938160);  // 2015-08-30T12:36:00Z
  EXPECT_EQ(format_amz_date(t), "20150830T123600Z");
}

SigningInput json_input() {
  SigningInput in;
  in.method = "POST";
  in.path = "/";
  in.headers = {{"Host", "kinesis.us-east-1.amazonaws.com"},
                {"Content-Type", "application/x-amz-json-1.1"},
                {"X-Amz-Target", "Kinesis_20131202.ListShards"}};
  in.payload = R"({"StreamName":"s"})";
  in.region = "us-east-1";
  in.service = "kinesis";
  in.credentials.access_key_id = "AKIDEXAMPLE";
  in.credentials.secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
  in.time = std::chrono::system_clock::from_time_t(1440938160);
  return in;
}

TEST(SigV4Test, CachesSigningKeysPerDateRegionServiceAndSecret) {
  SigV4Signer signer;
  SigningInput in = json_input();
  std::string sig1 = signer.sign(in).signature;
  std::string sig2 = signer.sign(in).signature;
  EXPECT_EQ(sig1, sig2);
  EXPECT_EQ(signer.keys_derived(), 1u);
  EXPECT_EQ(sig1, sign(in).signature);

  in.time += std::chrono::hours(24);  // next day: new key
  EXPECT_EQ(signer.sign(in).signature, sign(in).signature);
  EXPECT_EQ(signer.keys_derived(), 2u);

  in.credentials.secret_access_key = "another-secret";  // new secret: new key
  EXPECT_EQ(signer.sign(in).signature, sign(in).signature);
  EXPECT_EQ(signer.keys_derived(), 3u);

  in.region = "eu-west-1";
  EXPECT_EQ(signer.sign(in).signature, sign(in).signature);
  EXPECT_EQ(signer.keys_derived(), 4u);
}

TEST(SigV4Test, CacheIsBoundedAndThreadSafe) {
  SigV4Signer signer(2);
  SigningInput base = json_input();
  std::string want0 = sign(base).signature;
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        SigningInput in = base;
        in.time += std::chrono::hours(24 * ((i + t) % 5));
        if (signer.sign(in).signature != sign(in).signature) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(signer.sign(base).signature, want0);
}

TEST(SigV4Test, SessionTokenIsSignedAndAdded) {
  SigningInput in = json_input();
  in.credentials.session_token = "FAKE-SESSION-TOKEN";
  SigningResult r = sign(in);
  EXPECT_NE(r.signed_headers.find("x-amz-security-token"), std::string::npos);
  EXPECT_EQ(header_value(r.headers_to_add, "x-amz-security-token"), "FAKE-SESSION-TOKEN");
  EXPECT_EQ(r.signed_headers, "content-type;host;x-amz-date;x-amz-security-token;x-amz-target");
}

TEST(SigV4Test, IgnoresCallerSuppliedDateAndAuthorization) {
  SigningInput in = json_input();
  std::string want = sign(in).signature;
  in.headers.emplace_back("X-Amz-Date", "19990101T000000Z");
  in.headers.emplace_back("Authorization", "stale");
  in.headers.emplace_back("User-Agent", "kcl-cpp/0.1");
  EXPECT_EQ(sign(in).signature, want);
}

TEST(SigV4Test, PrecomputedPayloadHashIsUsed) {
  SigningInput in = json_input();
  std::string want = sign(in).signature;
  in.payload_hash = sha256_hex(in.payload);
  std::string_view payload = in.payload;
  in.payload = {};
  EXPECT_EQ(sign(in).signature, want);
  in.payload = payload;
}

TEST(SigV4Test, AlreadyEncodedPathIsEncodedAgain) {
  SigningInput in = json_input();
  in.path = "/a%20b/";
  EXPECT_EQ(canonical_request(in).substr(0, 17), "POST\n/a%2520b/\n\nc");
}

}  // namespace
}  // namespace kcl::aws
