// The tests' child-process helper: lines() gives only the lines a child has finished, so a
// test reading a running process's stdout never parses half a line.
#include "support/child_process.h"

#include <gtest/gtest.h>

#include <string>

namespace kcl::testing {
namespace {

TEST(ChildProcessTest, ALineStillBeingWrittenIsNotReadUntilItsNewline) {
  const std::string out = ::testing::TempDir() + "/child_process_test.out";
  ChildProcess p({"/bin/sh", "-c", "printf 'one\\ntwo\\nthr'"}, {"PATH=/usr/bin:/bin"}, out);
  ASSERT_EQ(p.wait(), 0);
  EXPECT_EQ(p.lines(), (std::vector<std::string>{"one", "two"}));

  ChildProcess q({"/bin/sh", "-c", "printf 'one\\n\\nthree\\n'"}, {"PATH=/usr/bin:/bin"}, out);
  ASSERT_EQ(q.wait(), 0);
  EXPECT_EQ(q.lines(), (std::vector<std::string>{"one", "", "three"}));
}

}  // namespace
}  // namespace kcl::testing
