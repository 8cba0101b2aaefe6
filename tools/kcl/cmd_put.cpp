// kcl put --stream S [--partition-key K | --key-field F] [--file F] [--aggregate]
//         [--linger-ms N] [--arrival-jitter-ms N] [--failures-out FILE]: each line of stdin (or of
//         --file) becomes one
// record, written through kcl::Producer (PutRecords batches within the service limits,
// optional KPL aggregation, per-shard rate limits, retries of only the failed records). On a
// terminal a progress line shows records/s, records in flight and failures; a summary ends
// the run. Any record that still fails makes the exit status 1 and is listed (line number and
// the service's error; the first 100, then a count); --failures-out writes those input lines
// to FILE as they pile up (10,000 at a time, each lot in line order), so that `kcl put --file
// FILE` resends exactly them. The input is streamed: read a chunk at a time as the producer's
// bounded buffer (2,500 records, 5,000 with --aggregate; 2 MiB) makes room, so memory does not
// grow with the input, nor with its failures.
//
// A stop signal (SIGINT, SIGTERM) ends the reading: the records already read are sent for up
// to --stop-timeout-ms, those left then count as not sent (their lines go to --failures-out),
// the summary is printed, and the exit status is 1 when a record read was not sent or failed,
// else 130 when the input was not read to its end. A second signal exits at once
// (cli_common.h: install_stop_signals).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "base/cache_prefetch.h"
#include "base/text_length.h"
#include "base/thread_name.h"
#include "commands.h"
#include "kcl/producer.h"
#include "line_reader.h"
#include "producer/producer_access.h"
#include "producer/put_planner.h"

namespace kcl::cli {

namespace {

// The producer's buffer for `kcl put` (records and bytes put but not yet answered): what
// bounds its memory, since the input is read only as fast as records are answered. More than
// the calls in flight hold (4 calls of up to 500 records); a small buffer also keeps the
// records in the CPU's caches between the threads that touch them. Plain, a call takes at
// most 500 records whatever the buffer: 2,500 cost about 5% less CPU a record than 5,000 for
// 100 B records, at the same wall time. Aggregated, a call holds what the buffer let in
// while the others were in flight: 2,500 made twice as many calls for the same records and
// cost 40% more CPU than 5,000; 10,000 cost 7% more than 5,000 (and, measured earlier, 8 MB
// more RSS).
constexpr std::size_t kBufferedRecords = 2500;
constexpr std::size_t kBufferedRecordsAggregated = 5000;
constexpr std::size_t kBufferedBytes = std::size_t{2} << 20;

struct PutOptions {
  std::string stream;
  std::string partition_key;
  std::string key_field;
  std::string file;
  std::string failures_out;
  int max_attempts = 8;
  int stop_timeout_ms = 10000;
  int linger_ms = 100;
  int arrival_jitter_ms = 20;
  bool aggregate = false;
  bool quiet = false;
};

Result<std::string> key_for(const PutOptions& o, std::string_view line, std::size_t line_no) {
  if (!o.partition_key.empty()) return o.partition_key;
  if (o.key_field.empty()) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, line_no).ptr;
    return std::string(digits, end);
  }
  auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status(StatusCode::kInvalidArgument, "line " + std::to_string(line_no) +
                                                    " is not a JSON object (--key-field " +
                                                    o.key_field + ")");
  }
  auto it = j.find(o.key_field);
  if (it == j.end() || it->is_null()) {
    return Status(StatusCode::kInvalidArgument,
                  "line " + std::to_string(line_no) + " has no field '" + o.key_field + "'");
  }
  std::string key = it->is_string() ? it->get<std::string>() : it->dump();
  if (const std::size_t chars = base::utf16_length(key); chars == 0 || chars > 256) {
    return Status(StatusCode::kInvalidArgument,
                  "line " + std::to_string(line_no) + ": field '" + o.key_field +
                      "' must give a partition key of 1 to 256 characters");
  }
  return key;
}

// The records that failed, and those not sent (a stop signal came first), by line number,
// with their input line and why. Memory stays bounded whatever the input (an endless input
// against a stream that refuses every record): the lines are kept for --failures-out at most
// kHeldLines at a time, then written out (in line order within each lot), and the reasons
// listed on stderr are the first kListed; the rest are counted.
class Failures {
 public:
  static constexpr std::size_t kHeldLines = 10000;
  static constexpr std::size_t kListed = 100;

  // `path`: --failures-out (empty: the lines are not kept). Before the first add().
  void set_path(std::string path) { path_ = std::move(path); }
  // `not_sent`: the producer cancelled the record at a stop (it was never answered). `keep`:
  // false for a line that was not kept (too long to be a record), left out of --failures-out.
  void add(std::size_t line_no, std::string line, std::string why, bool not_sent = false,
           bool keep = true) {
    std::lock_guard<std::mutex> lock(mu_);
    if (not_sent) {
      ++not_sent_;
    } else {
      ++failed_;
      if (listed_.size() < kListed) listed_.emplace(line_no, std::move(why));
    }
    if (path_.empty() || !keep) return;
    held_.emplace(line_no, std::move(line));
    if (held_.size() >= kHeldLines) write_held_locked();
  }
  // Records that failed (not counting those not sent).
  std::size_t failed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }
  std::size_t not_sent() const {
    std::lock_guard<std::mutex> lock(mu_);
    return not_sent_;
  }
  // Lists the first failed ones on stderr, in line order (those not sent are counted in the
  // summary, not listed), and writes the lines still held to --failures-out.
  Status report() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [no, why] : listed_)
      std::cerr << "kcl put: line " << no << ": " << why << "\n";
    if (failed_ > listed_.size()) {
      std::cerr << "kcl put: ... and " << failed_ - listed_.size() << " more failed lines"
                << (path_.empty() ? "" : " (all in --failures-out " + path_ + ")") << "\n";
    }
    if (path_.empty()) return Status::Ok();
    write_held_locked();
    if (!write_error_.empty()) return Status(StatusCode::kInternal, write_error_);
    return Status::Ok();
  }

 private:
  // Appends the lines held to --failures-out (made empty at the first write) and lets them go.
  void write_held_locked() {
    std::ofstream out(path_, written_any_ ? std::ios::app : std::ios::trunc);
    written_any_ = true;
    for (const auto& [no, line] : held_) out << line << "\n";
    out.flush();
    if (!out && write_error_.empty()) write_error_ = "cannot write --failures-out " + path_;
    held_.clear();
  }

  mutable std::mutex mu_;
  std::string path_;
  std::map<std::size_t, std::string> held_;    // lines not yet written, by line number
  std::map<std::size_t, std::string> listed_;  // the first kListed reasons, by line number
  std::size_t failed_ = 0;
  std::size_t not_sent_ = 0;
  bool written_any_ = false;
  std::string write_error_;
};

// The strings of records written, handed back by the producer's callbacks for the reader to
// fill with the next lines: a line costs no allocation once a buffer's worth went round.
class SpareStrings {
 public:
  // The most bytes of a spare string asked for ahead.
  static constexpr std::size_t kPrefetchBytes = 256;

  // Called by the producer's threads.
  void give(std::string s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (given_.size() < kBufferedRecordsAggregated) given_.push_back(std::move(s));
  }
  // Called by the reader: a string holding `line` (one given back when there is one).
  std::string make(std::string_view line) {
    if (stock_.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      stock_.swap(given_);
    }
    if (stock_.empty()) return std::string(line);
    std::string s = std::move(stock_.back());
    stock_.pop_back();
    // The next spare's bytes were last touched about a buffer's worth of records ago, on a
    // request thread: they are asked for, to be written, while this record is put (writing
    // them cold was about a fifth of this thread's CPU).
    if (!stock_.empty()) {
      const std::string& next = stock_.back();
      base::prefetch_bytes(next.data(), std::min<std::size_t>(next.capacity(), kPrefetchBytes),
                           /*for_write=*/true);
    }
    s.assign(line);
    return s;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> given_;  // guarded by mu_
  std::vector<std::string> stock_;  // the reader's own
};

// What the callbacks of a run update, from the producer's threads.
struct PutProgress {
  Failures failures;
  std::atomic<std::uint64_t> sent{0};
  SpareStrings spares;
};

// The input: --file, or standard input.
Result<int> open_input(const PutOptions& o) {
  if (o.file.empty()) return STDIN_FILENO;
  const int fd = ::open(o.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status(StatusCode::kInvalidArgument,
                  "cannot read --file " + o.file + ": " + std::strerror(errno));
  }
  return fd;
}

// Every line of `in` as one record (a line whose key cannot be made fails at once), until the
// input ends (`ended`) or a stop signal comes; `line_no` is then the last line read. Each callback
// carries two words (no allocation of its own); a record comes back with its outcome: a
// written one's string is filled with a later line, a failed one's is the failures list's
// line, so nothing is copied.
Status put_lines(const PutOptions& o, LineReader& in, Producer& producer, PutProgress& progress,
                 std::size_t& line_no, bool& ended) {
  std::string_view line;
  ended = false;
  // A stop signal ends the input at its next read (LineReader's wait_readable); the lines
  // already read are put, so each is sent, listed or written to --failures-out.
  for (;;) {
    if (!in.next(line)) {
      ended = !in.stopped();
      break;
    }
    ++line_no;
    if (const std::size_t bytes = in.overlong()) {
      progress.failures.add(line_no, std::string(),
                            "line is " + std::to_string(bytes) +
                                " bytes; a record is at most 1 MiB with its partition key" +
                                (o.failures_out.empty() ? "" : " (not written to --failures-out)"),
                            /*not_sent=*/false, /*keep=*/false);
      continue;
    }
    auto key = key_for(o, line, line_no);
    if (!key.ok()) {
      progress.failures.add(line_no, std::string(line), key.status().message());
      continue;
    }
    PutProgress* p = &progress;
    producer.put(std::move(*key), progress.spares.make(line), std::string(),
                 [p, line_no](Result<PutResult> r, UserRecord record) {
                   if (r.ok()) {
                     p->sent.fetch_add(1, std::memory_order_relaxed);
                     p->spares.give(std::move(record.data));
                   } else {
                     p->failures.add(line_no, std::move(record.data), r.status().message(),
                                     r.status().code() == StatusCode::kCancelled);
                   }
                 });
  }
  if (!in.error().empty()) {
    return Status(StatusCode::kInternal,
                  (o.file.empty() ? std::string("standard input") : "--file " + o.file) + ": " +
                      in.error() + " after line " + std::to_string(line_no));
  }
  return Status::Ok();
}

// On a terminal: a progress line a second until `reading` turns false.
std::thread start_progress_line(const Producer& producer, const PutProgress& progress,
                                const std::atomic<bool>& reading) {
  return base::named_thread("kcl-progress", [&] {
    auto last = std::chrono::steady_clock::now();
    std::uint64_t last_sent = 0;
    while (reading.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      auto now = std::chrono::steady_clock::now();
      if (now - last < std::chrono::seconds(1)) continue;
      const auto s = producer.stats();
      const std::uint64_t done = progress.sent.load();
      const double secs = std::chrono::duration<double>(now - last).count();
      std::cerr << "\rkcl put: " << static_cast<std::uint64_t>((done - last_sent) / secs)
                << " records/s, " << s.buffered_records << " in flight, "
                << progress.failures.failed() << " failed   " << std::flush;
      last = now;
      last_sent = done;
    }
  });
}

// How a run ended.
struct PutEnd {
  std::size_t lines_read = 0;
  bool input_ended = false;    // read to its end (else a stop signal ended the reading)
  bool stopped = false;        // a stop signal came
  bool closed_in_time = true;  // the producer stopped within the stop deadline
  std::size_t unanswered = 0;  // records still in unanswered calls at that deadline
  Status flushed;              // the last flush, when no signal came
  Status closed;               // the producer's shutdown(), when it ended in time
};

// Past --stop-timeout-ms, how long a call that is being answered may still take.
constexpr std::chrono::milliseconds kStopGrace{1000};

// Puts every line of `in` and waits until each is answered, or, once a stop signal comes,
// stops reading and gives the records read until --stop-timeout-ms (and kStopGrace) to be
// sent. `read`: how the reading ended (an error of the input).
PutEnd put_until_end_or_stop(const PutOptions& o, LineReader& in, Producer& producer,
                             PutProgress& progress, Status& read) {
  // The first signal begins the producer's shutdown at once: put() waiting for room gives up,
  // what is buffered is sent for at most close_timeout and the rest is cancelled (each
  // record's callback says so).
  std::atomic<bool> finishing{false};
  std::thread stopper = base::named_thread("kcl-put-stop", [&] {
    while (!finishing.load()) {
      if (wait_for_stop(std::chrono::seconds(1))) {
        (void)producer.begin_shutdown();
        return;
      }
    }
  });
  PutEnd end;
  read = put_lines(o, in, producer, progress, end.lines_read, end.input_ended);
  // Everything read is sent; a flush in slices, so that a signal meanwhile ends the wait.
  do {
    end.flushed = producer.flush(std::chrono::milliseconds(250));
  } while (end.flushed.code() == StatusCode::kDeadlineExceeded && !stop_requested());
  finishing = true;
  wake_stop_waiter();
  stopper.join();
  end.stopped = stop_requested();
  if (!end.stopped) {
    end.closed = producer.shutdown();
    return end;
  }
  // A call that never answers holds the producer's shutdown (its threads wait for it): the
  // wait ends at the deadline, and what is unresolved then is counted as not answered.
  std::shared_future<Status> closing = producer.begin_shutdown();
  end.closed_in_time = closing.wait_for(std::chrono::milliseconds(o.stop_timeout_ms) +
                                        kStopGrace) == std::future_status::ready;
  if (end.closed_in_time) {
    end.closed = closing.get();
  } else {
    end.unanswered = producer.stats().buffered_records;
  }
  return end;
}

// The failures listed, --failures-out written and the summary printed; the exit status.
int summarize(const PutOptions& o, const PutEnd& end, PutProgress& progress,
              const ProducerStats& stats, const char* wire, const Status& read) {
  if (end.stopped) {
    std::cerr << "kcl put: stopped by a signal after "
              << (end.input_ended ? "the input's last line (" : "line ") << end.lines_read
              << (end.input_ended ? ")" : " of the input") << "; the records read had up to "
              << o.stop_timeout_ms << " ms to be sent\n";
  } else if (!end.flushed.ok()) {
    std::cerr << "kcl put: " << end.flushed.message() << "\n";
  }
  Failures& failures = progress.failures;
  const Status written = failures.report();
  const std::size_t failed = failures.failed();
  const std::size_t cancelled = failures.not_sent();
  const std::size_t not_sent = cancelled + end.unanswered;
  if (!o.quiet || failed > 0 || not_sent > 0 || end.stopped) {
    std::cerr << "kcl put: " << progress.sent.load() << " records sent, " << failed << " failed";
    if (end.stopped || not_sent > 0) std::cerr << ", " << not_sent << " not sent";
    std::cerr << " (" << stats.put_records_calls << " PutRecords calls in " << wire << ", "
              << stats.kinesis_records_sent << " Kinesis records, " << stats.records_retried
              << " retries, " << stats.throttled << " throttled)\n";
  }
  if (cancelled > 0) {
    std::cerr << "kcl put: " << cancelled << " records read were not sent"
              << (end.stopped ? " before the stop" : "")
              << (o.failures_out.empty() ? " (--failures-out FILE keeps their lines, to resend)"
                                         : "; their lines are in --failures-out " + o.failures_out)
              << "\n";
  } else if (!end.closed.ok()) {
    std::cerr << "kcl put: " << end.closed.message() << "\n";
  }
  if (end.unanswered > 0) {
    std::cerr << "kcl put: " << end.unanswered
              << " records were still in PutRecords calls not answered (or queued behind them) "
                 "at the deadline: those in a call may have been written; their lines are not "
                 "in --failures-out\n";
  }
  if (!read.ok()) return report_error("put", read);
  if (!written.ok()) return report_error("put", written);
  if (failed > 0 || not_sent > 0) return 1;
  return end.input_ended ? 0 : 130;  // 130: stopped before the end of the input
}

// --failures-out may not be the input itself (--file, or a file on standard input): it is
// emptied and written while the input is still read, which would cut the input short or read
// back the failed lines as new ones.
Status check_failures_out(const PutOptions& o, int input) {
  if (o.failures_out.empty()) return Status::Ok();
  struct stat in {};
  struct stat out {};
  if (::fstat(input, &in) != 0 || ::stat(o.failures_out.c_str(), &out) != 0) return Status::Ok();
  if (in.st_dev != out.st_dev || in.st_ino != out.st_ino) return Status::Ok();
  return Status(StatusCode::kInvalidArgument,
                "--failures-out " + o.failures_out +
                    " is the input being read; name another file (it is emptied and written "
                    "while the input is read)");
}

int run_put(const GlobalOptions& g, const PutOptions& o) {
  auto client = make_kinesis_for_data(g);
  if (!client.ok()) return report_error("put", client.status());
  auto fd = open_input(o);
  if (!fd.ok()) return report_error("put", fd.status());
  if (Status same = check_failures_out(o, *fd); !same.ok()) return report_error("put", same);
  install_stop_signals();
  // A line longer than a record can hold is let go as it is read (memory stays bounded).
  LineReader in(
      *fd, 64 * 1024, [](int input) { return wait_readable_or_stop(input); },
      producer::kMaxRecordBytes);
  ProducerConfig config;
  config.stream_name = o.stream;
  config.aggregate = o.aggregate;
  config.linger = std::chrono::milliseconds(o.linger_ms);
  config.arrival_jitter = std::chrono::milliseconds(o.arrival_jitter_ms);
  config.max_attempts = o.max_attempts;
  // After a stop signal: how long the records read may take to be sent (shutdown()).
  config.close_timeout = std::chrono::milliseconds(o.stop_timeout_ms);
  config.report_positions = false;  // nothing prints where a record went
  // Streaming: the input is read as fast as the producer takes it, so the buffer bounds the
  // memory whatever the size of the input.
  config.max_buffered_records = o.aggregate ? kBufferedRecordsAggregated : kBufferedRecords;
  config.max_buffered_bytes = kBufferedBytes;
  const char* const wire = (*client)->wire() == kinesis::Wire::kCbor ? "CBOR" : "JSON";
  auto made = producer::ProducerAccess::make(
      config, std::shared_ptr<kinesis::KinesisClient>(std::move(*client)));
  if (!made.ok()) return report_error("put", made.status());
  std::unique_ptr<Producer> producer = std::move(made).value();
  PutProgress progress;
  progress.failures.set_path(o.failures_out);
  const bool tty = ::isatty(STDERR_FILENO) != 0 && !o.quiet;
  std::atomic<bool> reading{true};
  std::thread progress_line;
  if (tty) progress_line = start_progress_line(*producer, progress, reading);
  Status read;
  const PutEnd end = put_until_end_or_stop(o, in, *producer, progress, read);
  if (*fd != STDIN_FILENO) ::close(*fd);
  reading = false;
  if (progress_line.joinable()) {
    progress_line.join();
    std::cerr << "\n";
  }
  const int exit_code = summarize(o, end, progress, producer->stats(), wire, read);
  if (!end.closed_in_time) {
    // The producer's threads wait for calls not answered by the deadline; its destructor
    // would wait for them too. Everything is said and written: leave now.
    std::cerr.flush();
    std::_Exit(exit_code);
  }
  return exit_code;
}

}  // namespace

void add_put_command(CLI::App& parent, const GlobalOptions& global, int& exit_code) {
  auto opts = std::make_shared<PutOptions>();
  auto* cmd = parent.add_subcommand(
      "put",
      "Write each line of standard input (or --file) as one record through the producer "
      "(PutRecords batches, optional KPL aggregation, per-shard rate limits). The input is "
      "streamed (memory does not grow with it). Failed records are retried; any that still "
      "fail are listed and the exit status is 1.");
  cmd->add_option("--stream", opts->stream, "Stream name")->required();
  auto* pk = cmd->add_option("--partition-key", opts->partition_key,
                             "One partition key for every record (default: the line number)");
  cmd->add_option("--key-field", opts->key_field,
                  "Take the partition key from this field of each line, read as a JSON object")
      ->excludes(pk);
  cmd->add_option("--file", opts->file, "Read the records from this file instead of stdin");
  cmd->add_flag("--aggregate", opts->aggregate,
                "Pack records into KPL aggregates (kcl-cpp's and the Java KCL's consumers "
                "deaggregate them)");
  cmd->add_option("--linger-ms", opts->linger_ms,
                  "How long a record may wait for others to fill a call (default 100)")
      ->check(CLI::Range(0, 60000));
  cmd->add_option("--arrival-jitter-ms", opts->arrival_jitter_ms,
                  "How much later than the one before it a call may reach the service: a "
                  "shard's records count against its limits until a second after that "
                  "(default 20; larger throttles less where arrivals vary more, and writes "
                  "a little slower)")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--failures-out", opts->failures_out,
                  "Write the input lines of the records that failed, or were read but not "
                  "sent before a stop signal, to this file (kcl put --file FILE resends them)");
  cmd->add_option("--max-attempts", opts->max_attempts,
                  "Attempts per record before it counts as failed (default 8)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--stop-timeout-ms", opts->stop_timeout_ms,
                  "After a stop signal (SIGINT, SIGTERM), which ends the reading: how long the "
                  "records already read may take to be sent; those left then count as not sent "
                  "(default 10000). The summary follows; the exit status is 1 when a record read "
                  "was not sent or failed, else 130. A second signal exits at once")
      ->check(CLI::Range(0, 3600000));
  cmd->add_flag("--quiet", opts->quiet, "Print the summary only when something failed");
  cmd->callback([&global, &exit_code, opts] { exit_code = run_put(global, *opts); });
}

}  // namespace kcl::cli
