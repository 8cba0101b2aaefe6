#include "base/thread_name.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

namespace kcl::base {
namespace {

// What the kernel shows for the calling thread (as top -H and ps -L read it).
std::string comm_of_this_thread() {
  std::ifstream in("/proc/self/task/" + std::to_string(::gettid()) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

TEST(ThreadNameTest, TheKernelShowsTheName) {
  std::string seen, read_back;
  std::thread t([&] {
    name_this_thread("kcl-test-name");
    seen = comm_of_this_thread();
    read_back = this_thread_name();
  });
  t.join();
  EXPECT_EQ(seen, "kcl-test-name");
  EXPECT_EQ(read_back, "kcl-test-name");
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
  std::thread t([] { name_this_thread("kcl-other"); });
  t.join();
  EXPECT_EQ(comm_of_this_thread(), before);
}

}  // namespace
}  // namespace kcl::base
