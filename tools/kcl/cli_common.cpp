#include "cli_common.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <thread>

#include "aws/base64.h"
#include "base/status_macros.h"
#include "kinesis/stream_consumers.h"
#include "record_lines.h"
#include "retrieval/fanout_source.h"

namespace kcl::cli {

void add_read_rate_option(CLI::App& cmd, long long& rate) {
  cmd.add_option("--read-rate", rate,
                 "Polling: bytes a second each shard's GetRecords may read (data and partition "
                 "keys). Each answer is paid for at this rate before the next call, so a shard "
                 "far behind is read at it without being throttled (default 2097152, AWS's "
                 "2 MiB/s a shard; lower it when other applications read the same stream; "
                 "0 = no pacing by bytes, or 1024 and up)")
      ->check(CLI::Range(0LL, 1LL << 40));
}

void GlobalOptions::add_to(CLI::App& app) {
  app.add_option("--region", region,
                 "AWS region (default: AWS_REGION, AWS_DEFAULT_REGION, then the profile)");
  app.add_option("--endpoint-url", endpoint_url,
                 "Endpoint for every service that has none of its own, e.g. "
                 "http://127.0.0.1:4567; a service's own variable wins over it, as in the AWS "
                 "SDKs (AWS_ENDPOINT_URL_KINESIS, AWS_ENDPOINT_URL_DYNAMODB, "
                 "AWS_ENDPOINT_URL_CLOUDWATCH; default: AWS_ENDPOINT_URL)");
  app.add_option("--profile", profile,
                 "Profile of ~/.aws/config and ~/.aws/credentials; its credentials are used "
                 "ahead of keys in the environment, as the AWS CLI does "
                 "(default: AWS_PROFILE, then 'default')");
  app.add_option("--ca-bundle", ca_bundle, "CA bundle file for TLS verification");
  app.add_flag("--no-verify-tls", no_verify_tls,
               "Do not verify TLS certificates (local testing only)");
  app.add_option("--wire", wire,
                 "Encoding of the Kinesis data calls (GetRecords, PutRecord(s), "
                 "SubscribeToShard): cbor (record data as raw bytes, as the AWS SDK for Java "
                 "sends), json (base64 data), or auto: CBOR on AWS endpoints; elsewhere one "
                 "CBOR probe at start (a GetShardIterator for a stream that does not exist) "
                 "picks CBOR only when the server reads CBOR as AWS does (kinesis-local), "
                 "JSON otherwise (kinesalite, no answer) (default auto)")
      ->check(CLI::IsMember({"auto", "cbor", "json"}));
}

AwsConfig GlobalOptions::aws_config() const {
  AwsConfig c;
  c.region = region;
  c.endpoint_url = endpoint_url;
  c.profile = profile;
  c.http.ca_bundle = ca_bundle;
  c.http.verify_tls = !no_verify_tls;
  kinesis::parse_kinesis_wire(wire, c.kinesis_wire);  // --wire is checked by CLI11
  return c;
}

void GlobalOptions::override_given(AwsConfig& c) const {
  if (!region.empty()) c.region = region;
  if (!endpoint_url.empty()) c.endpoint_url = endpoint_url;
  if (!profile.empty()) c.profile = profile;
  if (!ca_bundle.empty()) c.http.ca_bundle = ca_bundle;
  if (no_verify_tls) c.http.verify_tls = false;
  if (wire != "auto") kinesis::parse_kinesis_wire(wire, c.kinesis_wire);
}

namespace {
Status check_config(const AwsConfig& c) {
  auto problems = c.validate();
  if (problems.empty()) return Status::Ok();
  std::string msg = "invalid configuration:";
  for (const auto& p : problems) msg += " " + p + ";";
  return Status(StatusCode::kInvalidArgument, msg);
}
}  // namespace

Result<std::unique_ptr<kinesis::KinesisClient>> make_kinesis(const GlobalOptions& g) {
  AwsConfig c = g.aws_config();
  KCL_RETURN_IF_ERROR(check_config(c));
  KCL_ASSIGN_OR_RETURN(auto raw, aws::make_aws_json_client(aws::kinesis_service(), c));
  return std::make_unique<kinesis::KinesisClient>(
      std::shared_ptr<aws::AwsJsonClient>(std::move(raw)));
}

Result<std::unique_ptr<kinesis::KinesisClient>> make_kinesis_for_data(const GlobalOptions& g) {
  KCL_ASSIGN_OR_RETURN(auto client, make_kinesis(g));
  // The choice is the one --help describes (no log line: the commands' stderr is theirs).
  std::string why;
  client->set_wire(kinesis::decide_wire(*client, g.aws_config().kinesis_wire, why));
  return client;
}

Result<std::unique_ptr<dynamodb::DynamoDbClient>> make_dynamodb(const GlobalOptions& g) {
  AwsConfig c = g.aws_config();
  KCL_RETURN_IF_ERROR(check_config(c));
  KCL_ASSIGN_OR_RETURN(auto raw, aws::make_aws_json_client(aws::dynamodb_service(), c));
  return std::make_unique<dynamodb::DynamoDbClient>(
      std::shared_ptr<aws::AwsJsonClient>(std::move(raw)));
}

Result<retrieval::RecordsSourceFactory> make_fanout_factory(
    std::shared_ptr<kinesis::KinesisClient> client, const std::string& stream,
    const std::string& consumer_name, const RetrievalConfig& retrieval, const HttpConfig& http) {
  KCL_ASSIGN_OR_RETURN(std::string arn, kinesis::stream_arn(*client, stream));
  KCL_ASSIGN_OR_RETURN(
      kinesis::StreamConsumer consumer,
      kinesis::ensure_stream_consumer(*client, arn, consumer_name, SystemClock::instance(),
                                      std::chrono::minutes(2)));
  retrieval::FanOutContext ctx;
  ctx.kinesis = std::move(client);
  ctx.transport = std::make_shared<aws::StreamingTransport>(http);
  ctx.consumer_arn = consumer.consumer_arn;
  return retrieval::RecordsSourceFactory([ctx, retrieval](const std::string&,
                                                          const std::string& shard_id,
                                                          const StartPosition& start) {
    return std::make_shared<retrieval::FanOutSource>(ctx, shard_id, start, retrieval,
                                                     SystemClock::instance());
  });
}

Result<std::chrono::system_clock::time_point> parse_iso8601(std::string_view text) {
  auto bad = [&] {
    return Status(StatusCode::kInvalidArgument, "not an ISO 8601 time: '" + std::string(text) +
                                                    "' (expected e.g. 2026-11-22T10:00:00Z)");
  };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  std::string t(text);
  int consumed = 0;
  if (std::sscanf(t.c_str(), "%4d-%2d-%2d%*1[T ]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s,
                  &consumed) != 6) {
    return bad();
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return bad();
  std::size_t pos = static_cast<std::size_t>(consumed);
  long long nanos = 0;
  if (pos < t.size() && t[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < t.size() && std::isdigit(static_cast<unsigned char>(t[pos]))) {
      if (digits < 9) nanos = nanos * 10 + (t[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return bad();
    for (int i = digits; i < 9; ++i) nanos *= 10;
  }
  long offset_seconds = 0;
  if (pos < t.size()) {
    if (t[pos] == 'Z' || t[pos] == 'z') {
      ++pos;
    } else if (t[pos] == '+' || t[pos] == '-') {
      int oh = 0, om = 0;
      int n = 0;
      if (std::sscanf(t.c_str() + pos + 1, "%2d:%2d%n", &oh, &om, &n) != 2) return bad();
      offset_seconds = (oh * 3600L + om * 60L) * (t[pos] == '+' ? 1 : -1);
      pos += 1 + static_cast<std::size_t>(n);
    }
  }
  if (pos != t.size()) return bad();
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  std::time_t epoch = timegm(&tm);
  return std::chrono::system_clock::time_point(std::chrono::seconds(epoch - offset_seconds)) +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::nanoseconds(nanos));
}

std::string format_iso8601(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  int frac = static_cast<int>(ms % 1000);
  if (frac < 0) {
    frac += 1000;
    --secs;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
  return buf;
}

Result<StartPosition> parse_start_position(std::string_view text) {
  StartPosition p;
  if (text == "trim-horizon" || text == "TRIM_HORIZON") {
    p = StartPosition::trim_horizon();
  } else if (text == "latest" || text == "LATEST") {
    p = StartPosition::latest();
  } else {
    auto ts = parse_iso8601(text);
    if (!ts.ok()) {
      return Status(StatusCode::kInvalidArgument,
                    "--from must be trim-horizon, latest or an ISO 8601 time; got '" +
                        std::string(text) + "'");
    }
    p.kind = StartPosition::Kind::kAtTimestamp;
    p.timestamp = *ts;
  }
  return p;
}

void write_record(std::ostream& out, const Record& r, bool raw) {
  thread_local RecordLines lines;
  thread_local LineBuffer line;
  line.clear();
  lines.append(line, r, raw);
  out.write(line.data(), static_cast<std::streamsize>(line.size()));
}

namespace {
std::atomic<int> g_signals{0};
// A second stop signal exits at once unless it came within this of the first (100 ms).
constexpr long long kSameStopWindowNs = 100'000'000;

// The self-pipe: the handler writes a byte to [1]; wait_for_worker_or_stop polls [0].
int g_wake_pipe[2] = {-1, -1};

void write_wake_byte() {
  if (g_wake_pipe[1] < 0) return;
  const char byte = 1;
  // A full pipe already holds a wake-up; nothing else can go wrong that a waiter would miss
  // (it looks at the flags once a second anyway).
  ssize_t n = write(g_wake_pipe[1], &byte, 1);
  (void)n;
}

std::atomic<int> g_reloads{0};

extern "C" void on_reload_signal(int) {
  const int saved_errno = errno;
  g_reloads.fetch_add(1);
  write_wake_byte();
  errno = saved_errno;
}

// When the first stop signal came (CLOCK_MONOTONIC, ns).
std::atomic<long long> g_first_signal_ns{0};

long long monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

extern "C" void on_stop_signal(int) {
  const int saved_errno = errno;
  const long long now = monotonic_ns();
  if (g_signals.fetch_add(1) == 0) {
    g_first_signal_ns.store(now);
  } else if (now - g_first_signal_ns.load() >= kSameStopWindowNs) {
    _exit(130);
  }
  // A second signal within the window is the same stop: GNU timeout sends SIGTERM to the
  // command and then to its process group, both at once.
  write_wake_byte();
  errno = saved_errno;
}
}  // namespace

void wake_stop_waiter() { write_wake_byte(); }

bool output_reader_gone(int fd) {
  pollfd p{fd, 0, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP)) != 0;
}

std::optional<Status> wait_for_worker_or_stop(Worker& worker,
                                              const std::function<bool()>& should_stop) {
  for (;;) {
    if (auto stopped = worker.wait_for(std::chrono::milliseconds(0))) return stopped;
    if (stop_requested() || (should_stop && should_stop())) return std::nullopt;
    if (g_reloads.exchange(0) > 0) worker.refresh_streams();
    if (g_wake_pipe[0] < 0) {
      (void)worker.wait_for(std::chrono::seconds(1));
      continue;
    }
    pollfd p{g_wake_pipe[0], POLLIN, 0};
    if (poll(&p, 1, 1000) > 0) {
      char drain[64];
      while (read(g_wake_pipe[0], drain, sizeof drain) > 0) {
      }
    }
  }
}

namespace {
// Empties the self-pipe of wake-ups that were not a stop (wake_stop_waiter()); a stop's byte
// is left for every other waiter to see.
void drain_wake_pipe_unless_stopped() {
  if (stop_requested()) return;
  char drain[64];
  while (read(g_wake_pipe[0], drain, sizeof drain) > 0) {
  }
}
}  // namespace

bool wait_readable_or_stop(int fd) {
  for (;;) {
    if (stop_requested()) return false;
    pollfd p[2] = {{fd, POLLIN, 0}, {g_wake_pipe[0], POLLIN, 0}};
    // Without the self-pipe (it could not be made), the flag is looked at once a second.
    const int n = poll(p, g_wake_pipe[0] < 0 ? 1 : 2, g_wake_pipe[0] < 0 ? 1000 : -1);
    if (n < 0 && errno != EINTR) return true;  // read() then says what is wrong
    if (n > 0 && p[0].revents != 0) return !stop_requested();
    if (n > 0 && p[1].revents != 0) drain_wake_pipe_unless_stopped();
  }
}

bool wait_for_stop(std::chrono::milliseconds timeout) {
  if (stop_requested()) return true;
  if (g_wake_pipe[0] < 0) {
    std::this_thread::sleep_for(std::min(timeout, std::chrono::milliseconds(1000)));
    return stop_requested();
  }
  pollfd p{g_wake_pipe[0], POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) > 0) drain_wake_pipe_unless_stopped();
  return stop_requested();
}

void install_stop_signals() {
  if (g_wake_pipe[0] < 0 && pipe2(g_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    g_wake_pipe[0] = g_wake_pipe[1] = -1;  // then the waiter looks once a second
  }
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

bool stop_requested() { return g_signals.load() > 0; }

void install_reload_signal() {
  struct sigaction sa {};
  sa.sa_handler = on_reload_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGHUP, &sa, nullptr);
}

void say(std::string_view command, std::string_view message, LogLevel level) {
  const char* format = std::getenv("KCL_LOG_FORMAT");
  if (format != nullptr && std::string_view(format) == "json") {
    // Every level: the command's messages are shown whatever KCL_LOG_LEVEL says, as in text.
    static const std::shared_ptr<Logger> json =
        make_stderr_logger(LogLevel::kDebug, LogFormat::kJson);
    json->log(level, "kcl " + std::string(command), message);
    return;
  }
  std::cerr << "kcl " << command << ": " << message << "\n";
}

int report_error(std::string_view command, const Status& status) {
  say(command, status.to_string(), LogLevel::kError);
  return 1;
}

}  // namespace kcl::cli
