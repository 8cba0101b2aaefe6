#include "multilang/multilang_processor.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "aws/base64.h"
#include "base/repeat_report.h"

namespace kcl::multilang {

using nlohmann::json;

namespace {

// The Java exception name a checkpoint failure is reported as.
std::string error_name(const Status& s) {
  switch (s.code()) {
    case StatusCode::kLeaseLost:
      return "ShutdownException";
    case StatusCode::kInvalidArgument:
      return "IllegalArgumentException";
    case StatusCode::kUnavailable:
      if (s.aws() && s.aws()->error_type.find("Throughput") != std::string::npos) {
        return "ThrottlingException";
      }
      return "KinesisClientLibDependencyException";
    default:
      return "KinesisClientLibDependencyException";
  }
}

json position_json(const ExtendedSequenceNumber& p) {
  return {{"sequenceNumber", p.sequence_number()}, {"subSequenceNumber", p.sub_sequence_number()}};
}

// The checkpoint a child asked for: at `seq` / `sub`, or (a null sequence number) at the
// batch's last record, or SHARD_END at the shard's end.
Status checkpoint_as_asked(Checkpointer& checkpointer, const json& seq, const json& sub,
                           bool shard_end) {
  if (seq.is_null()) return checkpointer.checkpoint();
  if (!seq.is_string())
    return Status(StatusCode::kInvalidArgument, "sequenceNumber is not a string");
  SubSequenceNumber n = 0;
  if (sub.is_number_unsigned()) {
    n = sub.get<SubSequenceNumber>();
  } else if (sub.is_string() && !sub.get<std::string>().empty() &&
             sub.get<std::string>().find_first_not_of("0123456789") == std::string::npos &&
             sub.get<std::string>().size() < 20) {
    n = std::stoull(sub.get<std::string>());  // as Java reads "3" into a Long
  } else if (!sub.is_null()) {
    return Status(StatusCode::kInvalidArgument,
                  "subSequenceNumber " + sub.dump() + " is not a number of 0 or more");
  }
  return seq.get<std::string>() == "SHARD_END" && shard_end
             ? checkpointer.checkpoint()
             : checkpointer.checkpoint(seq.get<std::string>(), n);
}

}  // namespace

MultiLangProcessor::MultiLangProcessor(ChildOptions options, std::shared_ptr<Logger> logger)
    : options_(std::move(options)), logger_(std::move(logger)) {}

MultiLangProcessor::~MultiLangProcessor() {
  if (child_) child_->stop();
}

void MultiLangProcessor::log(LogLevel level, const std::string& message) const {
  if (logger_ && logger_->enabled(level)) logger_->log(level, component_, message);
}

void MultiLangProcessor::fail(const std::string& what) {
  std::string how;
  if (child_) {
    child_->stop(std::chrono::seconds(2));
    how = " (" + child_->exit_description() + ")";
    child_.reset();
  }
  const std::string message = "record processor of shard " + shard_id_ + ": " + what + how +
                              "; it is stopped and a new one starts before the next delivery";
  ++failures_in_a_row_;
  if (base::worth_reporting(failures_in_a_row_)) {
    log(LogLevel::kError,
        failures_in_a_row_ == 1
            ? message
            : message + " (failure " + std::to_string(failures_in_a_row_) + " in a row)");
  }
  throw std::runtime_error(message);
}

void MultiLangProcessor::ensure_child(Checkpointer* checkpointer) {
  if (child_) return;
  auto started = ChildProcess::start(options_.command, logger_, component_);
  if (!started.ok()) fail(started.status().message());
  child_ = std::move(started).value();
  ++children_started_;
  // A restarted child begins where the shard's checkpoint is now.
  ExtendedSequenceNumber at = init_->starting_position;
  if (checkpointer && children_started_ > 1) at = checkpointer->last_checkpoint();
  json m = {{"action", "initialize"}, {"shardId", shard_id_}};
  // Several streams (kcl-cpp's streamNames): the child is told which one (processors of the
  // MultiLangDaemon protocol ignore keys they do not know).
  if (options_.tell_stream) m["streamName"] = init_->stream_name;
  m.update(position_json(at));
  exchange("initialize", m.dump(), nullptr);
}

std::chrono::steady_clock::time_point MultiLangProcessor::next_deadline() const {
  if (options_.response_timeout.count() <= 0) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() + options_.response_timeout;
}

std::string MultiLangProcessor::timeout_text(const Status& s) const {
  return s.code() == StatusCode::kDeadlineExceeded
             ? " (timeoutInSeconds: " + std::to_string(options_.response_timeout.count()) + " ms)"
             : std::string();
}

void MultiLangProcessor::exchange(const std::string& action, const std::string& message,
                                  Checkpointer* checkpointer, bool shard_end) {
  if (!child_) fail("no child process");
  // As the Java daemon: the timeout bounds each message the child sends (the first one counted
  // from when the message to it began to be written), not the whole exchange, so a child that
  // checkpoints along a long batch is not taken for hung.
  auto deadline = next_deadline();
  Status w = child_->write_line(message, deadline);
  if (!w.ok()) fail("sending " + action + ": " + w.message() + timeout_text(w));
  for (;;) {
    const json m = read_message(action, deadline);
    if (m["action"] == "status") {
      const auto& for_what = m.contains("responseFor") ? m["responseFor"] : json(nullptr);
      if (!for_what.is_string() || for_what.get<std::string>() != action) {
        fail("answered " + action + " with a status for " +
             (for_what.is_string() ? for_what.get<std::string>() : for_what.dump()));
      }
      return;
    }
    answer_checkpoint(m, checkpointer, shard_end);
    deadline = next_deadline();
  }
}

nlohmann::json MultiLangProcessor::read_message(const std::string& action,
                                                std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    auto line = child_->read_line(deadline);
    if (!line.ok()) {
      fail("waiting for the answer to " + action + ": " + line.status().message() +
           timeout_text(line.status()));
    }
    json m = json::parse(*line, nullptr, false);
    if (m.is_object() && m.contains("action") &&
        (m["action"] == "status" || m["action"] == "checkpoint")) {
      return m;
    }
    // As the Java daemon: a line that is not a status or a checkpoint (a print left in the
    // child's code, a library's banner) is skipped, logged at the 1st, 3rd, 10th, 100th, ...
    ++lines_skipped_;
    if (base::worth_reporting(lines_skipped_)) {
      log(LogLevel::kWarn,
          "skipped a line on the record processor's output that is not a status or a checkpoint"
          " (" +
              std::to_string(lines_skipped_) + (lines_skipped_ == 1 ? " line" : " lines") +
              " so far): " + line->substr(0, 200));
    }
  }
}

void MultiLangProcessor::answer_checkpoint(const nlohmann::json& request,
                                           Checkpointer* checkpointer, bool shard_end) {
  json reply = {{"action", "checkpoint"}};
  reply["sequenceNumber"] =
      request.contains("sequenceNumber") ? request["sequenceNumber"] : json(nullptr);
  reply["subSequenceNumber"] =
      request.contains("subSequenceNumber") ? request["subSequenceNumber"] : json(nullptr);
  std::string error;
  if (!checkpointer) {
    error = "InvalidStateException";
  } else {
    Status s = checkpoint_as_asked(*checkpointer, reply["sequenceNumber"],
                                   reply["subSequenceNumber"], shard_end);
    if (!s.ok()) {
      error = error_name(s);
      log(LogLevel::kWarn, "checkpoint asked by the child failed: " + s.to_string());
    }
  }
  reply["error"] = error.empty() ? json(nullptr) : json(error);
  Status sent = child_->write_line(reply.dump(), next_deadline());
  if (!sent.ok()) fail("answering a checkpoint: " + sent.message() + timeout_text(sent));
}

void MultiLangProcessor::initialize(const InitializationInput& input) {
  shard_id_ = input.shard_id;
  component_ = "multilang " + shard_id_;
  init_ = input;
  ensure_child(nullptr);
}

void MultiLangProcessor::process_records(const ProcessRecordsInput& input) {
  ensure_child(&input.checkpointer);
  json records = json::array();
  for (const Record& r : input.records) {
    records.push_back(
        {{"action", "record"},
         {"data", aws::base64_encode(r.data())},
         {"partitionKey", r.partition_key()},
         {"sequenceNumber", r.sequence_number()},
         {"subSequenceNumber", r.sub_sequence_number()},
         {"approximateArrivalTimestamp", std::chrono::duration_cast<std::chrono::milliseconds>(
                                             r.approximate_arrival_timestamp().time_since_epoch())
                                             .count()}});
  }
  json m = {{"action", "processRecords"},
            {"records", std::move(records)},
            {"millisBehindLatest", input.millis_behind_latest}};
  exchange("processRecords", m.dump(), &input.checkpointer);
  failures_in_a_row_ = 0;
}

void MultiLangProcessor::lease_lost() {
  if (!child_) return;
  try {
    exchange("leaseLost", json{{"action", "leaseLost"}}.dump(), nullptr);
  } catch (const std::exception&) {
    // Already logged; the lease is gone either way.
  }
  if (child_) child_->stop();
  child_.reset();
}

void MultiLangProcessor::shard_ended(Checkpointer& checkpointer) {
  ensure_child(&checkpointer);
  exchange("shardEnded", json{{"action", "shardEnded"}}.dump(), &checkpointer, true);
  child_->stop();
  child_.reset();
}

void MultiLangProcessor::shutdown_requested(Checkpointer& checkpointer) {
  if (!child_) return;
  exchange("shutdownRequested", json{{"action", "shutdownRequested"}}.dump(), &checkpointer);
  // The worker lets the lease go once this returns; as under the Java MultiLangDaemon, the
  // child hears of it (leaseLost) before it is ended, and can release what it holds there.
  lease_lost();
}

}  // namespace kcl::multilang
