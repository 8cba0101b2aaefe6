// Pieces shared by the `kcl` subcommands: global flags, client construction, record output,
// time parsing, and signal-driven stop.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "dynamodb/dynamodb_client.h"
#include "kcl/aws_config.h"
#include "kcl/logging.h"
#include "kcl/record.h"
#include "kcl/retrieval_config.h"
#include "kcl/start_position.h"
#include "kcl/status.h"
#include "kcl/worker.h"
#include "kinesis/kinesis_client.h"
#include "retrieval/records_source.h"

namespace CLI {
class App;
}

namespace kcl::cli {

// Flags every subcommand accepts.
struct GlobalOptions {
  std::string region;
  std::string endpoint_url;
  std::string profile;
  std::string ca_bundle;
  bool no_verify_tls = false;
  std::string wire = "auto";  // the Kinesis data calls' encoding: auto, cbor or json
  void add_to(CLI::App& app);
  AwsConfig aws_config() const;
  // Sets in `c` (a properties file's settings) the flags that were given, and only those:
  // the command line wins where it speaks, and the file's other settings (its HTTP timeouts,
  // TLS settings, region or endpoint when no flag names one) stay.
  void override_given(AwsConfig& c) const;
};

// --read-rate (RetrievalConfig::max_read_bytes_per_second) on a polling command.
void add_read_rate_option(CLI::App& cmd, long long& rate);

// A Kinesis client for control-plane calls (always JSON: no wire to choose, no probe).
Result<std::unique_ptr<kinesis::KinesisClient>> make_kinesis(const GlobalOptions& g);
// A Kinesis client for data calls (GetRecords, PutRecords, SubscribeToShard): its wire chosen
// by --wire (kinesis::decide_wire: auto probes an endpoint that is not AWS's once).
Result<std::unique_ptr<kinesis::KinesisClient>> make_kinesis_for_data(const GlobalOptions& g);
Result<std::unique_ptr<dynamodb::DynamoDbClient>> make_dynamodb(const GlobalOptions& g);
// Finds or registers stream consumer `consumer_name` of `stream` and makes fan-out records
// sources through it (one HTTP/2 transport shared by every shard).
Result<retrieval::RecordsSourceFactory> make_fanout_factory(
    std::shared_ptr<kinesis::KinesisClient> client, const std::string& stream,
    const std::string& consumer_name, const RetrievalConfig& retrieval, const HttpConfig& http);

// "2026-11-22T10:00:00Z", "2026-11-22T10:00:00.250+01:00", "2026-11-22 10:00:00" (UTC).
Result<std::chrono::system_clock::time_point> parse_iso8601(std::string_view text);
std::string format_iso8601(std::chrono::system_clock::time_point t);

// Where a read starts (--from): trim-horizon, latest or an ISO 8601 time.
Result<StartPosition> parse_start_position(std::string_view text);

// One JSON object per record:
// {"shardId","sequenceNumber","subSequenceNumber","partitionKey",
//  "approximateArrivalTimestamp","data"} with data in base64; with raw=true only the data
// followed by a newline.
void write_record(std::ostream& out, const Record& r, bool raw);

// Whether the reader of output `fd` went away (a pipe whose reading end closed, a terminal
// hung up), found without writing: poll() reports POLLERR or POLLHUP. False for a file.
bool output_reader_gone(int fd);

// SIGINT / SIGTERM handling: the first signal sets stop_requested(); a second one exits the
// process at once (status 130).
void install_stop_signals();
bool stop_requested();
// Waits until `fd` can be read (data, its end or an error) or a stop signal came; false once
// stop_requested(). A command that reads its input (kcl put) stops reading at the first
// signal this way, whichever thread the signal was delivered to.
bool wait_readable_or_stop(int fd);
// Sleeps until a stop signal came (true), or wake_stop_waiter() was called or `timeout`
// passed (false).
bool wait_for_stop(std::chrono::milliseconds timeout);
// SIGHUP: wait_for_worker_or_stop makes the worker read its stream tracker again at once
// (Worker::refresh_streams), e.g. after --streams-file changed.
void install_reload_signal();
// Wakes a thread in wait_for_worker_or_stop (from any thread; a signal wakes it as well).
void wake_stop_waiter();
// The main loop of a command that runs a worker: sleeps until a stop signal arrives,
// wake_stop_waiter() is called or a second passes, and returns the worker's status once it
// stopped on its own, or nullopt once a signal came or `should_stop` says so. It sleeps in
// poll() on a pipe the signal handler writes to, so a quiet worker's main thread wakes once
// a second, not many times.
std::optional<Status> wait_for_worker_or_stop(Worker& worker,
                                              const std::function<bool()>& should_stop = {});

// A command's own message on stderr: "kcl <cmd>: <message>", or, when KCL_LOG_FORMAT is json
// (kcl consume --log-format json sets it), a JSON log line like the library's (component
// "kcl <cmd>"), so that everything on stderr is one format.
void say(std::string_view command, std::string_view message, LogLevel level = LogLevel::kInfo);

// Says the error (as say(), level ERROR) and returns the exit status for it.
int report_error(std::string_view command, const Status& status);

}  // namespace kcl::cli
