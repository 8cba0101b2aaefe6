// What bisecting a failing batch costs in redeliveries, written out apart from the library's
// BatchBisector so tests can hold it to the documented figure (kcl/dead_letter.h): the good
// records handed over in calls that threw, for one bad record at index `bad` of a batch of
// `size` with `attempts` attempts: the whole batch on each attempt, then each failing half
// once.
#pragma once

#include <cstddef>

namespace kcl::testing {

inline int implied_redeliveries(std::size_t size, std::size_t bad, int attempts) {
  int total = attempts * static_cast<int>(size - 1);
  std::size_t begin = 0, end = size;
  while (end - begin > 1) {
    const std::size_t middle = begin + (end - begin) / 2;
    (bad < middle ? end : begin) = middle;
    total += static_cast<int>(end - begin) - 1;
  }
  return total;
}

}  // namespace kcl::testing
