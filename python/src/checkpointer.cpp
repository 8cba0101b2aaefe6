#include "checkpointer.h"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>

#include "errors.h"
#include "records.h"

namespace kclpy {

void PyCheckpointer::attach(kcl::Checkpointer* checkpointer) {
  std::lock_guard lock(mu_);
  checkpointer_ = checkpointer;
}

void PyCheckpointer::run(const std::function<kcl::Status(kcl::Checkpointer&)>& f) {
  kcl::Status status;
  {
    py::gil_scoped_release released;
    std::lock_guard lock(mu_);
    if (checkpointer_ == nullptr) {
      status = kcl::Status(kcl::StatusCode::kFailedPrecondition,
                           "the checkpointer of " + shard_id_ +
                               " is valid only while the callback it was passed to runs "
                               "(checkpoint before returning, or use kcl.PullConsumer to "
                               "acknowledge records later)");
    } else {
      status = f(*checkpointer_);
    }
  }
  check(status);
}

py::tuple PyCheckpointer::last_checkpoint() {
  std::optional<kcl::ExtendedSequenceNumber> last;
  run([&](kcl::Checkpointer& c) {
    last = c.last_checkpoint();
    return kcl::Status::Ok();
  });
  return py::make_tuple(last->sequence_number(), last->sub_sequence_number());
}

namespace {

// A position given as a kcl.Record or as a sequence number (str).
struct Position {
  std::string sequence_number;
  kcl::SubSequenceNumber sub_sequence_number = 0;
};

Position position_of(py::handle where, kcl::SubSequenceNumber sub) {
  if (py::isinstance<PyRecord>(where)) {
    const kcl::Record& r = where.cast<const PyRecord&>().record;
    return Position{std::string(r.sequence_number()), r.sub_sequence_number()};
  }
  if (py::isinstance<py::str>(where)) return Position{where.cast<std::string>(), sub};
  throw py::type_error("a checkpoint position is a kcl.Record or a sequence number (str)");
}

void bind_methods(py::class_<PyCheckpointer, std::shared_ptr<PyCheckpointer>>& c) {
  c.def(
      "checkpoint",
      [](PyCheckpointer& self, py::object where, kcl::SubSequenceNumber sub) {
        if (where.is_none()) return self.run([](kcl::Checkpointer& cp) { return cp.checkpoint(); });
        Position p = position_of(where, sub);
        self.run([&](kcl::Checkpointer& cp) {
          return cp.checkpoint(p.sequence_number, p.sub_sequence_number);
        });
      },
      py::arg("position") = py::none(), py::arg("sub_sequence_number") = 0,
      "Checkpoints at the last record delivered (no argument), at a kcl.Record, or at a "
      "sequence number. Raises LeaseLostError (nothing written), InvalidArgumentError "
      "(before the last checkpoint or after the last record delivered), UnavailableError.");
  c.def(
      "prepare_checkpoint",
      [](PyCheckpointer& self, py::handle where, kcl::SubSequenceNumber sub,
         std::optional<std::string> state) {
        Position p = position_of(where, sub);
        self.run([&](kcl::Checkpointer& cp) {
          return cp.prepare_checkpoint(p.sequence_number, p.sub_sequence_number,
                                       state.value_or(std::string()));
        });
      },
      py::arg("position"), py::arg("sub_sequence_number") = 0, py::arg("state") = py::none(),
      "Two-phase checkpoint: records `position` as pending with optional application state.");
  c.def(
      "commit_prepared",
      [](PyCheckpointer& self) {
        self.run([](kcl::Checkpointer& cp) { return cp.commit_prepared(); });
      },
      "Makes the prepared checkpoint the checkpoint.");
  c.def_property_readonly("last_checkpoint", &PyCheckpointer::last_checkpoint,
                          "The last checkpoint written or loaded: (sequence_number, "
                          "sub_sequence_number); the sequence number may be a sentinel such "
                          "as 'TRIM_HORIZON' or 'SHARD_END'.");
  c.def_property_readonly("shard_id", &PyCheckpointer::shard_id);
}

}  // namespace

void bind_checkpointer(py::module_& m) {
  py::class_<PyCheckpointer, std::shared_ptr<PyCheckpointer>> c(
      m, "Checkpointer", "Records a shard's progress in the lease table (fenced on the lease).");
  bind_methods(c);
}

}  // namespace kclpy
