// Thread names as the kernel shows them (/proc/self/task/TID/comm: what top -H and ps -L
// print): one thread's, and how many of this process's threads carry each name.
#pragma once

#include <dirent.h>

#include <fstream>
#include <map>
#include <string>

namespace kcl::testing {

// The name of this process's thread `tid` ("" once it ended).
inline std::string thread_name_of(const std::string& tid) {
  std::ifstream in("/proc/self/task/" + tid + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

inline std::map<std::string, int> thread_names() {
  std::map<std::string, int> names;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return names;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const std::string name = thread_name_of(e->d_name);
    if (!name.empty()) ++names[name];
  }
  ::closedir(dir);
  return names;
}

}  // namespace kcl::testing
