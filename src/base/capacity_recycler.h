// base/capacity_recycler.h: large buffers handed back for the next answer to fill.
//
// A GetRecords answer is one body of up to 10 MB (2.5 MB for 10,000 records of 100 B) and
// one vector of records (128 B a record), both alive until the batch is processed. Freed
// to malloc, such blocks go back to the kernel or into holes later allocations only partly
// reuse, so the next answer is written into fresh pages: a page fault per 4 KiB page,
// measured at about 1.5 µs each on one machine (a sixth of a consumer's CPU) and 12 µs on
// another. A recycler keeps a few freed blocks (their capacity; the contents are cleared)
// for the next answers instead.
//
// A fresh block is prefaulted: the pages the request will fill are mapped in one call
// (base/prefault.h) instead of one page fault per 4 KiB page as they are first written; on
// virtual machines where a fault is expensive that halves the cost of fresh memory.
//
// Bounded: it keeps at most max_blocks blocks and max_bytes in all, and only blocks of at
// least kMinBytes; anything beyond that is freed as before. What it keeps is resident memory
// (it counts toward the process's RSS), so the bound is a few answers' worth.
//
// `Buffer` is a contiguous container with clear(), reserve() and capacity() (std::string,
// std::vector<T>).
//
// Thread safety: all members may be called from any thread.
#pragma once

#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

#include "base/prefault.h"

namespace kcl::base {

template <class Buffer>
class CapacityRecycler {
 public:
  static constexpr std::size_t kMinBytes = 256 * 1024;

  CapacityRecycler(std::size_t max_blocks, std::size_t max_bytes)
      : max_blocks_(max_blocks), max_bytes_(max_bytes) {}
  CapacityRecycler(const CapacityRecycler&) = delete;
  CapacityRecycler& operator=(const CapacityRecycler&) = delete;

  // An empty buffer with room for at least `count` elements. Below kMinBytes, simply a new
  // one of that size. Otherwise the smallest kept block that is large enough and at most
  // twice that (a larger one would hold memory the answer does not need, and counts toward
  // prefetch bounds; it is left for a larger answer), or a new one with an eighth more room
  // (answers of one stream are of similar size, and a block a little too small for the
  // next would never be reused; pages never written are not resident, so the headroom costs
  // address space, not memory). A new block's first `count` elements' pages are prefaulted.
  Buffer take(std::size_t count) {
    if (count * sizeof(typename Buffer::value_type) < kMinBytes) {
      Buffer small;
      small.reserve(count);
      return small;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::size_t best = kept_.size();
      for (std::size_t i = 0; i < kept_.size(); ++i) {
        if (kept_[i].capacity() >= count && kept_[i].capacity() / 2 <= count &&
            (best == kept_.size() || kept_[i].capacity() < kept_[best].capacity())) {
          best = i;
        }
      }
      if (best != kept_.size()) {
        Buffer out = std::move(kept_[best]);
        if (best + 1 != kept_.size()) kept_[best] = std::move(kept_.back());
        kept_.pop_back();
        kept_bytes_ -= bytes_of(out);
        ++counts_.reused;
        return out;
      }
      ++counts_.fresh;
    }
    Buffer out;
    out.reserve(count + count / 8);
    // The request's own bytes only: the headroom stays unmapped until something writes it.
    prefault(out.data(), count * sizeof(typename Buffer::value_type));
    return out;
  }

  // Keeps `buffer`'s capacity for a later take() when it is large enough and the bound
  // allows, and frees it otherwise. Its elements are destroyed (outside the recycler's lock)
  // and `buffer` is left empty either way.
  void give(Buffer&& buffer) {
    Buffer freed = std::move(buffer);
    buffer.clear();
    freed.clear();
    const std::size_t bytes = bytes_of(freed);
    if (bytes < kMinBytes) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (kept_.size() >= max_blocks_ || kept_bytes_ + bytes > max_bytes_) {
      ++counts_.dropped;
      return;  // `freed` is freed after the lock is released (declared before it)
    }
    kept_bytes_ += bytes;
    kept_.push_back(std::move(freed));
  }

  // Frees every kept block (outside the lock).
  void trim() {
    std::vector<Buffer> freed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      freed.swap(kept_);
      kept_bytes_ = 0;
    }
  }

  struct Counts {
    std::size_t kept_blocks = 0;
    std::size_t kept_bytes = 0;
    std::size_t reused = 0;   // take() answered from a kept block
    std::size_t fresh = 0;    // take() allocated
    std::size_t dropped = 0;  // give() freed a large block because the bound was reached
  };
  Counts counts() const {
    std::lock_guard<std::mutex> lock(mu_);
    Counts c = counts_;
    c.kept_blocks = kept_.size();
    c.kept_bytes = kept_bytes_;
    return c;
  }

 private:
  static std::size_t bytes_of(const Buffer& b) noexcept {
    return b.capacity() * sizeof(typename Buffer::value_type);
  }

  const std::size_t max_blocks_;
  const std::size_t max_bytes_;
  mutable std::mutex mu_;
  std::vector<Buffer> kept_;
  std::size_t kept_bytes_ = 0;
  Counts counts_;
};

}  // namespace kcl::base
