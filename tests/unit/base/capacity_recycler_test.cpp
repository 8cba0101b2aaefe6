// CapacityRecycler: large blocks are kept and handed out again, best fit first; small blocks
// and blocks beyond the bound are freed; giving back destroys the elements.
#include "base/capacity_recycler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kcl::base {
namespace {

using StringRecycler = CapacityRecycler<std::string>;
constexpr std::size_t kBig = StringRecycler::kMinBytes;

TEST(CapacityRecyclerTest, AGivenBlockIsTakenAgainEmptyWithItsMemory) {
  StringRecycler recycler(4, 64 * kBig);
  std::string first = recycler.take(kBig);
  EXPECT_TRUE(first.empty());
  EXPECT_GE(first.capacity(), kBig + kBig / 8) << "fresh blocks get an eighth of headroom";
  first.assign(kBig, 'x');
  const char* memory = first.data();
  recycler.give(std::move(first));
  EXPECT_TRUE(first.empty());  // NOLINT(bugprone-use-after-move): documented as left empty
  EXPECT_EQ(recycler.counts().kept_blocks, 1u);

  // A slightly larger answer still fits the headroom.
  std::string second = recycler.take(kBig + kBig / 16);
  EXPECT_TRUE(second.empty());
  EXPECT_EQ(second.data(), memory);
  StringRecycler::Counts c = recycler.counts();
  EXPECT_EQ(c.kept_blocks, 0u);
  EXPECT_EQ(c.kept_bytes, 0u);
  EXPECT_EQ(c.reused, 1u);
  EXPECT_EQ(c.fresh, 1u);
}

TEST(CapacityRecyclerTest, TheSmallestBlockThatFitsIsTaken) {
  StringRecycler recycler(4, 64 * kBig);
  std::string small = recycler.take(kBig);
  std::string large = recycler.take(kBig + kBig / 2);
  const char* small_memory = small.data();
  const char* large_memory = large.data();
  recycler.give(std::move(large));
  recycler.give(std::move(small));

  EXPECT_EQ(recycler.take(kBig).data(), small_memory);
  EXPECT_EQ(recycler.take(kBig).data(), large_memory) << "the only block left fits too";
  std::string fresh = recycler.take(kBig);
  EXPECT_EQ(recycler.counts().fresh, 3u);
}

TEST(CapacityRecyclerTest, ABlockTooSmallForTheRequestIsNotHandedOut) {
  StringRecycler recycler(4, 64 * kBig);
  std::string block = recycler.take(kBig);
  const std::size_t capacity = block.capacity();
  recycler.give(std::move(block));
  std::string bigger = recycler.take(capacity + 1);
  EXPECT_GE(bigger.capacity(), capacity + 1);
  EXPECT_EQ(recycler.counts().kept_blocks, 1u);
  EXPECT_EQ(recycler.counts().reused, 0u);
}

TEST(CapacityRecyclerTest, ABlockMoreThanTwiceTheRequestIsLeftForALargerOne) {
  StringRecycler recycler(4, 64 * kBig);
  std::string large = recycler.take(4 * kBig);
  const char* memory = large.data();
  recycler.give(std::move(large));
  std::string small = recycler.take(kBig);
  EXPECT_NE(small.data(), memory);
  EXPECT_EQ(recycler.counts().kept_blocks, 1u);
  EXPECT_EQ(recycler.take(3 * kBig).data(), memory);
}

TEST(CapacityRecyclerTest, TrimFreesEveryKeptBlock) {
  StringRecycler recycler(4, 64 * kBig);
  recycler.give(recycler.take(kBig));
  recycler.give(recycler.take(4 * kBig));
  EXPECT_EQ(recycler.counts().kept_blocks, 2u);
  recycler.trim();
  EXPECT_EQ(recycler.counts().kept_blocks, 0u);
  EXPECT_EQ(recycler.counts().kept_bytes, 0u);
}

TEST(CapacityRecyclerTest, SmallBlocksAreFreedNotKept) {
  StringRecycler recycler(4, 64 * kBig);
  std::string small(kBig / 2, 'x');
  recycler.give(std::move(small));
  EXPECT_EQ(recycler.counts().kept_blocks, 0u);
  EXPECT_EQ(recycler.counts().dropped, 0u) << "small blocks are not counted as dropped";
  std::string small_request = recycler.take(100);
  EXPECT_GE(small_request.capacity(), 100u);
  EXPECT_EQ(recycler.counts().fresh, 0u) << "small requests are not the recycler's";
}

TEST(CapacityRecyclerTest, TheBoundOnBlocksAndBytesIsKept) {
  {
    StringRecycler by_count(2, 64 * kBig);
    std::vector<std::string> held;
    for (int i = 0; i < 3; ++i) held.push_back(by_count.take(kBig));
    for (std::string& s : held) by_count.give(std::move(s));
    StringRecycler::Counts c = by_count.counts();
    EXPECT_EQ(c.kept_blocks, 2u);
    EXPECT_EQ(c.dropped, 1u);
  }
  {
    // Room for two blocks of kBig + kBig / 8 bytes, not three.
    StringRecycler by_bytes(8, 2 * (kBig + kBig / 8) + kBig / 2);
    std::vector<std::string> held;
    for (int i = 0; i < 3; ++i) held.push_back(by_bytes.take(kBig));
    for (std::string& s : held) by_bytes.give(std::move(s));
    StringRecycler::Counts c = by_bytes.counts();
    EXPECT_EQ(c.kept_blocks, 2u);
    EXPECT_LE(c.kept_bytes, 2 * (kBig + kBig / 8) + kBig / 2);
    EXPECT_EQ(c.dropped, 1u);
  }
}

TEST(CapacityRecyclerTest, GivingBackDestroysTheElements) {
  CapacityRecycler<std::vector<std::shared_ptr<int>>> recycler(4, 1u << 30);
  const std::size_t count = kBig / sizeof(std::shared_ptr<int>);
  auto shared = std::make_shared<int>(7);
  std::vector<std::shared_ptr<int>> block = recycler.take(count);
  block.assign(count, shared);
  EXPECT_EQ(shared.use_count(), static_cast<long>(count) + 1);
  recycler.give(std::move(block));
  EXPECT_EQ(shared.use_count(), 1) << "a kept block holds no elements";
  EXPECT_EQ(recycler.counts().kept_blocks, 1u);
  std::vector<std::shared_ptr<int>> again = recycler.take(count);
  EXPECT_TRUE(again.empty());
  EXPECT_GE(again.capacity(), count);
}

TEST(CapacityRecyclerTest, ManyThreadsTakingAndGivingKeepTheCountsConsistent) {
  StringRecycler recycler(3, 64 * kBig);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::string s = recycler.take(kBig + static_cast<std::size_t>((i * 7 + t) % 1000));
        if (!s.empty()) ++wrong;
        s.assign(kBig, static_cast<char>('a' + t));
        if (s[kBig - 1] != static_cast<char>('a' + t)) ++wrong;
        recycler.give(std::move(s));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  StringRecycler::Counts c = recycler.counts();
  EXPECT_EQ(c.reused + c.fresh, 800u);
  EXPECT_LE(c.kept_blocks, 3u);
  EXPECT_EQ(c.fresh, c.kept_blocks + c.dropped) << "every fresh block is kept or dropped";
}

}  // namespace
}  // namespace kcl::base
