#include "kpl/hash_key.h"

#include <algorithm>

#include "base/md5.h"

namespace kcl::kpl {

HashKey partition_key_hash(std::string_view partition_key) {
  const base::Md5Digest md = base::md5_direct(partition_key);
  HashKey h = 0;
  for (unsigned char byte : md) h = (h << 8) | byte;
  return h;
}

std::optional<HashKey> parse_hash_key(std::string_view decimal) {
  if (decimal.empty() || decimal.size() > 39) return std::nullopt;
  HashKey value = 0;
  const HashKey max = ~HashKey{0};
  for (char c : decimal) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<unsigned>(c - '0');
    if (value > (max - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

std::string hash_key_to_string(HashKey key) {
  if (key == 0) return "0";
  std::string out;
  while (key != 0) {
    out.push_back(static_cast<char>('0' + static_cast<int>(key % 10)));
    key /= 10;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace kcl::kpl
