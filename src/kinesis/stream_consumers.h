// kinesis/stream_consumers.h: finding or registering the enhanced fan-out consumer of an
// application, as concurrent workers of one application do at start.
//
// ensure_stream_consumer(): DescribeStreamConsumer; when it does not exist,
// RegisterStreamConsumer; when another worker registered it meanwhile (ResourceInUse),
// describe again; then wait until it is ACTIVE. A consumer that exists is reused, never
// registered twice. Registration is rate limited by AWS (5 per second per account, 5
// CREATING at once, 20 per stream): throttling is retried by the client's policy, and the
// wait for ACTIVE polls at most once a second.
//
// Thread safety: as KinesisClient.
#pragma once

#include <chrono>
#include <string_view>

#include "kcl/clock.h"
#include "kinesis/kinesis_client.h"

namespace kcl::kinesis {

// The stream's ARN (DescribeStreamSummary).
Result<std::string> stream_arn(KinesisClient& client, std::string_view stream);

// Errors: kDeadlineExceeded when it is not ACTIVE within `deadline`; AWS errors otherwise.
Result<StreamConsumer> ensure_stream_consumer(KinesisClient& client, std::string_view stream_arn,
                                              std::string_view consumer_name, const Clock& clock,
                                              std::chrono::milliseconds deadline);

}  // namespace kcl::kinesis
