// base/jitter.h: spreading a periodic interval at random, so that workers started together
// do not act in lockstep.
//
// Thread safety: jittered() uses only `rng`; callers serialise their use of it.
#pragma once

#include <algorithm>
#include <chrono>
#include <random>

namespace kcl::base {

// `interval` scaled by a uniform factor in [1 - fraction, 1 + fraction], at least 1 ms.
inline std::chrono::milliseconds jittered(std::chrono::milliseconds interval, double fraction,
                                          std::mt19937_64& rng) {
  std::uniform_real_distribution<double> d(1.0 - fraction, 1.0 + fraction);
  return std::chrono::milliseconds(std::max<long long>(
      1, static_cast<long long>(static_cast<double>(interval.count()) * d(rng))));
}

}  // namespace kcl::base
