#include "base/thread_name.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>

namespace kcl::base {

void name_this_thread(std::string_view name) noexcept {
  char buf[kMaxThreadNameBytes + 1] = {};
  std::memcpy(buf, name.data(), std::min(name.size(), kMaxThreadNameBytes));
  (void)pthread_setname_np(pthread_self(), buf);
}

}  // namespace kcl::base
