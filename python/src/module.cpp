// kcl._kcl: the extension module under the kcl package (python/kcl). The package's Python
// code wraps it; applications use `import kcl`.
#include <pybind11/pybind11.h>

#include <string>

#include "checkpointer.h"
#include "kcl/version.h"
#include "records.h"

namespace kclpy {
void bind_worker(pybind11::module_& m);
void bind_pull(pybind11::module_& m);
void bind_producer(pybind11::module_& m);
}  // namespace kclpy

PYBIND11_MODULE(_kcl, m) {
  m.doc() = "kcl-cpp's worker, pull consumer and producer (use the kcl package)";
  m.attr("__version__") = std::string(kcl::version());  // the CMake project version
  kclpy::bind_records(m);
  kclpy::bind_checkpointer(m);
  kclpy::bind_worker(m);
  kclpy::bind_pull(m);
  kclpy::bind_producer(m);
}
