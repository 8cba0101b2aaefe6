// kcl tail --stream S [--from trim-horizon|latest|<ISO time>] [--max N] [--raw]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <iostream>

#include "commands.h"
#include "tail_reader.h"

namespace kcl::cli {

namespace {
struct TailFlags {
  std::string stream;
  std::string from = "trim-horizon";
  long long max = 0;
  bool raw = false;
  bool stop_at_end = false;
  bool fan_out = false;
  std::string consumer_name = "kcl-tail";
  long long read_rate = 2LL << 20;  // RetrievalConfig::max_read_bytes_per_second
};

int run_tail(const GlobalOptions& g, const TailFlags& f) {
  auto from = parse_start_position(f.from);
  if (!from.ok()) return report_error("tail", from.status());
  if (f.read_rate > 0 && f.read_rate < 1024) {
    return report_error("tail", Status(StatusCode::kInvalidArgument,
                                       "--read-rate is " + std::to_string(f.read_rate) +
                                           "; it must be 0 (no pacing by bytes) or at least 1024"));
  }
  auto made = make_kinesis_for_data(g);
  if (!made.ok()) return report_error("tail", made.status());
  std::shared_ptr<kinesis::KinesisClient> client = std::move(made).value();
  install_stop_signals();
  TailOptions o;
  if (f.fan_out) {
    auto factory = make_fanout_factory(client, f.stream, f.consumer_name, RetrievalConfig{},
                                       g.aws_config().http);
    if (!factory.ok()) return report_error("tail", factory.status());
    o.source_factory = std::move(factory).value();
  }
  o.stream = f.stream;
  o.from = *from;
  o.max_records = f.max;
  o.stop_at_end = f.stop_at_end;
  o.read_rate = static_cast<std::size_t>(f.read_rate);
  // A write that fails stops the read: quietly when the reader of the output left (`| head`),
  // with an error otherwise (a full disk: what was printed is not all there was).
  int write_error = 0;
  auto written = [&write_error] {
    if (std::cout) return true;
    if (write_error == 0) write_error = errno != 0 ? errno : EIO;
    return false;
  };
  o.before_wait = [&] {
    errno = 0;
    std::cout.flush();
    return written() && !output_reader_gone(STDOUT_FILENO);
  };
  std::ios::sync_with_stdio(false);
  TailReader reader(*client, o, [&](const Record& r) {
    errno = 0;
    write_record(std::cout, r, f.raw);
    return written();
  });
  Status s = reader.run();
  errno = 0;
  std::cout.flush();
  written();
  if (reader.corrupt_aggregates() > 0) {
    std::cerr << "kcl tail: " << reader.corrupt_aggregates()
              << " KPL aggregate(s) failed their check and were printed as they came\n";
  }
  if (!s.ok()) return report_error("tail", s);
  if (write_error != 0 && write_error != EPIPE) {
    return report_error(
        "tail", Status(StatusCode::kInternal, std::string("cannot write standard output: ") +
                                                  std::strerror(write_error) + " (after " +
                                                  std::to_string(reader.emitted()) + " records)"));
  }
  return 0;
}
}  // namespace

void add_tail_command(CLI::App& parent, const GlobalOptions& global, int& exit_code) {
  auto f = std::make_shared<TailFlags>();
  auto* cmd = parent.add_subcommand(
      "tail",
      "Read every shard of a stream (no leases, no checkpoints; children are read after their "
      "parents end) and print one JSON object per record: shardId, sequenceNumber, "
      "subSequenceNumber, partitionKey, approximateArrivalTimestamp, data (base64). KPL "
      "aggregates are split into their records.");
  cmd->add_option("--stream", f->stream, "Stream name")->required();
  cmd->add_option("--from", f->from,
                  "Where to start: trim-horizon (default), latest, or an ISO 8601 time "
                  "such as 2026-11-22T10:00:00Z");
  cmd->add_option("--max", f->max, "Stop after this many records (default: no limit)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--raw", f->raw, "Print only each record's data, as a line of text");
  cmd->add_flag("--stop-at-end", f->stop_at_end,
                "Stop once every shard is read up to its latest record");
  cmd->add_flag("--fan-out", f->fan_out,
                "Read with enhanced fan-out (SubscribeToShard over HTTP/2) through a stream "
                "consumer, found or registered first");
  cmd->add_option("--consumer-name", f->consumer_name,
                  "The stream consumer for --fan-out (default kcl-tail)");
  add_read_rate_option(*cmd, f->read_rate);
  cmd->callback([&global, &exit_code, f] { exit_code = run_tail(global, *f); });
}

}  // namespace kcl::cli
