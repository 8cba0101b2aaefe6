// What `kcl consume` prints and checkpoints. Output is the one writer of standard output,
// shared by every shard's processor, printing at most --max records in all. PrintingProcessor
// is a shard's processor: it prints each batch through Output and checkpoints only records
// already printed and flushed.
//
// Thread safety: Output may be called from any thread; a PrintingProcessor from its shard's
// thread only (as the worker does).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/failure_series.h"
#include "kcl/processor.h"

namespace kcl::cli {

class Output {
 public:
  // `out` and its descriptor `fd`: where the lines go (standard output for kcl consume).
  Output(bool raw, long long max_records, std::FILE* out = stdout, int fd = STDOUT_FILENO)
      : raw_(raw), max_(max_records), out_(out), fd_(fd) {}

  // Writes and flushes the first records of `records` that fit under the limit; returns how
  // many (all of them without a limit), or -1 when the output is closed or failing. The lines
  // are built in a buffer of the calling thread, reused from batch to batch, and written in
  // chunks of whole lines of about 256 KiB (a thread holds one chunk, not a whole batch).
  long long write(std::span<const Record> records, std::string_view stream = {});
  bool limit_reached() const;
  // The output is gone (its reader closed the pipe: `kcl consume | head`) or failed.
  bool closed() const;
  // Why the output failed when it did not just lose its reader (a full disk): empty otherwise.
  std::string failure() const;
  long long written() const;
  // Whether the reader of the output went away (a pipe closed by `| head`) though nothing was
  // written since: closed() turns true then. The main loop asks about once a second, so a
  // quiet stream stops as well as a busy one.
  bool reader_gone();

 private:
  // A write failed with `error` (mu_ held): the command stops (wake-up) gracefully.
  void mark_closed(int error);
  // How many of `wanted` records this caller may print (every one without a limit).
  std::size_t reserve(std::size_t wanted);

  const bool raw_;
  const long long max_;
  std::FILE* const out_;
  const int fd_;
  std::mutex write_mu_;     // one writer of out_ at a time
  mutable std::mutex mu_;   // guards the fields below
  long long reserved_ = 0;  // records some thread may print
  long long written_ = 0;   // records printed and flushed
  bool closed_ = false;     // the reader is gone or a write failed
  std::string failure_;     // a write's error other than a closed pipe
};

// Prints each batch and checkpoints the last record printed, at most every interval: when a
// batch comes, and when the shard has been idle (ProcessingConfig::empty_batch_interval is the
// interval, so the last records of a burst are checkpointed within about two intervals even
// if nothing follows). A record not printed (--max, or the output closed) is never
// checkpointed, and a shard with such a record is not checkpointed at SHARD_END: the next run
// prints the rest. A checkpoint that fails is tried again an interval later, and its series
// of failures is logged once with a count (base/failure_series.h).
// With --hold-while-exists FILE, a batch with records waits while FILE exists before it is
// printed: a processor stuck on purpose, to rehearse the stall alerts (docs/operations).
class PrintingProcessor final : public RecordProcessor {
 public:
  // --reject-matching: true for a record whose batch must fail before anything is printed.
  using Reject = std::function<bool(const Record&)>;
  PrintingProcessor(Output& out, std::string_view shard_id,
                    std::chrono::milliseconds checkpoint_interval, bool name_stream, Reject reject,
                    std::string hold_file);
  void initialize(const InitializationInput& input) override;
  void process_records(const ProcessRecordsInput& input) override;
  void shard_ended(Checkpointer& checkpointer) override;
  void shutdown_requested(Checkpointer& checkpointer) override;

 private:
  void hold_while_file_exists() const;
  Status checkpoint(Checkpointer& checkpointer);
  void refuse_rejected(std::span<const Record> records) const;

  Output& out_;
  const std::chrono::milliseconds interval_;
  const bool name_stream_;
  const Reject reject_;
  const std::string hold_file_;  // --hold-while-exists
  std::string stream_;           // printed in each line when the worker reads several streams
  std::chrono::steady_clock::time_point last_checkpoint_{};
  std::optional<ExtendedSequenceNumber> last_printed_;
  std::optional<ExtendedSequenceNumber> checkpointed_;
  bool cut_ = false;  // a record of this shard was not printed
  base::FailureSeries checkpoint_failures_;
};

class PrintingFactory final : public RecordProcessorFactory {
 public:
  PrintingFactory(Output& out, std::chrono::milliseconds checkpoint_interval, bool name_stream,
                  PrintingProcessor::Reject reject, std::string hold_file)
      : out_(out),
        interval_(checkpoint_interval),
        name_stream_(name_stream),
        reject_(std::move(reject)),
        hold_file_(std::move(hold_file)) {}
  std::unique_ptr<RecordProcessor> create(std::string_view shard_id) override {
    return std::make_unique<PrintingProcessor>(out_, shard_id, interval_, name_stream_, reject_,
                                               hold_file_);
  }

 private:
  Output& out_;
  const std::chrono::milliseconds interval_;
  const bool name_stream_;
  const PrintingProcessor::Reject reject_;
  const std::string hold_file_;
};

}  // namespace kcl::cli
