#include "coordination/lease_load_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace kcl::coordination {
namespace {

std::size_t shared_prefix(std::string_view a, std::string_view b) {
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// One decimal at most, no trailing ".0": 0, 12, 12.5.
void append_figure(std::string& out, double kbps) {
  const long long tenths = std::llround(std::max(0.0, kbps) * 10.0);
  char text[32];
  const int n = tenths % 10 == 0
                    ? std::snprintf(text, sizeof text, "%lld", tenths / 10)
                    : std::snprintf(text, sizeof text, "%lld.%lld", tenths / 10, tenths % 10);
  out.append(text, static_cast<std::size_t>(n));
}

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool done() const { return pos_ >= text_.size(); }

  Status fail(const std::string& expected) const {
    return Status(StatusCode::kInvalidArgument,
                  "lease load text at byte " + std::to_string(pos_) + ": expected " + expected);
  }

  // Decimal digits followed by `end`.
  Result<std::size_t> count(char end) {
    std::size_t v = 0;
    const char* first = text_.data() + pos_;
    const char* last = text_.data() + text_.size();
    auto [ptr, ec] = std::from_chars(first, last, v);
    if (ec != std::errc() || ptr == first || ptr == last || *ptr != end) {
      return fail(std::string("a byte count followed by '") + end + "'");
    }
    pos_ = static_cast<std::size_t>(ptr - text_.data()) + 1;
    return v;
  }

  Result<std::string_view> bytes(std::size_t n) {
    if (text_.size() - pos_ < n) return fail(std::to_string(n) + " bytes of a lease key");
    std::string_view s = text_.substr(pos_, n);
    pos_ += n;
    return s;
  }

  // A non-negative decimal number followed by ';'.
  Result<double> figure() {
    const std::size_t end = text_.find(';', pos_);
    std::string_view s = text_.substr(pos_, end == std::string_view::npos ? 0 : end - pos_);
    double v = -1;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !(v >= 0) ||
        !std::isfinite(v)) {
      return fail("a non-negative KB/s figure followed by ';'");
    }
    pos_ = end + 1;
    return v;
  }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string encode_lease_load(const std::map<std::string, double>& kbps) {
  std::string out;
  out.reserve(kbps.size() * 10);
  std::string_view before;
  for (const auto& [key, value] : kbps) {
    const std::size_t shared = shared_prefix(before, key);
    out += std::to_string(shared);
    out += ',';
    out += std::to_string(key.size() - shared);
    out += ':';
    out.append(key, shared, std::string::npos);
    append_figure(out, value);
    out += ';';
    before = key;
  }
  return out;
}

Result<std::map<std::string, double>> decode_lease_load(std::string_view text) {
  std::map<std::string, double> out;
  Reader r(text);
  std::string key;
  while (!r.done()) {
    auto shared = r.count(',');
    if (!shared.ok()) return shared.status();
    if (*shared > key.size()) return r.fail("a shared prefix no longer than the key before");
    auto length = r.count(':');
    if (!length.ok()) return length.status();
    auto suffix = r.bytes(*length);
    if (!suffix.ok()) return suffix.status();
    key.resize(*shared);
    key.append(*suffix);
    if (!out.empty() && key <= out.rbegin()->first) return r.fail("lease keys in ascending order");
    auto value = r.figure();
    if (!value.ok()) return value.status();
    out.emplace(key, *value);
  }
  return out;
}

}  // namespace kcl::coordination
