#include "records.h"

#include <structmember.h>

#include <chrono>
#include <string>

namespace kclpy {

py::str text_of(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

namespace {

py::object arrival_of(const kcl::Record& r) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      r.approximate_arrival_timestamp().time_since_epoch())
                      .count();
  py::module_ datetime = py::module_::import("datetime");
  return datetime.attr("datetime")
      .attr("fromtimestamp")(static_cast<double>(ms) / 1000.0,
                             datetime.attr("timezone").attr("utc"));
}

std::string repr_of(const kcl::Record& r) {
  return "kcl.Record(shard_id='" + std::string(r.shard_id()) + "', sequence_number='" +
         std::string(r.sequence_number()) +
         "', sub_sequence_number=" + std::to_string(r.sub_sequence_number()) + ", partition_key='" +
         std::string(r.partition_key()) + "', " + std::to_string(r.data().size()) + " bytes)";
}

py::ssize_t batch_index(const PyRecordBatch& b, py::ssize_t i) {
  const auto n = static_cast<py::ssize_t>(b.records.size());
  if (i < 0) i += n;
  if (i < 0 || i >= n) throw py::index_error("RecordBatch index out of range");
  return i;
}

// One field of the objects fill() makes: its name and, when the class keeps it in a slot (a
// member descriptor), that slot, which is then set directly: what `obj.name = value` does,
// without looking the name up for every record.
class Field {
 public:
  Field(const py::type& cls, const char* name) : name_(name) {
    py::object d = py::reinterpret_steal<py::object>(PyObject_GetAttr(cls.ptr(), name_.ptr()));
    if (!d) {
      PyErr_Clear();
    } else if (Py_TYPE(d.ptr()) == &PyMemberDescr_Type) {
      member_ = reinterpret_cast<PyMemberDescrObject*>(d.ptr())->d_member;
      descriptor_ = std::move(d);
    }
  }
  // Sets the field of `obj` to `value` (a new reference, stolen).
  void set(PyObject* obj, PyObject* value) const {
    if (value == nullptr) throw py::error_already_set();
    const int failed = member_ != nullptr
                           ? PyMember_SetOne(reinterpret_cast<char*>(obj), member_, value)
                           : PyObject_SetAttr(obj, name_.ptr(), value);
    Py_DECREF(value);
    if (failed != 0) throw py::error_already_set();
  }

 private:
  py::str name_;
  py::object descriptor_;  // keeps member_ alive
  PyMemberDef* member_ = nullptr;
};

// kcl.kclpy's records: what a Python loop over the batch would make, one instance of `cls`
// per record with its fields already Python objects, at a fraction of the calls (the
// amazon_kclpy processor reads them as plain attributes).
py::list fill(const PyRecordBatch& b, const py::type& cls) {
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  const Field binary_data(cls, "binary_data"), partition_key(cls, "partition_key"),
      sequence_number(cls, "sequence_number"), sub_sequence_number(cls, "sub_sequence_number"),
      timestamp_millis(cls, "timestamp_millis");
  const py::tuple no_args;
  py::list out(b.records.size());
  for (std::size_t i = 0; i < b.records.size(); ++i) {
    const kcl::Record& r = b.records[i].record;
    auto obj = py::reinterpret_steal<py::object>(type->tp_new(type, no_args.ptr(), nullptr));
    if (!obj) throw py::error_already_set();
    const std::string_view data = r.data();
    binary_data.set(obj.ptr(),
                    PyBytes_FromStringAndSize(data.data(), static_cast<Py_ssize_t>(data.size())));
    partition_key.set(obj.ptr(), text_of(r.partition_key()).release().ptr());
    sequence_number.set(obj.ptr(), text_of(r.sequence_number()).release().ptr());
    sub_sequence_number.set(obj.ptr(),
                            PyLong_FromLongLong(static_cast<long long>(r.sub_sequence_number())));
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        r.approximate_arrival_timestamp().time_since_epoch())
                        .count();
    timestamp_millis.set(obj.ptr(), PyLong_FromLongLong(static_cast<long long>(ms)));
    PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), obj.release().ptr());
  }
  return out;
}

void bind_batch(py::module_& m) {
  py::class_<PyRecordBatch>(m, "RecordBatch",
                            "The records of one batch, in shard order: a read-only sequence of "
                            "kcl.Record, each made when it is first looked at.")
      .def("__len__", [](const PyRecordBatch& b) { return b.records.size(); })
      .def("__bool__", [](const PyRecordBatch& b) { return !b.records.empty(); })
      .def(
          "__getitem__",
          [](PyRecordBatch& b, py::ssize_t i) -> PyRecord& {
            return b.records[static_cast<std::size_t>(batch_index(b, i))];
          },
          py::return_value_policy::reference_internal)
      .def("__getitem__",
           [](const PyRecordBatch& b, const py::slice& s) {
             std::size_t start = 0, stop = 0, step = 0, length = 0;
             if (!s.compute(b.records.size(), &start, &stop, &step, &length)) {
               throw py::error_already_set();
             }
             py::list out(length);
             for (std::size_t k = 0; k < length; ++k) {
               PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(k),
                               py::cast(b.records[start + k * step]).release().ptr());
             }
             return out;
           })
      .def(
          "__iter__",
          [](PyRecordBatch& b) { return py::make_iterator(b.records.begin(), b.records.end()); },
          py::keep_alive<0, 1>())
      .def("_fill", &fill,
           "For kcl.kclpy: the records as new instances of `cls`, each field set on its slot "
           "(binary_data, partition_key, sequence_number, sub_sequence_number, "
           "timestamp_millis), in one call for the batch.")
      .def("__repr__", [](const PyRecordBatch& b) {
        return "kcl.RecordBatch(" + std::to_string(b.records.size()) + " records)";
      });
}

}  // namespace

void bind_records(py::module_& m) {
  py::class_<PyRecord>(m, "Record", py::buffer_protocol(),
                       "A record of a shard (after KPL deaggregation).")
      .def_buffer([](PyRecord& self) {
        std::string_view d = self.record.data();
        return py::buffer_info(const_cast<char*>(d.data()), 1, "B", 1,
                               {static_cast<py::ssize_t>(d.size())}, {1}, /*readonly=*/true);
      })
      .def_property_readonly(
          "data", [](py::object self) { return py::memoryview(py::buffer(self)); },
          "The record's bytes: a read-only memoryview, zero copy (bytes(record) copies).")
      .def("__bytes__",
           [](const PyRecord& self) {
             std::string_view d = self.record.data();
             return py::bytes(d.data(), d.size());
           })
      .def("__len__", [](const PyRecord& self) { return self.record.data().size(); })
      .def_property_readonly("partition_key",
                             [](const PyRecord& s) { return text_of(s.record.partition_key()); })
      .def_property_readonly(
          "explicit_hash_key",
          [](const PyRecord& s) { return text_of(s.record.explicit_hash_key()); })
      .def_property_readonly("sequence_number",
                             [](const PyRecord& s) { return text_of(s.record.sequence_number()); })
      .def_property_readonly("sub_sequence_number",
                             [](const PyRecord& s) { return s.record.sub_sequence_number(); })
      .def_property_readonly("aggregated", [](const PyRecord& s) { return s.record.aggregated(); })
      .def_property_readonly("shard_id",
                             [](const PyRecord& s) { return text_of(s.record.shard_id()); })
      .def_property_readonly(
          "approximate_arrival_timestamp", [](const PyRecord& s) { return arrival_of(s.record); },
          "When Kinesis received the record (an aware datetime in UTC).")
      .def("__repr__", [](const PyRecord& s) { return repr_of(s.record); });
  bind_batch(m);
}

}  // namespace kclpy
