#include "consume_output.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "cli_common.h"
#include "record_lines.h"

namespace kcl::cli {

long long Output::write(std::span<const Record> records, std::string_view stream) {
  static constexpr std::size_t kChunk = 256 * 1024;
  thread_local RecordLines lines;
  thread_local LineBuffer text;
  const std::size_t granted = reserve(records.size());
  // Nothing to print (an idle batch, or --max reached): no need to wait for the writer.
  if (granted == 0) return closed() ? -1 : 0;
  std::size_t in_chunk = 0;
  std::unique_lock<std::mutex> writing(write_mu_, std::defer_lock);
  auto flush = [&] {
    if (!writing.owns_lock()) writing.lock();
    if (std::fwrite(text.data(), 1, text.size(), out_) != text.size()) {
      const int error = errno;
      std::lock_guard<std::mutex> lock(mu_);
      mark_closed(error);
      return false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    written_ += static_cast<long long>(in_chunk);
    text.clear();
    in_chunk = 0;
    return true;
  };
  text.clear();
  for (std::size_t i = 0; i < granted; ++i) {
    lines.append(text, records[i], raw_, stream);
    ++in_chunk;
    if (text.size() >= kChunk && !flush()) return -1;
  }
  if (!text.empty() && !flush()) return -1;
  if (!writing.owns_lock()) writing.lock();
  const int flushed = std::fflush(out_);
  const int error = errno;
  std::lock_guard<std::mutex> lock(mu_);
  if (flushed != 0) {
    mark_closed(error);
    return -1;
  }
  if (max_ > 0 && written_ >= max_) wake_stop_waiter();
  return static_cast<long long>(granted);
}

bool Output::limit_reached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_ > 0 && written_ >= max_;
}

bool Output::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

std::string Output::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

long long Output::written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return written_;
}

bool Output::reader_gone() {
  if (!output_reader_gone(fd_)) return closed();
  std::lock_guard<std::mutex> lock(mu_);
  mark_closed(EPIPE);
  return true;
}

void Output::mark_closed(int error) {
  if (error != EPIPE && failure_.empty()) failure_ = std::strerror(error);
  if (!closed_) {
    closed_ = true;
    wake_stop_waiter();
  }
}

std::size_t Output::reserve(std::size_t wanted) {
  std::lock_guard<std::mutex> lock(mu_);
  if (max_ <= 0) return wanted;
  const auto left = static_cast<std::size_t>(std::max(0LL, max_ - reserved_));
  const std::size_t granted = std::min(wanted, left);
  reserved_ += static_cast<long long>(granted);
  return granted;
}

namespace {
// A checkpoint's failure, other than a lost lease, fails the callback (the worker retries it).
void check(const Status& s) {
  if (!s.ok() && s.code() != StatusCode::kLeaseLost) {
    throw std::runtime_error("checkpoint failed: " + s.to_string());
  }
}
}  // namespace

PrintingProcessor::PrintingProcessor(Output& out, std::string_view shard_id,
                                     std::chrono::milliseconds checkpoint_interval,
                                     bool name_stream, Reject reject, std::string hold_file)
    : out_(out),
      interval_(checkpoint_interval),
      name_stream_(name_stream),
      reject_(std::move(reject)),
      hold_file_(std::move(hold_file)),
      checkpoint_failures_("checkpoint of shard " + std::string(shard_id)) {}

void PrintingProcessor::initialize(const InitializationInput& input) {
  last_checkpoint_ = std::chrono::steady_clock::now();
  if (name_stream_) stream_ = input.stream_name;
}

void PrintingProcessor::process_records(const ProcessRecordsInput& input) {
  if (!input.records.empty()) hold_while_file_exists();
  refuse_rejected(input.records);
  const long long printed = out_.write(input.records, stream_);
  if (printed < static_cast<long long>(input.records.size())) cut_ = true;
  // The output is gone (its reader closed the pipe): the command is stopping, and nothing
  // past the last record printed is ever checkpointed.
  if (printed < 0) return;
  if (printed > 0) {
    const Record& last = input.records[static_cast<std::size_t>(printed - 1)];
    last_printed_ =
        ExtendedSequenceNumber(std::string(last.sequence_number()), last.sub_sequence_number());
  }
  // Only now that the output is flushed, and at most once per interval (a failed one too).
  const auto now = std::chrono::steady_clock::now();
  if (!last_printed_ || last_printed_ == checkpointed_ || now - last_checkpoint_ < interval_) {
    return;
  }
  last_checkpoint_ = now;
  Status s = checkpoint(input.checkpointer);
  if (s.ok()) {
    if (auto line = checkpoint_failures_.succeeded(now)) say("consume", *line);
  } else if (s.code() != StatusCode::kLeaseLost) {
    if (auto line = checkpoint_failures_.failed(s, now)) say("consume", *line, LogLevel::kWarn);
  }
}

void PrintingProcessor::shard_ended(Checkpointer& checkpointer) {
  // SHARD_END only once every record of the shard was printed; a shard cut by --max, or by
  // the output closing, keeps its checkpoint at the last record printed (the next run prints
  // the rest). Cut is this shard's own fact: the output's count may not show yet that another
  // shard's thread took the last records --max allows.
  check(cut_ ? checkpoint(checkpointer) : checkpointer.checkpoint());
}

void PrintingProcessor::shutdown_requested(Checkpointer& checkpointer) {
  check(checkpoint(checkpointer));
}

void PrintingProcessor::hold_while_file_exists() const {
  if (hold_file_.empty()) return;
  std::error_code ec;
  while (std::filesystem::exists(hold_file_, ec) && !stop_requested()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Status PrintingProcessor::checkpoint(Checkpointer& checkpointer) {
  if (!last_printed_ || last_printed_ == checkpointed_) return Status::Ok();
  Status s = checkpointer.checkpoint(last_printed_->sequence_number(),
                                     last_printed_->sub_sequence_number());
  if (s.ok()) checkpointed_ = last_printed_;
  return s;
}

void PrintingProcessor::refuse_rejected(std::span<const Record> records) const {
  if (!reject_) return;
  for (const Record& r : records) {
    if (reject_(r)) {
      throw std::runtime_error("record " + std::string(r.sequence_number()) +
                               " matches --reject-matching");
    }
  }
}

}  // namespace kcl::cli
