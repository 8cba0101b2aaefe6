// A program outside the kcl-cpp tree that uses the installed package.
#include <iostream>

#include "kcl/status.h"

int main() {
  kcl::Status s(kcl::StatusCode::kNotFound, "stream demo not found");
  if (s.ok() || s.to_string().find("NOT_FOUND") == std::string::npos) return 1;
  std::cout << "kcl ok\n";
  return 0;
}
