// ReportedSeries: a base::FailureSeries of one kind of coordination call (heartbeat, lock
// renewal, own-entry poll, leader pass) that logs what the series says and
// exports it: the count "coordination.call_failures" and the gauge
// "coordination.failing_calls" (failures in a row, 0 once it recovered), each tagged
// operation = the call's name.
//
// Thread safety: as base::FailureSeries; the logger and the sink must be thread-safe.
#pragma once

#include <string>

#include "base/failure_series.h"
#include "kcl/clock.h"
#include "kcl/logging.h"
#include "kcl/metrics.h"

namespace kcl::coordination {

class ReportedSeries {
 public:
  // `operation` tags the metrics ("heartbeat"); `what` names it in the log ("heartbeat of
  // the membership"). Everything given must outlive the series; `logger` may be null.
  ReportedSeries(std::string operation, std::string what, std::string component, Logger* logger,
                 MetricsSink& metrics, const Clock& clock)
      : operation_(std::move(operation)),
        component_(std::move(component)),
        series_(std::move(what)),
        logger_(logger),
        metrics_(metrics),
        clock_(clock) {}

  void failed(const Status& why) {
    const MetricTag tag{"operation", operation_};
    metrics_.count("coordination.call_failures", 1, MetricTags(&tag, 1));
    auto line = series_.failed(why, clock_.now());
    metrics_.gauge("coordination.failing_calls", static_cast<double>(series_.consecutive()),
                   MetricTags(&tag, 1));
    if (line) log(LogLevel::kWarn, *line);
  }
  void succeeded() {
    auto line = series_.succeeded(clock_.now());
    if (!line) return;
    const MetricTag tag{"operation", operation_};
    metrics_.gauge("coordination.failing_calls", 0, MetricTags(&tag, 1));
    log(LogLevel::kInfo, *line);
  }
  // Both in one: `s` ok or not.
  void record(const Status& s) {
    if (s.ok()) {
      succeeded();
    } else {
      failed(s);
    }
  }
  const base::FailureSeries& series() const { return series_; }
  const std::string& operation() const { return operation_; }

 private:
  void log(LogLevel level, const std::string& line) {
    if (logger_ && logger_->enabled(level)) logger_->log(level, component_, line);
  }

  const std::string operation_;
  const std::string component_;
  base::FailureSeries series_;
  Logger* logger_;
  MetricsSink& metrics_;
  const Clock& clock_;
};

}  // namespace kcl::coordination
