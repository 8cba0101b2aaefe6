// multilang/multilang_processor.h: a RecordProcessor that runs one child process per shard
// and speaks the MultiLangDaemon protocol with it (one compact JSON object per line):
//
//   daemon -> child: initialize, processRecords, leaseLost, shardEnded, shutdownRequested,
//                    and the answer to each checkpoint {action: checkpoint, sequenceNumber,
//                    subSequenceNumber, error: null | the exception's name}
//   child -> daemon: any number of {action: checkpoint, sequenceNumber, subSequenceNumber}
//                    (null sequence number: the batch's last record; SHARD_END inside
//                    shardEnded), then {action: status, responseFor: <the action>}
//
// Checkpoint errors, by the Java names: InvalidStateException (during initialize, or after
// the lease was lost), ShutdownException (the lease is gone: the fenced write was refused),
// ThrottlingException (DynamoDB throttled), KinesisClientLibDependencyException (DynamoDB
// unreachable), IllegalArgumentException (a position before the checkpoint or after the
// last record delivered, or not a number).
//
// Lines the child writes that are not a status or a checkpoint (a print statement, a
// library's banner) are skipped, as the Java MultiLangDaemon skips them, and logged once per
// series with the count.
//
// Failures of the child: it exits, answers with a status for another action, or does not
// send its next message (or read what it is sent) within `response_timeout`. Unlike the Java
// MultiLangDaemon, which exits as a whole, only this shard's child is stopped (killed if need
// be): the callback throws, the worker delivers the same batch again after its backoff, and
// the processor starts a new child first, initialized at the shard's current checkpoint.
// Other shards go on.
//
// Thread safety: as any RecordProcessor.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kcl/logging.h"
#include "kcl/processor.h"
#include "multilang/child_process.h"

namespace kcl::multilang {

struct ChildOptions {
  std::vector<std::string> command;  // argv of the child
  // How long the child may take to send each message (timeoutInSeconds); 0: no limit, as the
  // Java daemon without timeoutInSeconds (a child that hangs is then reported by the worker's
  // hung-processor warning and stall detection).
  std::chrono::milliseconds response_timeout{0};
  // The initialize message also names the shard's stream ("streamName"): a worker reading
  // several streams (properties key streamNames).
  bool tell_stream = false;
};

class MultiLangProcessor final : public RecordProcessor {
 public:
  MultiLangProcessor(ChildOptions options, std::shared_ptr<Logger> logger);
  ~MultiLangProcessor() override;

  void initialize(const InitializationInput& input) override;
  void process_records(const ProcessRecordsInput& input) override;
  void lease_lost() override;
  void shard_ended(Checkpointer& checkpointer) override;
  void shutdown_requested(Checkpointer& checkpointer) override;

  // Children started for this shard (1 + restarts after failures).
  int children_started() const { return children_started_; }

 private:
  // One exchange: sends `message`, answers checkpoints through `checkpointer` (null: refused
  // with InvalidStateException), until the status for `action`. Throws std::runtime_error
  // naming the failure (after stopping the child) when the child fails.
  void exchange(const std::string& action, const std::string& message, Checkpointer* checkpointer,
                bool shard_end = false);
  // The child's next message (a JSON object with a string "action") in the exchange for
  // `action`; fails past `deadline` or on anything else.
  nlohmann::json read_message(const std::string& action,
                              std::chrono::steady_clock::time_point deadline);
  // Answers the child's checkpoint `request` (see exchange).
  void answer_checkpoint(const nlohmann::json& request, Checkpointer* checkpointer, bool shard_end);
  // Starts the child and initializes it when there is none (a first start or a restart).
  void ensure_child(Checkpointer* checkpointer);
  // Stops the child and throws `what`; logs it when it is the 1st, 3rd, 10th, 100th, ...
  // failure in a row (the core reports each series with its count too).
  [[noreturn]] void fail(const std::string& what);
  // When the child's next message (or the read of what it is sent) is due; far away when
  // there is no timeout.
  std::chrono::steady_clock::time_point next_deadline() const;
  // " (timeoutInSeconds: N ms)" for a deadline that passed, else empty.
  std::string timeout_text(const Status& s) const;
  void log(LogLevel level, const std::string& message) const;

  const ChildOptions options_;
  std::shared_ptr<Logger> logger_;
  std::string shard_id_;
  std::string component_;
  std::unique_ptr<ChildProcess> child_;
  std::optional<InitializationInput> init_;
  int children_started_ = 0;
  std::uint64_t failures_in_a_row_ = 0;  // fail() since the last processRecords answered
  std::uint64_t lines_skipped_ = 0;      // lines of the children's output that were skipped
};

class MultiLangProcessorFactory final : public RecordProcessorFactory {
 public:
  MultiLangProcessorFactory(ChildOptions options, std::shared_ptr<Logger> logger)
      : options_(std::move(options)), logger_(std::move(logger)) {}
  std::unique_ptr<RecordProcessor> create(std::string_view) override {
    return std::make_unique<MultiLangProcessor>(options_, logger_);
  }

 private:
  ChildOptions options_;
  std::shared_ptr<Logger> logger_;
};

}  // namespace kcl::multilang
