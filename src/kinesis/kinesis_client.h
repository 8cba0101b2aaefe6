// KinesisClient: the Kinesis Data Streams operations kcl-cpp needs, in one calling style.
// Each returns Result<...>; errors carry AwsErrorDetails (operation, endpoint, HTTP status,
// AWS error type, request id). Notable mappings: ResourceNotFoundException -> kNotFound,
// ExpiredIteratorException -> kExpiredIterator, ProvisionedThroughputExceededException /
// LimitExceededException / 5xx -> kUnavailable, ResourceInUseException -> kAlreadyExists.
//
// Thread safety: all methods may be called from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aws/aws_json_client.h"
#include "kcl/aws_config.h"
#include "kinesis/kinesis_types.h"
#include "kinesis/put_records_request.h"

namespace kcl::kinesis {

struct ListShardsPage {
  std::vector<Shard> shards;
  std::string next_token;  // empty when this was the last page
};

class KinesisClient {
 public:
  explicit KinesisClient(std::shared_ptr<aws::AwsJsonClient> client);

  // The wire of the data calls (GetRecords, PutRecord, PutRecords made from entries,
  // SubscribeToShard's request; a PutRecordsRequest carries its own): JSON (the default) or
  // CBOR (kinesis/kinesis_cbor.h). The answers come back in the request's encoding. Set it
  // before the client is shared between threads.
  void set_wire(Wire wire) { wire_ = wire; }
  Wire wire() const { return wire_; }

  // One page. Pass next_token from the previous page only (never invent one).
  Result<ListShardsPage> list_shards_page(std::string_view stream, const ShardFilter& filter,
                                          std::string_view next_token, int max_results = 1000);
  // Every shard of the stream, following NextToken pages.
  Result<std::vector<Shard>> list_shards(std::string_view stream, const ShardFilter& filter = {});

  Result<StreamSummary> describe_stream_summary(std::string_view stream);

  Result<std::string> get_shard_iterator(std::string_view stream, std::string_view shard_id,
                                         const IteratorPosition& position);
  // The same within a caller's budget (CallOptions), and a closed shard with nothing at or
  // after the position (Kinesis answers a null ShardIterator) as an empty optional.
  Result<std::optional<std::string>> get_shard_iterator(std::string_view stream,
                                                        std::string_view shard_id,
                                                        const IteratorPosition& position,
                                                        const aws::CallOptions& options);

  Result<GetRecordsResult> get_records(std::string_view shard_iterator, int limit = 10000);
  // The same into `out`, reusing its storage (records' strings are overwritten in place),
  // within a caller's budget. The records path of the polling records source. With a `sink`,
  // the records go to it as they are parsed and out.records stays empty (see RecordSink).
  Status get_records(std::string_view shard_iterator, int limit, GetRecordsResult& out,
                     const aws::CallOptions& options, RecordSink* sink = nullptr);

  Result<PutRecordResult> put_record(std::string_view stream, const PutRecordsEntry& entry);
  // Up to 500 entries / 5 MiB; per-record failures are reported in the result, not as an
  // error.
  Result<PutRecordsResult> put_records(std::string_view stream,
                                       const std::vector<PutRecordsEntry>& entries);
  // The same within a caller's budget (e.g. max_attempts = 1 for a caller that retries the
  // failed records itself with the client's retry policy).
  Result<PutRecordsResult> put_records(std::string_view stream,
                                       const std::vector<PutRecordsEntry>& entries,
                                       const aws::CallOptions& options);
  // The same for a request built record by record (the producer's path: no copy of a
  // record's data or keys before the body). Errors as above.
  Result<PutRecordsResult> put_records(PutRecordsRequest request, const aws::CallOptions& options);

  Status create_stream(std::string_view stream, int shard_count);
  Status delete_stream(std::string_view stream);
  // Waits (polling DescribeStreamSummary) until the stream is ACTIVE or the deadline passes.
  Status wait_for_active(std::string_view stream, std::chrono::milliseconds deadline);
  Status split_shard(std::string_view stream, std::string_view shard_id,
                     std::string_view new_starting_hash_key);
  Status merge_shards(std::string_view stream, std::string_view shard_id,
                      std::string_view adjacent_shard_id);

  // Enhanced fan-out consumers (by the stream's ARN, from describe_stream_summary).
  // RegisterStreamConsumer: kAlreadyExists when the name is taken (ResourceInUse).
  Result<StreamConsumer> register_stream_consumer(std::string_view stream_arn,
                                                  std::string_view consumer_name);
  Result<StreamConsumer> describe_stream_consumer(std::string_view stream_arn,
                                                  std::string_view consumer_name);
  // Every consumer of the stream, following NextToken pages.
  Result<std::vector<StreamConsumer>> list_stream_consumers(std::string_view stream_arn);
  Status deregister_stream_consumer(std::string_view stream_arn, std::string_view consumer_name);

  // SubscribeToShard's request, signed, for aws::StreamingTransport (the response is an
  // event stream: see retrieval/fanout_source.h).
  Result<aws::HttpRequest> subscribe_to_shard_request(std::string_view consumer_arn,
                                                      std::string_view shard_id,
                                                      const IteratorPosition& position);

  aws::AwsJsonClient& raw() { return *client_; }
  // The retry policy of the underlying client; nullptr for clients without one (fakes).
  aws::RetryPolicy* retry_policy() { return client_->retry_policy(); }

 private:
  std::shared_ptr<aws::AwsJsonClient> client_;
  Wire wire_ = Wire::kJson;
};

// The wire `configured` means for a client of `endpoint` without asking the server
// (KinesisWire::kAuto: CBOR on an AWS host, *.amazonaws.com or *.amazonaws.com.cn, JSON
// elsewhere), and in `reason` why.
Wire choose_wire(KinesisWire configured, std::string_view endpoint, std::string& reason);

// The wire for `client`, and in `reason` why, for the log line a program writes once at
// start: choose_wire's answer, except that kAuto on an endpoint that is not AWS's sends one
// CBOR probe first (below) and uses CBOR only when the server passed it. The probe never
// fails the caller: no answer within 5 s, or any answer but the expected one, means JSON.
Wire decide_wire(KinesisClient& client, KinesisWire configured, std::string& reason);

// The CBOR probe: GetShardIterator AT_TIMESTAMP, in CBOR, for shard 0 of a stream that does
// not exist (kCborProbeStream), the timestamp written as the AWS SDKs write it (tag 1, epoch
// milliseconds). Nothing is created or changed whatever the server does with it. A server
// that reads the CBOR wire answers ResourceNotFoundException (or, should the stream exist, a
// ShardIterator), in CBOR. One that maps CBOR items onto its JSON model cannot read the
// tagged timestamp and answers SerializationException: kinesalite does, and for the same
// reason it cannot give back record data put in CBOR (it stores the byte string as an
// object), so it must stay on JSON.
inline constexpr std::string_view kCborProbeStream = "kcl-cpp-cbor-wire-probe-no-such-stream";
std::string cbor_wire_probe_request(std::int64_t epoch_millis);
// What the probe's answer says: `answer` is what AwsJsonClient::call returned (the body, or
// the error), `content_type` the answer's Content-Type (empty when none came). kCbor only
// for ResourceNotFoundException or one CBOR map, answered as application/x-amz-cbor-1.1;
// `reason` says what was seen either way.
Wire judge_cbor_probe(const Result<std::string>& answer, std::string_view content_type,
                      std::string& reason);
// "cbor" / "json" / "auto" (what --wire and the configuration files take); false otherwise.
bool parse_kinesis_wire(std::string_view text, KinesisWire& out);

// Parses a GetRecords response body (JSON) into `out`, base64-decoding each record's data.
// Fast path used by the client and by bench/. Errors: kInternal naming what was malformed.
// `out` is overwritten (on error it is left empty); its records are views into a fresh
// out.buffer holding a padded copy of `json`. Uses a simdjson parser from a pool of two
// shared by the process (a third concurrent parse waits for one), reused across calls.
Status parse_get_records_response(std::string_view json, GetRecordsResult& out);
// The same without the copy: takes the body (moved into out.buffer, its capacity grown only
// if it has less than simdjson's padding past the end) and decodes the records in place in it.
// With a `sink`, the records go to it as they are parsed instead of into out.records.
Status parse_get_records_response_in_place(std::string&& json, GetRecordsResult& out,
                                           RecordSink* sink = nullptr);
// A SubscribeToShardEvent's JSON payload (Records as in GetRecords; ContinuationSequenceNumber
// in continuation_sequence_number, absent at the shard's end; no NextShardIterator), lying at
// [offset, offset + size) of `buffer` (the event-stream frame it came in): the buffer becomes
// out.buffer and the records are decoded in place in it (its capacity grown only if it has
// less than simdjson's padding past the payload). With a `sink`, as for GetRecords.
Status parse_subscribe_to_shard_event_in_place(std::string&& buffer, std::size_t offset,
                                               std::size_t size, GetRecordsResult& out,
                                               RecordSink* sink = nullptr);

}  // namespace kcl::kinesis
