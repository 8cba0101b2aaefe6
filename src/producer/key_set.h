// producer/key_set.h: the partition keys already in a PutRecords call, as 64-bit key hashes
// in an open-addressing set that is reused from call to call (no allocation once it has
// grown to the largest call). Two keys with the same hash count as one key: the caller then
// only closes a call a record early, which is always safe.
//
// Thread safety: a plain value (one thread at a time).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kcl::producer {

class KeySet {
 public:
  bool contains(std::uint64_t key) const {
    if (slots_.empty()) return false;
    key = stored(key);
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t at = key & mask;; at = (at + 1) & mask) {
      if (slots_[at] == key) return true;
      if (slots_[at] == 0) return false;
    }
  }
  void insert(std::uint64_t key) {
    if ((used_.size() + 1) * 2 > slots_.size()) grow();
    place(stored(key));
  }
  // Empties the set; costs the keys it held, not its capacity.
  void clear() {
    for (std::uint32_t at : used_) slots_[at] = 0;
    used_.clear();
  }
  std::size_t size() const { return used_.size(); }

 private:
  // 0 marks a free slot, so a key hash of 0 is stored as 1.
  static std::uint64_t stored(std::uint64_t key) { return key == 0 ? 1 : key; }
  void place(std::uint64_t key) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t at = key & mask;
    for (; slots_[at] != 0; at = (at + 1) & mask) {
      if (slots_[at] == key) return;
    }
    slots_[at] = key;
    used_.push_back(static_cast<std::uint32_t>(at));
  }
  void grow() {
    std::vector<std::uint64_t> keys;
    keys.reserve(used_.size());
    for (std::uint32_t at : used_) keys.push_back(slots_[at]);
    slots_.assign(std::max<std::size_t>(1024, slots_.size() * 2), 0);
    used_.clear();
    for (std::uint64_t k : keys) place(k);
  }

  std::vector<std::uint64_t> slots_;
  std::vector<std::uint32_t> used_;  // the slots in use
};

}  // namespace kcl::producer
