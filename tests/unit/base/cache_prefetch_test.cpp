// base::prefetch_*: a hint that never reads or writes what it names. It must not fault on
// memory that cannot be touched (a PROT_NONE page, an address past an allocation), must
// leave the contents alone, and takes nullptr and empty ranges.
#include "base/cache_prefetch.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <array>
#include <cstring>
#include <vector>

namespace kcl::base {
namespace {

constexpr std::size_t kPage = 4096;

TEST(CachePrefetchTest, NamesAPageNoAccessIsAllowedToWithoutFaulting) {
  void* p = mmap(nullptr, 2 * kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  // A load or store here would end the test with SIGSEGV.
  prefetch_bytes(p, 2 * kPage);
  prefetch_bytes(p, 2 * kPage, /*for_write=*/true);
  prefetch_line(static_cast<const char*>(p) + kPage + 7);
  prefetch_line_for_write(static_cast<const char*>(p) + 1);
  // The pages are still inaccessible and unmapped in the process's page tables: mincore
  // reports none of them resident.
  std::array<unsigned char, 2> resident{};
  ASSERT_EQ(mincore(p, 2 * kPage, resident.data()), 0);
  EXPECT_EQ(resident[0] & 1, 0);
  EXPECT_EQ(resident[1] & 1, 0);
  munmap(p, 2 * kPage);
}

TEST(CachePrefetchTest, LeavesTheContentsAlone) {
  struct Object {
    std::array<char, 200> bytes;
  };
  std::vector<Object> objects(3);
  for (auto& o : objects) std::memset(o.bytes.data(), 'x', o.bytes.size());
  for (const auto& o : objects) {
    prefetch_object(&o);
    prefetch_object(&o, /*for_write=*/true);
  }
  for (const auto& o : objects) {
    for (char c : o.bytes) ASSERT_EQ(c, 'x');
  }
}

TEST(CachePrefetchTest, TakesNullAndEmptyRanges) {
  const int* none = nullptr;
  prefetch_object(none);
  prefetch_object(none, /*for_write=*/true);
  prefetch_bytes(nullptr, 0);
  const char one = 'a';
  prefetch_bytes(&one, 0);
  prefetch_bytes(&one, 1);
  EXPECT_EQ(one, 'a');
}

}  // namespace
}  // namespace kcl::base
