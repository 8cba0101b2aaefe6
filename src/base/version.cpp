#include "kcl/version.h"

// KCL_VERSION_STRING is defined for this file only (src/CMakeLists.txt), from the CMake
// project version, so a new version recompiles this file and nothing else.
namespace kcl {

std::string_view version() { return KCL_VERSION_STRING; }

}  // namespace kcl
