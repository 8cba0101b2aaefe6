// kcl_check_worker: a kcl::Worker whose processor writes down everything it sees, for the
// scenario runner (tools/scenario/run.js) and its checker.
//
// Every record delivered becomes one JSON line in the log file (--log):
//   {"shard":S,"seq":Q,"sub":U,"key":K,"n":N,"worker":W,"inst":I,"t":T}
// where n is the producer's per-key counter taken from the record data {"key":..,"n":..}
// (-1 when the data has no counter), inst numbers the processor instances of this process
// (one per lease held, in creation order) and t is the wall time in microseconds since the
// epoch. Events are lines with an "event" field:
//   start     {"event":"start","worker","pid","t"}
//   init      {"event":"init","shard","start":<checkpoint resumed from>,"inst","worker","t"}
//   checkpoint{"event":"checkpoint","shard","seq","sub","stored","ok","wrote","code","t0",
//              "inst","worker","t"}  (seq/sub = the target, "SHARD_END" in shard_ended;
//              stored = the checkpoint the processor knows afterwards; wrote = ok and the
//              stored checkpoint moved; t0 = before the call, t = after it)
//   lease_lost / shard_ended / shutdown_requested {"event",..,"shard","inst","worker","t"}
//   stop      {"event":"stop","worker","ok","status","t"}
// Lines are written with one write(2) per batch before any checkpoint that covers them, so a
// SIGKILL never leaves a checkpoint ahead of the log (the kernel keeps what was written).
//
// Checkpoints: after every K records (--checkpoint-every, at the K-th record), at batch end
// with --checkpoint-batch-end, SHARD_END in shard_ended, the last record in
// shutdown_requested.
//
// SIGTERM / SIGINT: graceful shutdown (worker.shutdown()), exit 0 when it went well.
// Exit 2 when the worker cannot start (bad flags, wrong credentials, wrong lease table
// schema), 1 when it stops on its own with an error.
//
// Endpoints and credentials come from the environment (AWS_ENDPOINT_URL_KINESIS,
// AWS_ENDPOINT_URL_DYNAMODB, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "kcl/worker.h"

namespace {

struct Flags {
  std::string stream;
  std::string app;
  std::string worker_id;
  std::string log_path;
  long long checkpoint_every = 25;
  bool checkpoint_batch_end = false;
  long long failover_ms = 3000;
  long long take_interval_ms = 0;  // 0 = library default (2 x failover)
  long long request_timeout_ms = 2000;
  long long get_records_timeout_ms = 0;  // 0 = request timeout
  long long shard_sync_ms = 5000;
  long long idle_ms = 250;
  int max_records_per_call = 1000;
  int threads = 4;
  int max_attempts = 0;  // 0 = library default
  std::string http;      // the worker's status endpoint ([HOST:]PORT); empty = off
};

long long now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void json_escape(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

// The log file: appends whole buffers with write(2) under a mutex.
class Log {
 public:
  bool open(const std::string& path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    return fd_ >= 0;
  }
  ~Log() {
    if (fd_ >= 0) ::close(fd_);
  }
  void write(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    const char* p = text.data();
    std::size_t left = text.size();
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error(std::string("cannot write the log: ") + std::strerror(errno));
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }

 private:
  std::mutex mu_;
  int fd_ = -1;
};

// The producer's counter from data {"key":"k1","n":123}; -1 when absent.
long long counter_of(std::string_view data) {
  auto pos = data.find("\"n\":");
  if (pos == std::string_view::npos) return -1;
  pos += 4;
  while (pos < data.size() && data[pos] == ' ') ++pos;
  long long n = 0;
  bool any = false;
  while (pos < data.size() && data[pos] >= '0' && data[pos] <= '9') {
    n = n * 10 + (data[pos] - '0');
    ++pos;
    any = true;
  }
  return any ? n : -1;
}

class CheckingProcessor final : public kcl::RecordProcessor {
 public:
  CheckingProcessor(Log& log, const Flags& flags, long long inst)
      : log_(log), flags_(flags), inst_(inst) {}

  void initialize(const kcl::InitializationInput& input) override {
    shard_ = input.shard_id;
    std::string line = head("init");
    line += ",\"start\":";
    json_escape(line, input.starting_position.sequence_number());
    line += ",\"startSub\":" + std::to_string(input.starting_position.sub_sequence_number());
    line += tail();
    log_.write(line);
  }

  void process_records(const kcl::ProcessRecordsInput& input) override {
    if (lost_) {
      // A checkpoint said the lease is gone: process nothing more, but say what was handed
      // on (the checker counts a zombie's batches).
      log_.write(head("after_lost") + ",\"records\":" + std::to_string(input.records.size()) +
                 tail());
      return;
    }
    std::string buf;
    buf.reserve(input.records.size() * 140);
    const long long t = now_us();
    for (const auto& r : input.records) {
      buf += "{\"shard\":";
      json_escape(buf, r.shard_id());
      buf += ",\"seq\":\"";
      buf += r.sequence_number();
      buf += "\",\"sub\":" + std::to_string(r.sub_sequence_number()) + ",\"key\":";
      json_escape(buf, r.partition_key());
      buf += ",\"n\":" + std::to_string(counter_of(r.data())) + ",\"worker\":";
      json_escape(buf, flags_.worker_id);
      buf += ",\"inst\":" + std::to_string(inst_) + ",\"t\":" + std::to_string(t) + "}\n";
      ++since_checkpoint_;
      last_seq_ = r.sequence_number();
      last_sub_ = r.sub_sequence_number();
      if (flags_.checkpoint_every > 0 && since_checkpoint_ >= flags_.checkpoint_every) {
        // The lines covered by the checkpoint reach the file first.
        log_.write(buf);
        buf.clear();
        since_checkpoint_ = 0;
        checkpoint_at(input.checkpointer, std::string(r.sequence_number()),
                      r.sub_sequence_number());
        if (lost_) break;  // the lease is gone: the rest would only be replayed by its owner
      }
    }
    if (!buf.empty()) log_.write(buf);
    if (flags_.checkpoint_batch_end && !lost_ && since_checkpoint_ > 0 && !input.records.empty()) {
      const auto& last = input.records.back();
      since_checkpoint_ = 0;
      checkpoint_at(input.checkpointer, std::string(last.sequence_number()),
                    last.sub_sequence_number());
    }
  }

  void lease_lost() override { log_.write(head("lease_lost") + tail()); }

  void shard_ended(kcl::Checkpointer& checkpointer) override {
    log_.write(head("shard_ended") + tail());
    kcl::Status s =
        logged_checkpoint(checkpointer, "SHARD_END", 0, [&] { return checkpointer.checkpoint(); });
    if (!s.ok() && s.code() != kcl::StatusCode::kLeaseLost) {
      throw std::runtime_error("SHARD_END checkpoint failed: " + s.to_string());
    }
  }

  void shutdown_requested(kcl::Checkpointer& checkpointer) override {
    log_.write(head("shutdown_requested") + tail());
    // A final checkpoint at the last record delivered; a transient failure is retried a few
    // times (the next owner would otherwise replay what was processed since the last one).
    for (int attempt = 0; attempt < 5; ++attempt) {
      // The target: the last record delivered, or (none delivered) the current checkpoint.
      const std::string target =
          last_seq_.empty() ? checkpointer.last_checkpoint().sequence_number() : last_seq_;
      kcl::Status s = logged_checkpoint(checkpointer, target, last_sub_,
                                        [&] { return checkpointer.checkpoint(); });
      if (s.ok() || s.code() != kcl::StatusCode::kUnavailable) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

 private:
  std::string head(const char* event) const {
    std::string line = "{\"event\":\"";
    line += event;
    line += "\",\"shard\":";
    json_escape(line, shard_);
    return line;
  }
  std::string tail() const {
    std::string line = ",\"inst\":" + std::to_string(inst_) + ",\"worker\":";
    json_escape(line, flags_.worker_id);
    line += ",\"t\":" + std::to_string(now_us()) + "}\n";
    return line;
  }

  void checkpoint_at(kcl::Checkpointer& cp, const std::string& seq, std::uint64_t sub) {
    kcl::Status s = logged_checkpoint(cp, seq, sub, [&] { return cp.checkpoint(seq, sub); });
    if (s.code() == kcl::StatusCode::kLeaseLost) lost_ = true;
  }

  // Runs `call` (a checkpoint), then logs the target, the outcome and whether the stored
  // checkpoint moved ("wrote": a write was accepted; a checkpoint at the current position
  // is OK without a write).
  template <typename F>
  kcl::Status logged_checkpoint(kcl::Checkpointer& cp, const std::string& target, std::uint64_t sub,
                                F&& call) {
    const kcl::ExtendedSequenceNumber before = cp.last_checkpoint();
    const long long t0 = now_us();
    kcl::Status s = call();
    const long long t1 = now_us();
    const kcl::ExtendedSequenceNumber after = cp.last_checkpoint();
    const bool wrote = s.ok() && !(before.sequence_number() == after.sequence_number() &&
                                   before.sub_sequence_number() == after.sub_sequence_number());
    std::string line = head("checkpoint");
    line += ",\"seq\":";
    json_escape(line, target);
    line += ",\"sub\":" + std::to_string(sub) + ",\"stored\":";
    json_escape(line, after.sequence_number());
    line += std::string(",\"ok\":") + (s.ok() ? "true" : "false") +
            ",\"wrote\":" + (wrote ? "true" : "false") + ",\"code\":";
    json_escape(line, kcl::to_string(s.code()));
    if (!s.ok()) {
      line += ",\"error\":";
      json_escape(line, s.to_string());
    }
    line += ",\"t0\":" + std::to_string(t0) + ",\"inst\":" + std::to_string(inst_) + ",\"worker\":";
    json_escape(line, flags_.worker_id);
    line += ",\"t\":" + std::to_string(t1) + "}\n";
    log_.write(line);
    return s;
  }

  Log& log_;
  const Flags& flags_;
  const long long inst_;
  std::string shard_;
  std::string last_seq_;  // the last record delivered
  std::uint64_t last_sub_ = 0;
  long long since_checkpoint_ = 0;
  bool lost_ = false;
};

class CheckingFactory final : public kcl::RecordProcessorFactory {
 public:
  CheckingFactory(Log& log, const Flags& flags) : log_(log), flags_(flags) {}
  std::unique_ptr<kcl::RecordProcessor> create(std::string_view) override {
    return std::make_unique<CheckingProcessor>(log_, flags_, ++next_inst_);
  }

 private:
  Log& log_;
  const Flags& flags_;
  std::atomic<long long> next_inst_{0};
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "kcl_check_worker: " << problem << "\n"
            << "usage: kcl_check_worker --stream S --app A --worker-id W --log FILE\n"
               "  [--checkpoint-every K] [--checkpoint-batch-end] [--failover-ms MS]\n"
               "  [--take-interval-ms MS] [--request-timeout-ms MS] [--get-records-timeout-ms MS]\n"
               "  [--shard-sync-ms MS] [--idle-ms MS] [--max-records N] [--threads N]\n"
               "  [--max-attempts N] [--http [HOST:]PORT]\n";
  std::exit(2);
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value after " + a);
      return argv[++i];
    };
    auto number = [&]() -> long long {
      std::string v = value();
      char* end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 0) usage("bad number after " + a + ": " + v);
      return n;
    };
    if (a == "--stream")
      f.stream = value();
    else if (a == "--app")
      f.app = value();
    else if (a == "--worker-id")
      f.worker_id = value();
    else if (a == "--log")
      f.log_path = value();
    else if (a == "--checkpoint-every")
      f.checkpoint_every = number();
    else if (a == "--checkpoint-batch-end")
      f.checkpoint_batch_end = true;
    else if (a == "--failover-ms")
      f.failover_ms = number();
    else if (a == "--take-interval-ms")
      f.take_interval_ms = number();
    else if (a == "--request-timeout-ms")
      f.request_timeout_ms = number();
    else if (a == "--get-records-timeout-ms")
      f.get_records_timeout_ms = number();
    else if (a == "--shard-sync-ms")
      f.shard_sync_ms = number();
    else if (a == "--idle-ms")
      f.idle_ms = number();
    else if (a == "--max-records")
      f.max_records_per_call = static_cast<int>(number());
    else if (a == "--threads")
      f.threads = static_cast<int>(number());
    else if (a == "--http")
      f.http = value();
    else if (a == "--max-attempts")
      f.max_attempts = static_cast<int>(number());
    else
      usage("unknown argument: " + a);
  }
  if (f.stream.empty() || f.app.empty() || f.worker_id.empty() || f.log_path.empty()) {
    usage("--stream, --app, --worker-id and --log are required");
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  // Die with the scenario runner: no orphan worker survives a runner that was killed.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  Flags flags = parse(argc, argv);
  Log log;
  if (!log.open(flags.log_path)) {
    std::cerr << "kcl_check_worker: cannot open " << flags.log_path << ": " << std::strerror(errno)
              << "\n";
    return 2;
  }
  // Block the stop signals before any thread exists, so every thread inherits the mask and
  // only the main thread receives them (sigtimedwait below).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  kcl::WorkerConfig config;
  config.stream_name = flags.stream;
  config.leases.application_name = flags.app;
  config.leases.worker_id = flags.worker_id;
  config.leases.failover_time = std::chrono::milliseconds(flags.failover_ms);
  if (flags.take_interval_ms > 0) {
    config.leases.take_interval = std::chrono::milliseconds(flags.take_interval_ms);
  }
  config.initial_position = kcl::InitialPosition::trim_horizon();
  config.processing.thread_pool_size = flags.threads;
  config.processing.shard_sync_interval = std::chrono::milliseconds(flags.shard_sync_ms);
  config.processing.parent_check_interval = std::chrono::milliseconds(500);
  config.processing.shutdown_timeout = std::chrono::milliseconds(20000);
  config.aws.http.request_timeout = std::chrono::milliseconds(flags.request_timeout_ms);
  config.aws.http.connect_timeout =
      std::chrono::milliseconds(std::min(flags.request_timeout_ms, 2000LL));
  if (flags.max_attempts > 0) config.aws.retry.max_attempts = flags.max_attempts;
  config.http_address = flags.http;
  config.aws.retry.call_deadline =
      std::chrono::milliseconds(std::max(10000LL, flags.request_timeout_ms * 4));
  const long long grt =
      flags.get_records_timeout_ms > 0 ? flags.get_records_timeout_ms : flags.request_timeout_ms;
  config.retrieval.get_records_timeout = std::chrono::milliseconds(grt);
  config.retrieval.iterator_request_timeout = std::chrono::milliseconds(flags.request_timeout_ms);
  config.retrieval.idle_time_between_calls = std::chrono::milliseconds(flags.idle_ms);
  config.retrieval.max_records_per_call = flags.max_records_per_call;
  config.retrieval.throttle_backoff_max = std::chrono::milliseconds(2000);

  {
    std::string line = "{\"event\":\"start\",\"worker\":";
    json_escape(line, flags.worker_id);
    line += ",\"pid\":" + std::to_string(getpid()) + ",\"t\":" + std::to_string(now_us()) + "}\n";
    log.write(line);
  }
  auto write_stop = [&](const kcl::Status& s) {
    std::string line = "{\"event\":\"stop\",\"worker\":";
    json_escape(line, flags.worker_id);
    line += std::string(",\"ok\":") + (s.ok() ? "true" : "false") + ",\"status\":";
    json_escape(line, s.to_string());
    line += ",\"t\":" + std::to_string(now_us()) + "}\n";
    log.write(line);
  };

  kcl::Worker worker(config, std::make_shared<CheckingFactory>(log, flags));
  kcl::Status started = worker.start();
  if (!started.ok()) {
    std::cerr << "kcl_check_worker " << flags.worker_id << ": cannot start: " << started.to_string()
              << "\n";
    write_stop(started);
    return 2;
  }
  std::cerr << "kcl_check_worker " << flags.worker_id << ": running (pid " << getpid() << ")\n";
  for (;;) {
    if (auto stopped = worker.wait_for(std::chrono::milliseconds(0))) {
      std::cerr << "kcl_check_worker " << flags.worker_id
                << ": stopped on its own: " << stopped->to_string() << "\n";
      write_stop(*stopped);
      return stopped->ok() ? 0 : 1;
    }
    timespec ts{0, 100 * 1000 * 1000};
    int sig = sigtimedwait(&stop_signals, nullptr, &ts);
    if (sig == SIGTERM || sig == SIGINT) break;
  }
  std::cerr << "kcl_check_worker " << flags.worker_id << ": stopping gracefully\n";
  kcl::Status stopped = worker.shutdown();
  write_stop(stopped);
  std::cerr << "kcl_check_worker " << flags.worker_id << ": stopped: " << stopped.to_string()
            << " after " << worker.stats().records_delivered << " records\n";
  return stopped.ok() ? 0 : 1;
}
