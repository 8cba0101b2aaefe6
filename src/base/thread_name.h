// base/thread_name.h: names the calling thread, so that `top -H`, `ps -L`, perf, gdb and
// /proc/PID/task/TID/comm tell kcl-cpp's threads apart (all would read "kcl" or the
// program's name otherwise). Every thread the library starts names itself "kcl-..." first
// thing. Linux keeps 15 bytes of a name: a longer one is cut there.
//
// Thread safety: names the calling thread only.
#pragma once

#include <string>
#include <string_view>

namespace kcl::base {

// The most bytes of a thread's name the kernel keeps.
inline constexpr std::size_t kMaxThreadNameBytes = 15;

// Names the calling thread `name` (cut to kMaxThreadNameBytes). Does nothing where the
// platform cannot; never fails.
void name_this_thread(std::string_view name) noexcept;

// The calling thread's name ("" when it cannot be read).
std::string this_thread_name();

}  // namespace kcl::base
