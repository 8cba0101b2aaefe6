// What a shell command prints on stdout, and its exit status: for tests that run a program
// (`kcl --version`, the Python package) and read its answer.
#pragma once

#include <array>
#include <cstdio>
#include <string>

namespace kcl::testing {

// `command` run by /bin/sh; its stdout, with its exit status (as pclose returns it) in
// `*status` (-1 when it could not be started).
inline std::string command_output(const std::string& command, int* status) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return out;
  }
  std::array<char, 256> buf;
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
  *status = ::pclose(p);
  return out;
}

}  // namespace kcl::testing
