// kcl/dependencies.h: what a Worker, a PullConsumer or a Producer takes from the application
// instead of making its own. Every member is optional; the same struct goes to all three.
//
//   kcl::Dependencies deps;
//   deps.metrics = std::make_shared<MyStatsdSink>();   // kcl/metrics.h
//   deps.logger = kcl::make_stderr_logger(kcl::LogLevel::kWarn, kcl::LogFormat::kJson);
//   kcl::Worker worker(config, factory, deps);
//   auto producer = kcl::Producer::create(producer_config, deps);
#pragma once

#include <memory>

#include "kcl/clock.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"

namespace kcl {

struct Dependencies {
  // Where metric points go. Default: discarded (a Worker with an HTTP endpoint or CloudWatch
  // configured still publishes there).
  std::shared_ptr<MetricsSink> metrics;
  // Where log lines go. Default: make_default_logger() (stderr; level and format from
  // KCL_LOG_LEVEL and KCL_LOG_FORMAT).
  std::shared_ptr<Logger> logger;
  // Every time and wait. Default: SystemClock; tests inject a ManualClock. Must outlive
  // the object it is given to.
  const Clock* clock = nullptr;
};

}  // namespace kcl
