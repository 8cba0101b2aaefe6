// base/cache_prefetch.h: asking the CPU for the cache lines of an object before it is used.
//
// A loop over objects that another thread wrote last (a producer's records, handed from the
// putting thread to the sender and to a request thread) waits on a cache miss for each one:
// the lines are in another core's cache. Asking for the object a few iterations ahead lets
// those transfers overlap the work on the current one. A hint only: what the code computes
// does not change, and an address that is never read costs nothing but the request.
//
//   for (std::size_t i = 0; i < items.size(); ++i) {
//     if (i + 8 < items.size()) base::prefetch_object(items[i + 8].get());
//     use(*items[i]);
//   }
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kcl::base {

inline constexpr std::uintptr_t kCacheLine = 64;

// One line, for reading. On x86-64 an instruction of its own: GCC 12 drops some
// __builtin_prefetch calls of inlined code (measured: none was left in the producer's
// request loop).
inline void prefetch_line(const char* p) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*p));
#else
  __builtin_prefetch(p);
#endif
}

// One line that is about to be written: it comes owned, not shared (PREFETCHW; a no-op on
// x86-64 processors without it).
inline void prefetch_line_for_write(const char* p) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetchw %0" : : "m"(*p));
#else
  __builtin_prefetch(p, 1);
#endif
}

// The lines of [data, data + n), for reading (for_write: about to be written).
inline void prefetch_bytes(const void* data, std::size_t n, bool for_write = false) noexcept {
  // From the start of the first line, so that an object straddling one more line than its
  // size has all of its lines asked for.
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t end = begin + n;
  for (std::uintptr_t line = begin & ~(kCacheLine - 1); line < end; line += kCacheLine) {
    const auto* p = reinterpret_cast<const char*>(line);
    if (for_write) {
      prefetch_line_for_write(p);
    } else {
      prefetch_line(p);
    }
  }
}

// The lines of `*object` (nothing for nullptr), for reading or to be written.
template <class T>
inline void prefetch_object(const T* object, bool for_write = false) noexcept {
  if (object != nullptr) prefetch_bytes(object, sizeof(T), for_write);
}

}  // namespace kcl::base
