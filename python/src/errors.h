// errors.h: kcl-cpp's Status as the Python exceptions of kcl.errors. Call with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "kcl/status.h"

namespace kclpy {

namespace py = pybind11;

// The kcl.errors exception for a failed `status` (KclError's subclass for its code).
py::object exception_for(const kcl::Status& status);
// Raises exception_for(status) as a Python exception (throws py::error_already_set).
[[noreturn]] void raise_status(const kcl::Status& status);
// Raises kcl.AckCancelledError for an ack or nack refused as too late (kCancelled), else as
// check(): a late ack is no asyncio cancellation.
void check_ack(const kcl::Status& status);
// Raises when `status` is not OK.
inline void check(const kcl::Status& status) {
  if (!status.ok()) raise_status(status);
}
// Raises kcl.ConfigError listing `problems` (each naming its option).
[[noreturn]] void raise_config_error(const std::vector<std::string>& problems);

}  // namespace kclpy
