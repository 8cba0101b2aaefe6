// StallDetector: a signal is a stall only once it lasted the threshold; a stall is reported
// when it starts, at the 3rd look and each power of ten while it lasts, and when it ends
// (signal gone, cause changed, shard gone).
#include "lifecycle/stall_detector.h"

#include <gtest/gtest.h>

namespace kcl::lifecycle {
namespace {

using namespace std::chrono_literals;
using Kind = StallEvent::Kind;
using Signals = std::map<std::string, std::optional<StallSignal>>;

const Clock::MonoTime t0 = Clock::MonoTime{} + 1000s;

TEST(StallDetectorTest, ASignalIsAStallOnlyOnceItLastedTheThreshold) {
  StallDetector d(10s);
  Signals s{{"shard-1", StallSignal{kStallThrottled, "GetRecords failed 3 times", t0}}};
  EXPECT_TRUE(d.look(t0 + 9s, s).empty());
  EXPECT_TRUE(d.stalled().empty());
  auto events = d.look(t0 + 10s, s);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kStarted);
  EXPECT_EQ(events[0].stall.shard, "shard-1");
  EXPECT_EQ(events[0].stall.cause, kStallThrottled);
  EXPECT_EQ(events[0].stall.since, t0);
  ASSERT_EQ(d.stalled().size(), 1u);
}

TEST(StallDetectorTest, NoSignalNeverStalls) {
  StallDetector d(1s);
  Signals idle{{"shard-1", std::nullopt}};
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(d.look(t0 + std::chrono::seconds(i), idle).empty());
  EXPECT_TRUE(d.stalled().empty());
}

TEST(StallDetectorTest, ALastingStallIsReportedAtThe3rdLookAndEachPowerOfTen) {
  StallDetector d(1s);
  Signals s{{"shard-1", StallSignal{kStallProcessorCallback, "running", t0}}};
  std::vector<std::uint64_t> reported;
  for (int i = 1; i <= 120; ++i) {
    for (const auto& e : d.look(t0 + std::chrono::seconds(i), s)) {
      if (e.kind == Kind::kContinues) reported.push_back(e.stall.looks);
      if (e.kind == Kind::kStarted) {
        EXPECT_EQ(i, 1);
      }
    }
  }
  EXPECT_EQ(reported, (std::vector<std::uint64_t>{3, 10, 100}));
}

TEST(StallDetectorTest, AStallEndsWhenItsSignalGoesTheShardLeavesOrTheCauseChanges) {
  StallDetector d(1s);
  Signals s{{"a", StallSignal{kStallThrottled, "x", t0}},
            {"b", StallSignal{kStallNoProgress, "y", t0}},
            {"c", StallSignal{kStallWaitingForParent, "z", t0}}};
  EXPECT_EQ(d.look(t0 + 2s, s).size(), 3u);
  s["a"] = std::nullopt;                                            // progress
  s.erase("b");                                                     // no longer read here
  s["c"] = StallSignal{kStallProcessorCallback, "w", t0 + 2500ms};  // another cause, just begun
  auto events = d.look(t0 + 3s, s);
  ASSERT_EQ(events.size(), 3u);
  for (const auto& e : events) EXPECT_EQ(e.kind, Kind::kEnded) << e.stall.shard;
  EXPECT_TRUE(d.stalled().empty());
  // The new cause is a stall of its own once it lasted the threshold.
  events = d.look(t0 + 3600ms, s);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kStarted);
  EXPECT_EQ(events[0].stall.cause, kStallProcessorCallback);
}

TEST(StallDetectorTest, ANewDetailIsTheSameStall) {
  StallDetector d(1s);
  Signals s{{"a", StallSignal{kStallThrottled, "failed 3 times", t0}}};
  ASSERT_EQ(d.look(t0 + 1s, s).size(), 1u);
  s["a"]->detail = "failed 9 times";
  auto events = d.look(t0 + 2s, s);
  EXPECT_TRUE(events.empty());
  ASSERT_EQ(d.stalled().size(), 1u);
  EXPECT_EQ(d.stalled()[0].detail, "failed 9 times");
  EXPECT_EQ(d.stalled()[0].since, t0);
}

}  // namespace
}  // namespace kcl::lifecycle
