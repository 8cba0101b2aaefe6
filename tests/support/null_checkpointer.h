// A Checkpointer that accepts every checkpoint and writes nothing (its last checkpoint stays
// TRIM_HORIZON): for tests of code that takes a checkpointer but whose checkpoints are not
// what they test.
#pragma once

#include "kcl/processor.h"

namespace kcl::testing {

class NullCheckpointer : public Checkpointer {
 public:
  Status checkpoint() override { return Status::Ok(); }
  Status checkpoint(const Record&) override { return Status::Ok(); }
  Status checkpoint(std::string_view, SubSequenceNumber) override { return Status::Ok(); }
  Status prepare_checkpoint(std::string_view, SubSequenceNumber, std::string_view) override {
    return Status::Ok();
  }
  Status commit_prepared() override { return Status::Ok(); }
  ExtendedSequenceNumber last_checkpoint() const override {
    return ExtendedSequenceNumber::trim_horizon();
  }
};

}  // namespace kcl::testing
