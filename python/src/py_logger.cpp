#include "py_logger.h"

#include <cstdio>
#include <string>

#include "gil.h"

namespace kclpy {

namespace {

int python_level(kcl::LogLevel level) {
  switch (level) {
    case kcl::LogLevel::kDebug:
      return 10;
    case kcl::LogLevel::kInfo:
      return 20;
    case kcl::LogLevel::kWarn:
      return 30;
    case kcl::LogLevel::kError:
      return 40;
    case kcl::LogLevel::kOff:
      break;
  }
  return 100;
}

}  // namespace

bool python_alive() {
#if PY_VERSION_HEX >= 0x030D0000
  // _Py_IsFinalizing() was removed in CPython 3.13, which made Py_IsFinalizing() public.
  return Py_IsInitialized() != 0 && Py_IsFinalizing() == 0;
#else
  return Py_IsInitialized() != 0 && _Py_IsFinalizing() == 0;
#endif
}

PyLogger::PyLogger() {
  forward_ = py::object(py::module_::import("kcl._logging").attr("forward")).release().ptr();
  refresh();
}

PyLogger::~PyLogger() {
  if (forward_ == nullptr || !python_alive()) return;  // at exit: left to the interpreter
  py::gil_scoped_acquire gil;
  Py_DECREF(forward_);
}

void PyLogger::refresh() {
  threshold_.store(py::module_::import("kcl._logging").attr("effective_level")().cast<int>());
}

bool PyLogger::enabled(kcl::LogLevel level) const {
  return level != kcl::LogLevel::kOff && python_level(level) >= threshold_.load();
}

void PyLogger::log(kcl::LogLevel level, std::string_view component, std::string_view message) {
  if (!python_alive()) {
    std::fprintf(stderr, "kcl [%.*s] %.*s\n", static_cast<int>(component.size()), component.data(),
                 static_cast<int>(message.size()), message.data());
    return;
  }
  CallbackGil gil;  // a core thread keeps its thread state from one line to the next
  PyObject* c =
      PyUnicode_DecodeUTF8(component.data(), static_cast<Py_ssize_t>(component.size()), "replace");
  PyObject* m =
      PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()), "replace");
  PyObject* r = nullptr;
  if (c != nullptr && m != nullptr) {
    r = PyObject_CallFunction(forward_, "iOO", python_level(level), c, m);
  }
  if (r == nullptr) PyErr_WriteUnraisable(forward_);  // a handler that raised: reported, not fatal
  Py_XDECREF(r);
  Py_XDECREF(c);
  Py_XDECREF(m);
}

std::shared_ptr<kcl::Logger> make_python_logger() { return std::make_shared<PyLogger>(); }

}  // namespace kclpy
