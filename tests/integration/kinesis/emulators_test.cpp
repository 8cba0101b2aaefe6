// The emulator fixture itself: start, answer, stop, restart, no orphans.
#include "support/emulators.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

namespace kcl::testing {
namespace {

bool process_alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  // A zombie (already dead, not reaped by its new parent yet) counts as gone.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  int p = 0;
  char comm[256] = {0};
  char state = '?';
  int n = std::fscanf(f, "%d %255s %c", &p, comm, &state);
  std::fclose(f);
  return n == 3 && state != 'Z';
}

bool wait_until_gone(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (process_alive(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TEST(EmulatorsTest, StartsBothAndStops) {
  auto r = Emulators::start();
  ASSERT_TRUE(r.ok()) << r.status();
  auto& emu = **r;
  EXPECT_TRUE(emu.kinesis_url().starts_with("http://127.0.0.1:")) << emu.kinesis_url();
  EXPECT_TRUE(emu.dynamodb_url().starts_with("http://127.0.0.1:")) << emu.dynamodb_url();
  EXPECT_NE(emu.kinesis_url(), emu.dynamodb_url());
  auto cfg = emu.aws_config();
  EXPECT_EQ(cfg.region, "us-east-1");
  EXPECT_EQ(cfg.kinesis_endpoint_url, emu.kinesis_url());
  EXPECT_EQ(cfg.dynamodb_endpoint_url, emu.dynamodb_url());
  ASSERT_TRUE(cfg.credentials.has_value());
  EXPECT_FALSE(cfg.credentials->access_key_id.empty());
  const pid_t pid = emu.pid();
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(emu.running());
  emu.stop();
  EXPECT_FALSE(emu.running());
  EXPECT_TRUE(emu.kinesis_url().empty());
  EXPECT_TRUE(wait_until_gone(pid, std::chrono::seconds(5)));
  emu.stop();  // idempotent
}

TEST(EmulatorsTest, StartsOnlyWhatIsAsked) {
  auto k = Emulators::start(true, false);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_FALSE((*k)->kinesis_url().empty());
  EXPECT_TRUE((*k)->dynamodb_url().empty());
  auto d = Emulators::start(false, true);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE((*d)->kinesis_url().empty());
  EXPECT_FALSE((*d)->dynamodb_url().empty());
  EXPECT_FALSE(Emulators::start(false, false).ok());
}

TEST(EmulatorsTest, RestartKeepsPortsWhenFree) {
  auto r = Emulators::start(true, false);
  ASSERT_TRUE(r.ok()) << r.status();
  auto& emu = **r;
  const std::string url = emu.kinesis_url();
  const pid_t old_pid = emu.pid();
  ASSERT_TRUE(emu.restart().ok());
  EXPECT_TRUE(emu.running());
  EXPECT_NE(emu.pid(), old_pid);
  EXPECT_EQ(emu.kinesis_url(), url);
  EXPECT_TRUE(wait_until_gone(old_pid, std::chrono::seconds(5)));
}

TEST(EmulatorsTest, DestructorStopsChild) {
  pid_t pid = -1;
  {
    auto r = Emulators::start(false, true);
    ASSERT_TRUE(r.ok()) << r.status();
    pid = (*r)->pid();
  }
  EXPECT_TRUE(wait_until_gone(pid, std::chrono::seconds(5)));
}

// The parent dies by SIGKILL: its emulators must go away too (stdin pipe closes; the death
// signal is the second guard). The "parent" here is a forked copy of this test process.
TEST(EmulatorsTest, NoOrphanWhenParentIsKilled) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    auto r = Emulators::start(true, false);
    pid_t node = r.ok() ? (*r)->pid() : -1;
    if (::write(fds[1], &node, sizeof node) != static_cast<ssize_t>(sizeof node)) ::_exit(3);
    for (;;) ::pause();  // wait to be killed; never runs destructors
  }
  ::close(fds[1]);
  pid_t node = -1;
  ASSERT_EQ(::read(fds[0], &node, sizeof node), static_cast<ssize_t>(sizeof node));
  ::close(fds[0]);
  ASSERT_GT(node, 0) << "the forked parent failed to start emulators";
  EXPECT_TRUE(process_alive(node));
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(wait_until_gone(node, std::chrono::seconds(10))) << "node " << node << " orphaned";
}

TEST(EmulatorsTest, SharedEmulatorsIsStartedOnce) {
  Emulators& a = shared_emulators();
  Emulators& b = shared_emulators();
  EXPECT_EQ(&a, &b);
  EXPECT_TRUE(a.running());
  EXPECT_FALSE(a.kinesis_url().empty());
  EXPECT_FALSE(a.dynamodb_url().empty());
}

TEST(EmulatorsTest, UniqueNamesDiffer) {
  std::set<std::string> names;
  for (int i = 0; i < 1000; ++i) names.insert(unique_name("s"));
  EXPECT_EQ(names.size(), 1000u);
  std::string n = unique_name("orders");
  EXPECT_TRUE(n.starts_with("orders-"));
  for (char c : n) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-') << n;
  EXPECT_LE(n.size(), 128u);
}

}  // namespace
}  // namespace kcl::testing
