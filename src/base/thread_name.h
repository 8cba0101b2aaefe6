// base/thread_name.h: thread names, so that `top -H`, `ps -L`, perf, gdb and
// /proc/PID/task/TID/comm tell kcl-cpp's threads apart (all would read "kcl" or the
// program's name otherwise). Every thread the library starts is a named_thread("kcl-...").
// Linux keeps 15 bytes of a name: a longer one is cut there.
//
// Thread safety: name_this_thread() names the calling thread only.
#pragma once

#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace kcl::base {

// The most bytes of a thread's name the kernel keeps.
inline constexpr std::size_t kMaxThreadNameBytes = 15;

// Names the calling thread `name` (cut to kMaxThreadNameBytes). Does nothing where the
// platform cannot; never fails.
void name_this_thread(std::string_view name) noexcept;

// A thread that names itself `name`, then runs `body`.
template <class Body>
std::thread named_thread(std::string name, Body&& body) {
  return std::thread([name = std::move(name), body = std::forward<Body>(body)]() mutable {
    name_this_thread(name);
    body();
  });
}

}  // namespace kcl::base
