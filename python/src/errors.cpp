#include "errors.h"

namespace kclpy {

namespace {

py::object errors_module() { return py::module_::import("kcl.errors"); }

[[noreturn]] void raise_object(const py::object& exception) {
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
  throw py::error_already_set();
}

py::object aws_details(const kcl::Status& status) {
  if (!status.aws()) return py::none();
  const kcl::AwsErrorDetails& a = *status.aws();
  py::dict d;
  d["operation"] = a.operation;
  d["endpoint"] = a.endpoint;
  d["http_status"] = a.http_status;
  d["error_type"] = a.error_type;
  d["request_id"] = a.request_id;
  d["attempts"] = a.attempts;
  return d;
}

}  // namespace

py::object exception_for(const kcl::Status& status) {
  return errors_module().attr("_from_status")(std::string(kcl::to_string(status.code())),
                                              status.to_string(), aws_details(status));
}

void raise_status(const kcl::Status& status) { raise_object(exception_for(status)); }

void check_ack(const kcl::Status& status) {
  if (status.code() == kcl::StatusCode::kCancelled) {
    raise_object(errors_module().attr("_ack_cancelled")(status.to_string(), aws_details(status)));
  }
  check(status);
}

void raise_config_error(const std::vector<std::string>& problems) {
  py::list list;
  for (const std::string& p : problems) list.append(p);
  raise_object(errors_module().attr("_config_error")(list));
}

}  // namespace kclpy
