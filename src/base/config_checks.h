// base/config_checks.h: the range checks the configuration structs' validate() share, each
// adding a problem in plain words ("X is 5 ms; it must be between 10 ms and 60000 ms").
//
// Thread safety: pure functions.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace kcl::base {

inline void check_range(std::vector<std::string>& problems, const char* name,
                        std::chrono::milliseconds v, std::chrono::milliseconds lo,
                        std::chrono::milliseconds hi) {
  if (v < lo || v > hi) {
    problems.push_back(std::string(name) + " is " + std::to_string(v.count()) +
                       " ms; it must be between " + std::to_string(lo.count()) + " ms and " +
                       std::to_string(hi.count()) + " ms");
  }
}

inline void check_range(std::vector<std::string>& problems, const char* name, std::size_t v,
                        std::size_t lo, std::size_t hi, const char* unit = "") {
  if (v < lo || v > hi) {
    problems.push_back(std::string(name) + " is " + std::to_string(v) + unit +
                       "; it must be between " + std::to_string(lo) + unit + " and " +
                       std::to_string(hi) + unit);
  }
}

}  // namespace kcl::base
