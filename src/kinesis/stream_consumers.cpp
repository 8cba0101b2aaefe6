#include "kinesis/stream_consumers.h"

#include <string>

#include "base/status_macros.h"

namespace kcl::kinesis {

Result<std::string> stream_arn(KinesisClient& client, std::string_view stream) {
  KCL_ASSIGN_OR_RETURN(StreamSummary summary, client.describe_stream_summary(stream));
  if (summary.stream_arn.empty()) {
    return Status(StatusCode::kInternal, "Kinesis.DescribeStreamSummary: stream " +
                                             std::string(stream) +
                                             " has no StreamARN in the answer (fan-out needs it)");
  }
  return summary.stream_arn;
}

Result<StreamConsumer> ensure_stream_consumer(KinesisClient& client, std::string_view arn,
                                              std::string_view name, const Clock& clock,
                                              std::chrono::milliseconds deadline) {
  const Clock::MonoTime until = clock.now() + deadline;
  auto found = client.describe_stream_consumer(arn, name);
  if (!found.ok() && found.status().code() == StatusCode::kNotFound) {
    auto registered = client.register_stream_consumer(arn, name);
    if (registered.ok()) {
      found = std::move(registered);
    } else if (registered.status().code() == StatusCode::kAlreadyExists) {
      // Another worker of the application registered it first: use that one.
      found = client.describe_stream_consumer(arn, name);
    } else {
      return registered.status().with_context("registering stream consumer " + std::string(name) +
                                              ": ");
    }
  }
  for (;;) {
    if (!found.ok()) {
      // Just registered and not visible yet (eventual consistency): look again.
      if (found.status().code() != StatusCode::kNotFound) return found.status();
    } else if (found->consumer_status == "ACTIVE") {
      return found;
    } else if (found->consumer_status == "DELETING") {
      return Status(StatusCode::kFailedPrecondition,
                    "stream consumer " + std::string(name) +
                        " is being deregistered; use another consumer name or try again later");
    }
    if (clock.now() + std::chrono::seconds(1) > until) {
      return Status(StatusCode::kDeadlineExceeded,
                    "stream consumer " + std::string(name) + " did not become ACTIVE within " +
                        std::to_string(deadline.count()) + " ms" +
                        (found.ok() ? " (status " + found->consumer_status + ")" : ""));
    }
    clock.idle_for(std::chrono::seconds(1));  // a control-plane wait, at start only
    found = client.describe_stream_consumer(arn, name);
  }
}

}  // namespace kcl::kinesis
