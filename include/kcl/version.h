// kcl/version.h: the version of the kcl-cpp library an application runs with.
//
// The version is set in one place, the `project(kcl VERSION ...)` line of the top-level
// CMakeLists.txt; `kcl --version`, the Python package's `kcl.__version__` and the version
// each worker reports in the fleet view all read it from here.
#pragma once

#include <string_view>

namespace kcl {

// "MAJOR.MINOR.PATCH", as in CMakeLists.txt's project() line. The library's, not the
// headers': an application linked against another build of libkcl.a sees that build's.
std::string_view version();

}  // namespace kcl
