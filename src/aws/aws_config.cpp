// AwsConfig::validate(): every problem, in plain words, with the ranges of aws_config.h.
#include "kcl/aws_config.h"

#include <string>
#include <vector>

namespace kcl {
namespace {

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

void check_range(std::vector<std::string>& out, const char* name, std::chrono::milliseconds v,
                 std::chrono::milliseconds lo, std::chrono::milliseconds hi) {
  if (v < lo || v > hi) {
    out.push_back(std::string(name) + " is " + ms(v) + "; it must be between " + ms(lo) + " and " +
                  ms(hi));
  }
}

bool has_space_or_control(const std::string& s) {
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return true;
  }
  return false;
}

void check_url(std::vector<std::string>& out, const char* name, const std::string& url) {
  if (url.empty()) return;
  auto starts = [&](const char* p) { return url.rfind(p, 0) == 0; };
  if (!starts("http://") && !starts("https://")) {
    out.push_back(std::string(name) + " '" + url + "' must start with http:// or https://");
  } else if (has_space_or_control(url)) {
    out.push_back(std::string(name) + " must not contain spaces or control characters");
  } else if (url.size() <= (starts("https://") ? 8u : 7u)) {
    out.push_back(std::string(name) + " '" + url + "' has no host");
  }
}

// How calls are made (retry.*, http.*): attempts, backoff, deadlines, timeouts, sizes.
void check_calls(const RetryConfig& retry, const HttpConfig& http, std::vector<std::string>& out) {
  using std::chrono::milliseconds;
  if (retry.max_attempts < 1 || retry.max_attempts > 20) {
    out.push_back("retry.max_attempts is " + std::to_string(retry.max_attempts) +
                  "; it must be between 1 and 20");
  }
  check_range(out, "retry.base_delay", retry.base_delay, milliseconds(1), milliseconds(10000));
  if (retry.max_backoff < retry.base_delay || retry.max_backoff > milliseconds(60000)) {
    out.push_back("retry.max_backoff is " + ms(retry.max_backoff) +
                  "; it must be between retry.base_delay (" + ms(retry.base_delay) +
                  ") and 60000 ms");
  }
  check_range(out, "retry.call_deadline", retry.call_deadline, milliseconds(1000),
              milliseconds(15 * 60 * 1000));

  check_range(out, "http.connect_timeout", http.connect_timeout, milliseconds(100),
              milliseconds(60000));
  check_range(out, "http.request_timeout", http.request_timeout, milliseconds(100),
              milliseconds(10 * 60 * 1000));
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  if (http.max_response_bytes < kMiB || http.max_response_bytes > 1024 * kMiB) {
    out.push_back("http.max_response_bytes is " + std::to_string(http.max_response_bytes) +
                  "; it must be between 1 MiB (1048576) and 1 GiB (1073741824)");
  }
  if (http.receive_buffer_bytes < (std::size_t{16} << 10) ||
      http.receive_buffer_bytes > (std::size_t{512} << 10)) {
    out.push_back("http.receive_buffer_bytes is " + std::to_string(http.receive_buffer_bytes) +
                  "; it must be between 16 KiB (16384) and 512 KiB (524288)");
  }
  if (!http.ca_bundle.empty() && has_space_or_control(http.ca_bundle) &&
      http.ca_bundle.find_first_of("\r\n") != std::string::npos) {
    out.push_back("http.ca_bundle must not contain line breaks");
  }
}

}  // namespace

std::vector<std::string> AwsConfig::validate() const {
  using std::chrono::milliseconds;
  std::vector<std::string> out;

  if (!region.empty()) {
    bool ok = region.front() != '-' && region.back() != '-' && region.size() <= 64;
    for (char c : region) {
      ok = ok &&
           ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-');
    }
    if (!ok) {
      out.push_back("region '" + region +
                    "' is not a region name (letters, digits and dashes, e.g. us-east-1)");
    }
  }
  if (has_space_or_control(profile)) {
    out.push_back("profile '" + profile + "' must not contain spaces or control characters");
  }
  check_url(out, "endpoint_url", endpoint_url);
  check_url(out, "kinesis_endpoint_url", kinesis_endpoint_url);
  check_url(out, "dynamodb_endpoint_url", dynamodb_endpoint_url);

  if (credentials) {
    // Never echo credential values.
    if (credentials->access_key_id.empty()) {
      out.push_back("credentials are set but the access key id is empty");
    }
    if (credentials->secret_access_key.empty()) {
      out.push_back("credentials are set but the secret access key is empty");
    }
  }

  check_calls(retry, http, out);
  return out;
}

}  // namespace kcl
