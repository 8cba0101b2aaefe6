// producer/producer_access.h: builds a Producer around a given Kinesis client (tests,
// benchmarks, the CLI).
#pragma once

#include <memory>

#include "kcl/producer.h"
#include "kinesis/kinesis_client.h"

namespace kcl::producer {

struct ProducerAccess {
  // Errors as Producer::create.
  static Result<std::unique_ptr<Producer>> make(ProducerConfig config,
                                                std::shared_ptr<kinesis::KinesisClient> client,
                                                Dependencies deps = {});
};

}  // namespace kcl::producer
