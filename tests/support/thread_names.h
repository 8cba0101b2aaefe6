// thread_names(): how many of this process's threads carry each name, as the kernel shows
// them (/proc/self/task/TID/comm: what top -H and ps -L print).
#pragma once

#include <dirent.h>

#include <fstream>
#include <map>
#include <string>

namespace kcl::testing {

inline std::map<std::string, int> thread_names() {
  std::map<std::string, int> names;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return names;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    if (std::getline(in, name)) ++names[name];
  }
  ::closedir(dir);
  return names;
}

}  // namespace kcl::testing
