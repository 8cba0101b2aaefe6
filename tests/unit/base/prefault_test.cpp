// base::prefault: maps a fresh buffer's pages in one call, so writing them afterwards takes
// no page faults; harmless on any range (unaligned, smaller than a page, inside a larger
// allocation) and leaves the contents alone.
#include "base/prefault.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cstring>
#include <string>

#include "base/capacity_recycler.h"

namespace kcl::base {
namespace {

long minor_faults() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_minflt;
}

// A fresh anonymous mapping (never touched), released at the end.
struct FreshMapping {
  explicit FreshMapping(std::size_t n) : size(n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }
  ~FreshMapping() {
    if (data != nullptr) munmap(data, size);
  }
  std::size_t size;
  char* data;
};

bool kernel_populates() {
  FreshMapping probe(4096);
  return probe.data != nullptr && madvise(probe.data, 4096, MADV_POPULATE_WRITE) == 0;
}

TEST(PrefaultTest, WritingAPrefaultedBufferTakesNoPageFaults) {
  if (!kernel_populates()) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE";
  constexpr std::size_t kBytes = 4u << 20;
  FreshMapping cold(kBytes), warm(kBytes);
  ASSERT_NE(cold.data, nullptr);
  ASSERT_NE(warm.data, nullptr);

  long before = minor_faults();
  std::memset(cold.data, 1, kBytes);
  const long cold_faults = minor_faults() - before;

  prefault(warm.data, kBytes);
  before = minor_faults();
  std::memset(warm.data, 1, kBytes);
  const long warm_faults = minor_faults() - before;

  // Relative, so a sanitizer's own faults (its shadow memory) do not count.
  EXPECT_GE(cold_faults, 512) << "untouched memory faults as it is first written";
  EXPECT_LT(warm_faults, cold_faults / 4) << "after prefault";
}

TEST(PrefaultTest, AnyRangeIsSafeAndKeepsItsContents) {
  std::string text(300000, 'x');
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + i % 26);
  const std::string before = text;
  for (std::size_t offset : {0u, 1u, 4095u, 4096u, 4097u}) {
    for (std::size_t n : {0u, 1u, 4096u, 65536u, 65537u, 200000u}) {
      prefault(text.data() + offset, n);
    }
  }
  EXPECT_EQ(text, before);
}

TEST(PrefaultTest, AFreshRecyclerBlockIsPrefaultedForWhatWasAskedOnly) {
  if (!kernel_populates()) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE";
  constexpr std::size_t kBytes = 8u << 20;
  CapacityRecycler<std::string> recycler(2, 64u << 20);
  std::string block = recycler.take(kBytes);
  std::string plain;
  plain.reserve(kBytes + kBytes / 8);
  ASSERT_GE(block.capacity(), kBytes);

  long before = minor_faults();
  plain.append(kBytes, 'y');
  const long plain_faults = minor_faults() - before;
  before = minor_faults();
  block.append(kBytes, 'y');
  const long block_faults = minor_faults() - before;
  EXPECT_GE(plain_faults, 1024) << "a plain reserve is mapped as it is written";
  EXPECT_LT(block_faults, plain_faults / 4) << "the 8 MiB asked for were mapped by take()";
}

}  // namespace
}  // namespace kcl::base
