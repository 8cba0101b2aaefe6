// KinesisClient: request bodies with nlohmann::json, responses with simdjson (DOM for the
// small control-plane answers, On-Demand for GetRecords; see get_records_parser.cpp).
#include "kinesis/kinesis_client.h"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_set>
#include <utility>

#include "aws/base64.h"
#include "aws/cbor.h"
#include "aws/json_text.h"
#include "aws/retry.h"
#include "base/status_macros.h"
#include "kinesis/epoch_seconds.h"
#include "kinesis/kinesis_cbor.h"
#include "kinesis/shard_indexer.h"

namespace kcl::kinesis {
namespace {

using nlohmann::json;
namespace dom = simdjson::dom;

double to_epoch_seconds(std::chrono::system_clock::time_point tp) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(tp.time_since_epoch()).count();
  // Millisecond precision is what Kinesis keeps; keep microseconds and let the service round.
  return static_cast<double>(us) / 1e6;
}

const char* shard_filter_name(ShardFilterType t) {
  switch (t) {
    case ShardFilterType::kNone:
      return "";
    case ShardFilterType::kAfterShardId:
      return "AFTER_SHARD_ID";
    case ShardFilterType::kAtTrimHorizon:
      return "AT_TRIM_HORIZON";
    case ShardFilterType::kFromTrimHorizon:
      return "FROM_TRIM_HORIZON";
    case ShardFilterType::kAtLatest:
      return "AT_LATEST";
    case ShardFilterType::kAtTimestamp:
      return "AT_TIMESTAMP";
    case ShardFilterType::kFromTimestamp:
      return "FROM_TIMESTAMP";
  }
  return "";
}

// Serializes a request; strings that are not valid UTF-8 (a partition key, say) are an
// invalid argument, not an exception.
Result<std::string> dump(const json& j, std::string_view op) {
  try {
    return j.dump(-1, ' ', false, json::error_handler_t::strict);
  } catch (const json::exception& e) {
    return Status(StatusCode::kInvalidArgument,
                  "Kinesis." + std::string(op) + ": request not serializable: " + e.what());
  }
}

// Reads one small JSON response with simdjson DOM and reports what is wrong with it as
// kInternal "<Service>.<Op>: malformed response: <what>", with the call's details.
class ResponseReader {
 public:
  ResponseReader(const aws::AwsJsonClient& client, std::string_view op)
      : op_("Kinesis." + std::string(op)), endpoint_(client.endpoint()) {}

  Status bad(std::string_view what) const {
    AwsErrorDetails d;
    d.operation = op_;
    d.endpoint = endpoint_;
    d.http_status = 200;
    return Status(StatusCode::kInternal, op_ + ": malformed response: " + std::string(what),
                  std::move(d));
  }

  Result<dom::object> parse(const std::string& body) {
    thread_local dom::parser parser;
    dom::element root;
    if (auto err = parser.parse(body).get(root)) {
      return bad(std::string("invalid JSON: ") + simdjson::error_message(err));
    }
    dom::object obj;
    if (root.get_object().get(obj)) return bad("top level is not an object");
    return obj;
  }

  // Required string.
  Status str(dom::object obj, std::string_view key, std::string& out, std::string_view path) const {
    dom::element e;
    if (obj.at_key(key).get(e) || e.is_null()) return bad(std::string(path) + ": missing");
    std::string_view s;
    if (e.get_string().get(s)) return bad(std::string(path) + ": not a string");
    out.assign(s);
    return Status::Ok();
  }
  // Optional string: absent or null leaves `out` unchanged.
  Status opt_str(dom::object obj, std::string_view key, std::string& out,
                 std::string_view path) const {
    dom::element e;
    if (obj.at_key(key).get(e) || e.is_null()) return Status::Ok();
    std::string_view s;
    if (e.get_string().get(s)) return bad(std::string(path) + ": not a string");
    out.assign(s);
    return Status::Ok();
  }
  Status opt_int(dom::object obj, std::string_view key, std::int64_t& out,
                 std::string_view path) const {
    dom::element e;
    if (obj.at_key(key).get(e) || e.is_null()) return Status::Ok();
    if (e.get_int64().get(out)) return bad(std::string(path) + ": not an integer");
    return Status::Ok();
  }
  Status opt_seconds(dom::object obj, std::string_view key,
                     std::chrono::system_clock::time_point& out, std::string_view path) const {
    dom::element e;
    if (obj.at_key(key).get(e) || e.is_null()) return Status::Ok();
    double secs = 0;
    if (e.get_double().get(secs) || !std::isfinite(secs)) {
      return bad(std::string(path) + ": not a number");
    }
    out = from_epoch_seconds(secs);
    return Status::Ok();
  }
  Status obj_at(dom::object obj, std::string_view key, dom::object& out, std::string_view path,
                bool required) const {
    dom::element e;
    if (obj.at_key(key).get(e) || e.is_null()) {
      return required ? bad(std::string(path) + ": missing") : Status::Ok();
    }
    if (e.get_object().get(out)) return bad(std::string(path) + ": not an object");
    return Status::Ok();
  }
  Status arr_at(dom::object obj, std::string_view key, dom::array& out, std::string_view path,
                bool required, bool& present) const {
    present = false;
    dom::element e;
    if (obj.at_key(key).get(e) || e.is_null()) {
      return required ? bad(std::string(path) + ": missing") : Status::Ok();
    }
    if (e.get_array().get(out)) return bad(std::string(path) + ": not an array");
    present = true;
    return Status::Ok();
  }

 private:
  std::string op_;
  std::string endpoint_;
};

Status parse_shard(const ResponseReader& r, dom::element e, Shard& shard, const std::string& path) {
  dom::object o;
  if (e.get_object().get(o)) return r.bad(path + ": not an object");
  KCL_RETURN_IF_ERROR(r.str(o, "ShardId", shard.shard_id, path + ".ShardId"));
  KCL_RETURN_IF_ERROR(
      r.opt_str(o, "ParentShardId", shard.parent_shard_id, path + ".ParentShardId"));
  KCL_RETURN_IF_ERROR(r.opt_str(o, "AdjacentParentShardId", shard.adjacent_parent_shard_id,
                                path + ".AdjacentParentShardId"));
  dom::object range;
  KCL_RETURN_IF_ERROR(r.obj_at(o, "HashKeyRange", range, path + ".HashKeyRange", true));
  KCL_RETURN_IF_ERROR(r.str(range, "StartingHashKey", shard.hash_key_range.starting_hash_key,
                            path + ".HashKeyRange.StartingHashKey"));
  KCL_RETURN_IF_ERROR(r.str(range, "EndingHashKey", shard.hash_key_range.ending_hash_key,
                            path + ".HashKeyRange.EndingHashKey"));
  dom::object seq;
  KCL_RETURN_IF_ERROR(r.obj_at(o, "SequenceNumberRange", seq, path + ".SequenceNumberRange", true));
  KCL_RETURN_IF_ERROR(r.str(seq, "StartingSequenceNumber",
                            shard.sequence_number_range.starting_sequence_number,
                            path + ".SequenceNumberRange.StartingSequenceNumber"));
  KCL_RETURN_IF_ERROR(r.opt_str(seq, "EndingSequenceNumber",
                                shard.sequence_number_range.ending_sequence_number,
                                path + ".SequenceNumberRange.EndingSequenceNumber"));
  return Status::Ok();
}

Status add_details(Status s, const aws::AwsJsonClient& client, std::string_view op) {
  if (s.ok() || s.aws().has_value()) return s;
  AwsErrorDetails d;
  d.operation = "Kinesis." + std::string(op);
  d.endpoint = client.endpoint();
  d.http_status = 200;
  return Status(s.code(), s.message(), std::move(d));
}

// An endpoint's host: between "://" and the next ':' or '/'.
std::string_view host_of(std::string_view endpoint) {
  if (const std::size_t scheme = endpoint.find("://"); scheme != std::string_view::npos) {
    endpoint.remove_prefix(scheme + 3);
  }
  return endpoint.substr(0, endpoint.find_first_of(":/"));
}

}  // namespace

Wire choose_wire(KinesisWire configured, std::string_view endpoint, std::string& reason) {
  switch (configured) {
    case KinesisWire::kCbor:
      reason = "configured";
      return Wire::kCbor;
    case KinesisWire::kJson:
      reason = "configured";
      return Wire::kJson;
    case KinesisWire::kAuto:
      break;
  }
  const std::string_view host = host_of(endpoint);
  std::string lower(host);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto ends_with = [&lower](std::string_view suffix) {
    return lower.size() > suffix.size() &&
           lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".amazonaws.com") || ends_with(".amazonaws.com.cn")) {
    reason = "auto: " + std::string(host) + " is an AWS endpoint";
    return Wire::kCbor;
  }
  reason = "auto: " + std::string(host) + " is not an AWS endpoint";
  return Wire::kJson;
}

std::string cbor_wire_probe_request(std::int64_t epoch_millis) {
  std::string body;
  aws::cbor::Writer w(body);
  w.map(4);
  w.text("StreamName");
  w.text(kCborProbeStream);
  w.text("ShardId");
  w.text("shardId-000000000000");
  w.text("ShardIteratorType");
  w.text("AT_TIMESTAMP");
  w.text("Timestamp");
  w.tag(aws::cbor::kTagEpochTime);
  w.integer(epoch_millis);
  return body;
}

Wire judge_cbor_probe(const Result<std::string>& answer, std::string_view content_type,
                      std::string& reason) {
  const bool answered =
      answer.ok() || (answer.status().aws().has_value() && answer.status().aws()->http_status != 0);
  if (!answered) {
    reason = "the CBOR probe got no answer (" + answer.status().message() + ")";
    return Wire::kJson;
  }
  // The media type, without parameters or case.
  std::string media(content_type.substr(0, content_type.find(';')));
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.pop_back();
  for (char& c : media) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (media != kCborContentType) {
    reason = "the CBOR probe was answered in " +
             (media.empty() ? std::string("no stated encoding") : media) + ", not CBOR";
    return Wire::kJson;
  }
  if (answer.ok()) {
    // Should the probe's stream exist: a ShardIterator, in one CBOR map.
    std::string body = *answer;
    aws::cbor::Reader r(body.data(), body.size());
    aws::cbor::Head h;
    if (!r.head(h) || h.major != aws::cbor::Major::kMap || !r.skip_body(h) || !r.at_end()) {
      reason = std::string("the CBOR probe's answer is not one CBOR map (") +
               (r.error() != nullptr ? r.error() : "another item or trailing bytes") + ")";
      return Wire::kJson;
    }
    reason =
        "the server read the CBOR probe (GetShardIterator with a tagged timestamp) and "
        "answered in CBOR";
    return Wire::kCbor;
  }
  const std::optional<AwsErrorDetails>& d = answer.status().aws();
  if (d.has_value() && d->error_type == "ResourceNotFoundException") {
    reason =
        "the server read the CBOR probe (GetShardIterator with a tagged timestamp) and "
        "answered ResourceNotFoundException in CBOR";
    return Wire::kCbor;
  }
  reason = "the CBOR probe was refused (" + answer.status().message() + ")";
  if (d.has_value() && d->error_type == "SerializationException") {
    reason +=
        ": the server does not read CBOR as the AWS SDKs write it (kinesalite answers so, "
        "and cannot give back record data put in CBOR)";
  }
  return Wire::kJson;
}

Wire decide_wire(KinesisClient& client, KinesisWire configured, std::string& reason) {
  const Wire chosen = choose_wire(configured, client.raw().endpoint(), reason);
  if (configured != KinesisWire::kAuto || chosen == Wire::kCbor) return chosen;
  aws::CallOptions probe;
  probe.max_attempts = 1;
  probe.request_timeout = std::chrono::seconds(5);
  probe.deadline = std::chrono::seconds(5);
  probe.content_type = kCborContentType;
  std::string content_type;
  probe.answer_content_type = &content_type;
  // An hour ago: a timestamp no server rejects for being in the future.
  const auto an_hour_ago = std::chrono::system_clock::now() - std::chrono::hours(1);
  const Result<std::string> answer = client.raw().call(
      "GetShardIterator",
      cbor_wire_probe_request(
          std::chrono::duration_cast<std::chrono::milliseconds>(an_hour_ago.time_since_epoch())
              .count()),
      probe);
  std::string why;
  const Wire wire = judge_cbor_probe(answer, content_type, why);
  reason += "; " + why;
  return wire;
}

bool parse_kinesis_wire(std::string_view text, KinesisWire& out) {
  if (text == "auto") {
    out = KinesisWire::kAuto;
  } else if (text == "cbor") {
    out = KinesisWire::kCbor;
  } else if (text == "json") {
    out = KinesisWire::kJson;
  } else {
    return false;
  }
  return true;
}

KinesisClient::KinesisClient(std::shared_ptr<aws::AwsJsonClient> client)
    : client_(std::move(client)) {}

Result<ListShardsPage> KinesisClient::list_shards_page(std::string_view stream,
                                                       const ShardFilter& filter,
                                                       std::string_view next_token,
                                                       int max_results) {
  json req = json::object();
  if (!next_token.empty()) {
    // The token identifies the stream and the listing; StreamName (and the filter that
    // started the listing) must not be sent with it.
    req["NextToken"] = next_token;
  } else {
    req["StreamName"] = stream;
    if (filter.type != ShardFilterType::kNone) {
      json f = json::object();
      f["Type"] = shard_filter_name(filter.type);
      if (filter.type == ShardFilterType::kAfterShardId) f["ShardId"] = filter.shard_id;
      if (filter.type == ShardFilterType::kAtTimestamp ||
          filter.type == ShardFilterType::kFromTimestamp) {
        if (!filter.timestamp) {
          return Status(StatusCode::kInvalidArgument,
                        "Kinesis.ListShards: ShardFilter " +
                            std::string(shard_filter_name(filter.type)) + " needs a timestamp");
        }
        f["Timestamp"] = to_epoch_seconds(*filter.timestamp);
      }
      req["ShardFilter"] = std::move(f);
    }
  }
  if (max_results > 0) req["MaxResults"] = max_results;

  KCL_ASSIGN_OR_RETURN(std::string request, dump(req, "ListShards"));
  KCL_ASSIGN_OR_RETURN(std::string body, client_->call("ListShards", std::move(request)));
  ResponseReader r(*client_, "ListShards");
  KCL_ASSIGN_OR_RETURN(dom::object top, r.parse(body));
  ListShardsPage page;
  dom::array shards;
  bool present = false;
  KCL_RETURN_IF_ERROR(r.arr_at(top, "Shards", shards, "Shards", false, present));
  if (present) {
    std::size_t i = 0;
    for (dom::element e : shards) {
      Shard shard;
      KCL_RETURN_IF_ERROR(parse_shard(r, e, shard, "Shards[" + std::to_string(i++) + "]"));
      page.shards.push_back(std::move(shard));
    }
  }
  KCL_RETURN_IF_ERROR(r.opt_str(top, "NextToken", page.next_token, "NextToken"));
  return page;
}

Result<std::vector<Shard>> KinesisClient::list_shards(std::string_view stream,
                                                      const ShardFilter& filter) {
  // An expired NextToken (a very long listing) restarts the listing from the beginning a
  // few times; a token that repeats would loop forever and is treated as a bad peer.
  constexpr int kMaxRestarts = 3;
  constexpr int kMaxPages = 100000;
  int restarts = 0;
  std::vector<Shard> all;
  std::unordered_set<std::string> seen_ids;
  std::unordered_set<std::string> seen_tokens;
  std::string token;
  for (int pages = 0;; ++pages) {
    if (pages >= kMaxPages)
      return ResponseReader(*client_, "ListShards").bad("more than 100000 pages");
    auto page = list_shards_page(stream, filter, token);
    if (!page.ok()) {
      const auto& aws = page.status().aws();
      if (!token.empty() && aws && aws->error_type == "ExpiredNextTokenException" &&
          restarts < kMaxRestarts) {
        ++restarts;
        all.clear();
        seen_ids.clear();
        seen_tokens.clear();
        token.clear();
        continue;
      }
      return page.status();
    }
    for (auto& s : page->shards) {
      if (seen_ids.insert(s.shard_id).second) all.push_back(std::move(s));
    }
    if (page->next_token.empty()) return all;
    if (!seen_tokens.insert(page->next_token).second) {
      return ResponseReader(*client_, "ListShards").bad("NextToken repeats");
    }
    token = std::move(page->next_token);
  }
}

Result<StreamSummary> KinesisClient::describe_stream_summary(std::string_view stream) {
  json req = {{"StreamName", stream}};
  KCL_ASSIGN_OR_RETURN(std::string request, dump(req, "DescribeStreamSummary"));
  KCL_ASSIGN_OR_RETURN(std::string body,
                       client_->call("DescribeStreamSummary", std::move(request)));
  ResponseReader r(*client_, "DescribeStreamSummary");
  KCL_ASSIGN_OR_RETURN(dom::object top, r.parse(body));
  dom::object d;
  KCL_RETURN_IF_ERROR(
      r.obj_at(top, "StreamDescriptionSummary", d, "StreamDescriptionSummary", true));
  StreamSummary s;
  const std::string p = "StreamDescriptionSummary.";
  KCL_RETURN_IF_ERROR(r.str(d, "StreamName", s.stream_name, p + "StreamName"));
  KCL_RETURN_IF_ERROR(r.opt_str(d, "StreamARN", s.stream_arn, p + "StreamARN"));
  KCL_RETURN_IF_ERROR(r.str(d, "StreamStatus", s.stream_status, p + "StreamStatus"));
  std::int64_t open = 0, retention = 0;
  KCL_RETURN_IF_ERROR(r.opt_int(d, "OpenShardCount", open, p + "OpenShardCount"));
  KCL_RETURN_IF_ERROR(r.opt_int(d, "RetentionPeriodHours", retention, p + "RetentionPeriodHours"));
  s.open_shard_count = static_cast<int>(open);
  s.retention_period_hours = static_cast<int>(retention);
  KCL_RETURN_IF_ERROR(r.opt_seconds(d, "StreamCreationTimestamp", s.creation_timestamp,
                                    p + "StreamCreationTimestamp"));
  return s;
}

namespace {
// The sequence number (under `sequence_key`) or timestamp a position needs.
Status add_position(json& into, const IteratorPosition& position, const char* sequence_key,
                    std::string_view operation, std::string_view shard_id) {
  switch (position.type) {
    case IteratorType::kAtSequenceNumber:
    case IteratorType::kAfterSequenceNumber:
      if (position.sequence_number.empty()) {
        return Status(StatusCode::kInvalidArgument,
                      std::string(operation) + ": " + iterator_type_name(position.type) +
                          " needs a sequence number (shard " + std::string(shard_id) + ")");
      }
      into[sequence_key] = position.sequence_number;
      break;
    case IteratorType::kAtTimestamp:
      into["Timestamp"] = to_epoch_seconds(position.timestamp);
      break;
    case IteratorType::kTrimHorizon:
    case IteratorType::kLatest:
      break;
  }
  return Status::Ok();
}

Status read_consumer(ResponseReader& r, dom::object c, StreamConsumer& out, const std::string& p) {
  KCL_RETURN_IF_ERROR(r.str(c, "ConsumerName", out.consumer_name, p + "ConsumerName"));
  KCL_RETURN_IF_ERROR(r.str(c, "ConsumerARN", out.consumer_arn, p + "ConsumerARN"));
  KCL_RETURN_IF_ERROR(r.str(c, "ConsumerStatus", out.consumer_status, p + "ConsumerStatus"));
  return r.opt_seconds(c, "ConsumerCreationTimestamp", out.creation_timestamp,
                       p + "ConsumerCreationTimestamp");
}
}  // namespace

Result<StreamConsumer> KinesisClient::register_stream_consumer(std::string_view stream_arn,
                                                               std::string_view consumer_name) {
  json req = {{"StreamARN", stream_arn}, {"ConsumerName", consumer_name}};
  KCL_ASSIGN_OR_RETURN(std::string request, dump(req, "RegisterStreamConsumer"));
  KCL_ASSIGN_OR_RETURN(std::string body,
                       client_->call("RegisterStreamConsumer", std::move(request)));
  ResponseReader r(*client_, "RegisterStreamConsumer");
  KCL_ASSIGN_OR_RETURN(dom::object top, r.parse(body));
  dom::object c;
  KCL_RETURN_IF_ERROR(r.obj_at(top, "Consumer", c, "Consumer", true));
  StreamConsumer out;
  KCL_RETURN_IF_ERROR(read_consumer(r, c, out, "Consumer."));
  return out;
}

Result<StreamConsumer> KinesisClient::describe_stream_consumer(std::string_view stream_arn,
                                                               std::string_view consumer_name) {
  json req = {{"StreamARN", stream_arn}, {"ConsumerName", consumer_name}};
  KCL_ASSIGN_OR_RETURN(std::string request, dump(req, "DescribeStreamConsumer"));
  KCL_ASSIGN_OR_RETURN(std::string body,
                       client_->call("DescribeStreamConsumer", std::move(request)));
  ResponseReader r(*client_, "DescribeStreamConsumer");
  KCL_ASSIGN_OR_RETURN(dom::object top, r.parse(body));
  dom::object c;
  KCL_RETURN_IF_ERROR(r.obj_at(top, "ConsumerDescription", c, "ConsumerDescription", true));
  StreamConsumer out;
  KCL_RETURN_IF_ERROR(read_consumer(r, c, out, "ConsumerDescription."));
  return out;
}

Result<std::vector<StreamConsumer>> KinesisClient::list_stream_consumers(
    std::string_view stream_arn) {
  std::vector<StreamConsumer> all;
  std::string token;
  for (int page = 0; page < 1000; ++page) {
    json req = {{"StreamARN", stream_arn}};
    if (!token.empty()) req["NextToken"] = token;
    KCL_ASSIGN_OR_RETURN(std::string request, dump(req, "ListStreamConsumers"));
    KCL_ASSIGN_OR_RETURN(std::string body,
                         client_->call("ListStreamConsumers", std::move(request)));
    ResponseReader r(*client_, "ListStreamConsumers");
    KCL_ASSIGN_OR_RETURN(dom::object top, r.parse(body));
    dom::array consumers;
    bool present = false;
    KCL_RETURN_IF_ERROR(r.arr_at(top, "Consumers", consumers, "Consumers", false, present));
    if (present) {
      std::size_t i = 0;
      for (dom::element e : consumers) {
        dom::object c;
        const std::string p = "Consumers[" + std::to_string(i++) + "].";
        if (e.get(c)) return r.bad(p + ": not an object");
        StreamConsumer out;
        KCL_RETURN_IF_ERROR(read_consumer(r, c, out, p));
        all.push_back(std::move(out));
      }
    }
    token.clear();
    KCL_RETURN_IF_ERROR(r.opt_str(top, "NextToken", token, "NextToken"));
    if (token.empty()) return all;
  }
  return Status(StatusCode::kInternal,
                "Kinesis.ListStreamConsumers: more than 1000 pages; giving up");
}

Status KinesisClient::deregister_stream_consumer(std::string_view stream_arn,
                                                 std::string_view consumer_name) {
  json req = {{"StreamARN", stream_arn}, {"ConsumerName", consumer_name}};
  KCL_ASSIGN_OR_RETURN(std::string request, dump(req, "DeregisterStreamConsumer"));
  KCL_ASSIGN_OR_RETURN(std::string body,
                       client_->call("DeregisterStreamConsumer", std::move(request)));
  (void)body;
  return Status::Ok();
}

Result<std::string> KinesisClient::get_shard_iterator(std::string_view stream,
                                                      std::string_view shard_id,
                                                      const IteratorPosition& position) {
  KCL_ASSIGN_OR_RETURN(auto it, get_shard_iterator(stream, shard_id, position, {}));
  if (!it) {
    return add_details(Status(StatusCode::kInternal,
                              "Kinesis.GetShardIterator: malformed response: ShardIterator: "
                              "missing (a closed shard with nothing at or after the position)"),
                       *client_, "GetShardIterator");
  }
  return std::move(*it);
}

Result<aws::HttpRequest> KinesisClient::subscribe_to_shard_request(
    std::string_view consumer_arn, std::string_view shard_id, const IteratorPosition& position) {
  if (wire_ == Wire::kCbor) {
    KCL_ASSIGN_OR_RETURN(std::string request,
                         cbor_subscribe_to_shard_request(consumer_arn, shard_id, position));
    return client_->signed_request("SubscribeToShard", std::move(request), kCborContentType);
  }
  json start = {{"Type", iterator_type_name(position.type)}};
  KCL_RETURN_IF_ERROR(
      add_position(start, position, "SequenceNumber", "Kinesis.SubscribeToShard", shard_id));
  json req = {{"ConsumerARN", consumer_arn}, {"ShardId", shard_id}, {"StartingPosition", start}};
  KCL_ASSIGN_OR_RETURN(std::string request, dump(req, "SubscribeToShard"));
  return client_->signed_request("SubscribeToShard", std::move(request));
}

Result<std::optional<std::string>> KinesisClient::get_shard_iterator(
    std::string_view stream, std::string_view shard_id, const IteratorPosition& position,
    const aws::CallOptions& options) {
  json req = {{"StreamName", stream},
              {"ShardId", shard_id},
              {"ShardIteratorType", iterator_type_name(position.type)}};
  KCL_RETURN_IF_ERROR(
      add_position(req, position, "StartingSequenceNumber", "Kinesis.GetShardIterator", shard_id));
  KCL_ASSIGN_OR_RETURN(std::string request, dump(req, "GetShardIterator"));
  KCL_ASSIGN_OR_RETURN(std::string body,
                       client_->call("GetShardIterator", std::move(request), options));
  ResponseReader r(*client_, "GetShardIterator");
  KCL_ASSIGN_OR_RETURN(dom::object top, r.parse(body));
  std::string it;
  KCL_RETURN_IF_ERROR(r.opt_str(top, "ShardIterator", it, "ShardIterator"));
  // Absent or null: a closed shard with nothing at or after the position (the Java KCL
  // treats it as the end of the shard).
  if (it.empty()) return std::optional<std::string>();
  return std::optional<std::string>(std::move(it));
}

Result<GetRecordsResult> KinesisClient::get_records(std::string_view shard_iterator, int limit) {
  GetRecordsResult out;
  KCL_RETURN_IF_ERROR(get_records(shard_iterator, limit, out, aws::CallOptions{}));
  return out;
}

Status KinesisClient::get_records(std::string_view shard_iterator, int limit, GetRecordsResult& out,
                                  const aws::CallOptions& options, RecordSink* sink) {
  if (wire_ == Wire::kCbor) {
    aws::CallOptions cbor = options;
    cbor.content_type = kCborContentType;
    KCL_ASSIGN_OR_RETURN(
        std::string body,
        client_->call("GetRecords", cbor_get_records_request(shard_iterator, limit), cbor));
    Status s = parse_get_records_cbor_in_place(std::move(body), out, sink);
    if (!s.ok()) return add_details(std::move(s), *client_, "GetRecords");
    return Status::Ok();
  }
  json req = {{"ShardIterator", shard_iterator}};
  if (limit > 0) req["Limit"] = limit;
  KCL_ASSIGN_OR_RETURN(std::string request, dump(req, "GetRecords"));
  KCL_ASSIGN_OR_RETURN(std::string body, client_->call("GetRecords", std::move(request), options));
  Status s = parse_get_records_response_in_place(std::move(body), out, sink);
  if (!s.ok()) return add_details(std::move(s), *client_, "GetRecords");
  return Status::Ok();
}

Result<PutRecordResult> KinesisClient::put_record(std::string_view stream,
                                                  const PutRecordsEntry& entry) {
  if (wire_ == Wire::kCbor) {
    if (!aws::is_valid_utf8(stream) || !aws::is_valid_utf8(entry.partition_key) ||
        !aws::is_valid_utf8(entry.explicit_hash_key)) {
      return Status(StatusCode::kInvalidArgument,
                    "Kinesis.PutRecord: request not serializable: the stream name, partition key "
                    "or explicit hash key is not valid UTF-8");
    }
    aws::CallOptions cbor;
    cbor.content_type = kCborContentType;
    KCL_ASSIGN_OR_RETURN(std::string body,
                         client_->call("PutRecord", cbor_put_record_request(stream, entry), cbor));
    PutRecordResult out;
    Status s = parse_put_record_cbor(body, out);
    if (!s.ok()) return add_details(std::move(s), *client_, "PutRecord");
    return out;
  }
  json req = {{"StreamName", stream},
              {"Data", aws::base64_encode(entry.data)},
              {"PartitionKey", entry.partition_key}};
  if (!entry.explicit_hash_key.empty()) req["ExplicitHashKey"] = entry.explicit_hash_key;
  KCL_ASSIGN_OR_RETURN(std::string request, dump(req, "PutRecord"));
  KCL_ASSIGN_OR_RETURN(std::string body, client_->call("PutRecord", std::move(request)));
  ResponseReader r(*client_, "PutRecord");
  KCL_ASSIGN_OR_RETURN(dom::object top, r.parse(body));
  PutRecordResult out;
  KCL_RETURN_IF_ERROR(r.str(top, "ShardId", out.shard_id, "ShardId"));
  KCL_RETURN_IF_ERROR(r.str(top, "SequenceNumber", out.sequence_number, "SequenceNumber"));
  return out;
}

Result<PutRecordsResult> KinesisClient::put_records(std::string_view stream,
                                                    const std::vector<PutRecordsEntry>& entries) {
  return put_records(stream, entries, aws::CallOptions{});
}

Result<PutRecordsResult> KinesisClient::put_records(std::string_view stream,
                                                    const std::vector<PutRecordsEntry>& entries,
                                                    const aws::CallOptions& options) {
  if (!aws::is_valid_utf8(stream)) {
    return Status(StatusCode::kInvalidArgument,
                  "Kinesis.PutRecords: request not serializable: the stream name is not valid "
                  "UTF-8");
  }
  PutRecordsRequest request(stream, wire_);
  std::size_t bytes = 0;
  for (const auto& e : entries) bytes += e.data.size() + e.partition_key.size();
  request.reserve(entries.size(), bytes);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const PutRecordsEntry& e = entries[i];
    if (!aws::is_valid_utf8(e.partition_key) || !aws::is_valid_utf8(e.explicit_hash_key)) {
      return Status(StatusCode::kInvalidArgument,
                    "Kinesis.PutRecords: request not serializable: Records[" + std::to_string(i) +
                        "]: the partition key or explicit hash key is not valid UTF-8");
    }
    request.add(e.data, e.partition_key, e.explicit_hash_key);
  }
  return put_records(std::move(request), options);
}

namespace {

// One entry of a PutRecords answer into out.records[i], read in one pass over its members
// (no lookup per member, no Status unless it is malformed). Its position's strings are kept
// only with `keep_positions`. Members other than the four are ignored; null is absent.
Status parse_put_records_entry(const ResponseReader& r, dom::element e, std::size_t i,
                               bool keep_positions, PutRecordsResult& out, ShardIndexer& shards) {
  PutRecordsEntryResult& res = out.records[i];
  auto bad = [&](std::string_view field, std::string_view what) {
    return r.bad("Records[" + std::to_string(i) + "]" + std::string(field) + std::string(what));
  };
  dom::object o;
  if (e.get_object().get(o)) return bad("", ": not an object");
  std::string_view sequence_number, shard_id, error_code, error_message;
  bool has_sequence_number = false, has_shard_id = false;
  for (dom::key_value_pair member : o) {
    const std::string_view key = member.key;
    std::string_view* field = nullptr;
    bool* present = nullptr;
    if (key == "SequenceNumber") {
      field = &sequence_number;
      present = &has_sequence_number;
    } else if (key == "ShardId") {
      field = &shard_id;
      present = &has_shard_id;
    } else if (key == "ErrorCode") {
      field = &error_code;
    } else if (key == "ErrorMessage") {
      field = &error_message;
    } else {
      continue;
    }
    if (member.value.is_null()) continue;
    if (member.value.get_string().get(*field)) {
      return bad("." + std::string(key), ": not a string");
    }
    if (present != nullptr) *present = true;
  }
  if (!error_code.empty() || !error_message.empty()) {
    res.error_code.assign(error_code);
    res.error_message.assign(error_message);
    if (!error_code.empty()) return Status::Ok();
  }
  if (!has_sequence_number) return bad(".SequenceNumber", ": missing");
  if (!has_shard_id) return bad(".ShardId", ": missing");
  if (keep_positions) {
    res.sequence_number.assign(sequence_number);
    res.shard_id.assign(shard_id);
  }
  res.shard = shards.index_of(shard_id);
  res.ok = true;
  return Status::Ok();
}

}  // namespace

Result<PutRecordsResult> KinesisClient::put_records(PutRecordsRequest request,
                                                    const aws::CallOptions& options) {
  const std::size_t sent = request.records();
  const bool keep_positions = request.keeps_positions();
  if (request.wire() == Wire::kCbor) {
    aws::CallOptions cbor = options;
    cbor.content_type = kCborContentType;
    KCL_ASSIGN_OR_RETURN(std::string body,
                         client_->call("PutRecords", std::move(request).take_body(), cbor));
    PutRecordsResult out;
    Status s = parse_put_records_cbor(body, sent, keep_positions, out);
    if (!s.ok()) return add_details(std::move(s), *client_, "PutRecords");
    return out;
  }
  KCL_ASSIGN_OR_RETURN(std::string body,
                       client_->call("PutRecords", std::move(request).take_body(), options));
  ResponseReader r(*client_, "PutRecords");
  KCL_ASSIGN_OR_RETURN(dom::object top, r.parse(body));
  PutRecordsResult out;
  std::int64_t failed = 0;
  KCL_RETURN_IF_ERROR(r.opt_int(top, "FailedRecordCount", failed, "FailedRecordCount"));
  dom::array arr;
  bool present = false;
  KCL_RETURN_IF_ERROR(r.arr_at(top, "Records", arr, "Records", true, present));
  if (arr.size() != sent) {
    return r.bad("Records: " + std::to_string(arr.size()) + " results for " + std::to_string(sent) +
                 " entries");
  }
  out.records.resize(sent);
  std::size_t i = 0;
  int counted_failures = 0;
  ShardIndexer shards(out.shard_ids);
  for (dom::element e : arr) {
    KCL_RETURN_IF_ERROR(parse_put_records_entry(r, e, i, keep_positions, out, shards));
    if (!out.records[i].ok) ++counted_failures;
    ++i;
  }
  // Trust the per-record results over the summary count.
  out.failed_record_count = counted_failures;
  (void)failed;
  return out;
}

Status KinesisClient::create_stream(std::string_view stream, int shard_count) {
  json req = {{"StreamName", stream}, {"ShardCount", shard_count}};
  KCL_ASSIGN_OR_RETURN(std::string request, dump(req, "CreateStream"));
  return client_->call("CreateStream", std::move(request)).status();
}

Status KinesisClient::delete_stream(std::string_view stream) {
  json req = {{"StreamName", stream}};
  KCL_ASSIGN_OR_RETURN(std::string request, dump(req, "DeleteStream"));
  return client_->call("DeleteStream", std::move(request)).status();
}

Status KinesisClient::wait_for_active(std::string_view stream, std::chrono::milliseconds deadline) {
  const Clock& clock = SystemClock::instance();
  const auto until = clock.now() + deadline;
  auto delay = std::chrono::milliseconds(20);
  Status last;
  std::string last_state;
  for (;;) {
    auto s = describe_stream_summary(stream);
    if (s.ok()) {
      if (s->stream_status == "ACTIVE") return Status::Ok();
      last_state = s->stream_status;
    } else if (s.status().code() != StatusCode::kNotFound &&
               !aws::is_retryable(s.status().code())) {
      return s.status();
    } else {
      // Not found yet (just created, eventually consistent) or transient: keep waiting.
      last = s.status();
    }
    if (clock.now() + delay > until) break;
    clock.idle_for(delay);  // a control-plane wait (tests, tools), never on a pool thread
    delay = std::min(delay * 2, std::chrono::milliseconds(1000));
  }
  std::string msg = "Kinesis: stream " + std::string(stream) + " not ACTIVE within " +
                    std::to_string(deadline.count()) + " ms";
  if (!last_state.empty())
    msg += " (status " + last_state + ")";
  else if (!last.ok())
    msg += " (last error: " + last.to_string() + ")";
  return Status(StatusCode::kDeadlineExceeded, msg);
}

Status KinesisClient::split_shard(std::string_view stream, std::string_view shard_id,
                                  std::string_view new_starting_hash_key) {
  json req = {{"StreamName", stream},
              {"ShardToSplit", shard_id},
              {"NewStartingHashKey", new_starting_hash_key}};
  KCL_ASSIGN_OR_RETURN(std::string request, dump(req, "SplitShard"));
  return client_->call("SplitShard", std::move(request)).status();
}

Status KinesisClient::merge_shards(std::string_view stream, std::string_view shard_id,
                                   std::string_view adjacent_shard_id) {
  json req = {{"StreamName", stream},
              {"ShardToMerge", shard_id},
              {"AdjacentShardToMerge", adjacent_shard_id}};
  KCL_ASSIGN_OR_RETURN(std::string request, dump(req, "MergeShards"));
  return client_->call("MergeShards", std::move(request)).status();
}

}  // namespace kcl::kinesis
