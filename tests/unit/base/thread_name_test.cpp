#include "base/thread_name.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "support/thread_names.h"

namespace kcl::base {
namespace {

// What the kernel shows for the calling thread (as top -H and ps -L read it).
std::string comm_of_this_thread() { return testing::thread_name_of(std::to_string(::gettid())); }

TEST(ThreadNameTest, TheKernelShowsTheName) {
  std::string seen;
  std::thread t = named_thread("kcl-test-name", [&] { seen = comm_of_this_thread(); });
  t.join();
  EXPECT_EQ(seen, "kcl-test-name");
}

TEST(ThreadNameTest, ALongNameIsCutToFifteenBytes) {
  std::string seen;
  std::thread t([&] {
    name_this_thread("kcl-a-name-longer-than-fifteen-bytes");
    seen = comm_of_this_thread();
  });
  t.join();
  EXPECT_EQ(seen, "kcl-a-name-long");
  EXPECT_EQ(seen.size(), kMaxThreadNameBytes);
}

TEST(ThreadNameTest, NamingOneThreadLeavesTheOthers) {
  const std::string before = comm_of_this_thread();
  std::thread t = named_thread("kcl-other", [] {});
  t.join();
  EXPECT_EQ(comm_of_this_thread(), before);
}

}  // namespace
}  // namespace kcl::base
