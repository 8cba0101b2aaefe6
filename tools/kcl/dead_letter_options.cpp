#include "dead_letter_options.h"

#include "base/status_macros.h"
#include "kcl/dead_letter.h"

namespace kcl::cli {

Status apply_dead_letter_options(const DeadLetterOptions& o, const AwsConfig& aws,
                                 WorkerConfig& config, std::unique_ptr<Producer>& producer) {
  if (!o.file.empty() && !o.stream.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  "give " + o.flag_file + " or " + o.flag_stream + ", not both");
  }
  if (!o.any()) return Status::Ok();
  config.processing.on_processor_error = ProcessorErrorPolicy::kDeadLetter;
  config.processing.max_attempts_before_dead_letter = o.max_attempts;
  if (!o.file.empty()) {
    auto sink = make_file_dead_letter_sink(o.file);
    KCL_RETURN_IF_ERROR(sink.status());
    config.processing.dead_letter_sink = *sink;
    return Status::Ok();
  }
  ProducerConfig pc;
  pc.stream_name = o.stream;
  pc.aws = aws;
  pc.aggregate = false;  // one dead letter, one record: readable by any consumer
  pc.linger = std::chrono::milliseconds(0);
  auto made = Producer::create(pc);
  if (!made.ok()) {
    return Status(made.status().code(),
                  o.flag_stream + " " + o.stream + ": " + made.status().message());
  }
  producer = std::move(*made);
  config.processing.dead_letter_sink = make_stream_dead_letter_sink(*producer);
  return Status::Ok();
}

}  // namespace kcl::cli
