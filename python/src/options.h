// options.h: the keyword options of kcl.Worker, kcl.PullConsumer and kcl.Producer, read
// into the C++ configuration structs. Each option has the name of the C++ field it sets
// (flattened: `failover_time` for WorkerConfig::leases.failover_time); durations are seconds
// (int or float) or datetime.timedelta. Every problem (an unknown option, a value of the
// wrong type, then every rule the configuration's validate() checks) is collected and raised
// together as kcl.ConfigError. Call with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include "kcl/producer.h"
#include "kcl/pull_consumer.h"
#include "kcl/worker.h"

namespace kclpy {

namespace py = pybind11;

kcl::WorkerConfig worker_config_from(const py::dict& options);
// `options` applied over `base` (a configuration read from elsewhere, e.g. a properties file).
kcl::WorkerConfig worker_config_from(const py::dict& options, kcl::WorkerConfig base);
kcl::PullConsumerConfig pull_config_from(const py::dict& options);
kcl::ProducerConfig producer_config_from(const py::dict& options);
// The option names each accepts (for the stubs' and docs' checks).
py::list worker_option_names();
py::list pull_option_names();
py::list producer_option_names();

}  // namespace kclpy
