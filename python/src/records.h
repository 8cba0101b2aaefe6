// records.h: kcl.Record, a kcl::Record seen from Python. `data` is a read-only memoryview
// into the bytes the record shares with its batch (zero copy; it keeps them alive), and
// bytes(record) a copy. The other fields are made into Python objects when asked for.
#pragma once

#include <pybind11/pybind11.h>

#include <vector>

#include "kcl/record.h"

namespace kclpy {

namespace py = pybind11;

struct PyRecord {
  kcl::Record record;
};

// kcl.RecordBatch: a batch handed to process_records, as a read-only sequence. The records
// are copied as C++ handles (sharing their bytes); a Python kcl.Record is made only for a
// record the processor looks at, so a processor that counts a batch or forwards part of it
// pays nothing for the rest.
struct PyRecordBatch {
  std::vector<PyRecord> records;
};

// A str from bytes the core holds (invalid UTF-8 replaced, never an error).
py::str text_of(std::string_view s);

void bind_records(py::module_& m);

}  // namespace kclpy
