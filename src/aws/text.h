// Small text helpers shared by the aws layer.
#pragma once

#include <string_view>

namespace kcl::aws {

// `s` without leading and trailing spaces, tabs, CRs and LFs.
inline std::string_view trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace kcl::aws
