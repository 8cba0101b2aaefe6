// Poison records for `kcl consume` (--dead-letter-file, --dead-letter-stream, --max-attempts)
// and `kcl multilang` (deadLetterFile, deadLetterStream, maxAttemptsBeforeDeadLetter): the
// worker's ProcessorErrorPolicy::kDeadLetter with a file or stream sink (kcl/dead_letter.h).
#pragma once

#include <memory>
#include <string>

#include "kcl/aws_config.h"
#include "kcl/producer.h"
#include "kcl/status.h"
#include "kcl/worker.h"

namespace kcl::cli {

struct DeadLetterOptions {
  std::string file;    // a JSON-lines file; or
  std::string stream;  // a stream, written through a producer
  // Failures of a batch before it is bisected, and of a record alone before it is set aside.
  int max_attempts = 3;
  // `flag_file` / `flag_stream`: how the two are named to the user (flags or property keys).
  std::string flag_file = "--dead-letter-file";
  std::string flag_stream = "--dead-letter-stream";
  bool any() const { return !file.empty() || !stream.empty(); }
};

// With a file or a stream: config.processing gets kDeadLetter, the attempts and the sink; a
// stream sink's producer (on `aws`) is kept in `producer`, which must outlive the worker.
// Nothing changes without either. Errors: both given; the file cannot be opened; the stream
// cannot be written (not found).
Status apply_dead_letter_options(const DeadLetterOptions& o, const AwsConfig& aws,
                                 WorkerConfig& config, std::unique_ptr<Producer>& producer);

}  // namespace kcl::cli
